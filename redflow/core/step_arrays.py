"""Step records as the asyncio ``redflow`` package (0.0.25 and later) writes them.

It stores each step of ``P:run:<id>:steps`` as a compact JSON array instead
of the object of DATA_MODEL.md, its first item a status code:

- running:   ``[0, seq, attempt, startedAt, waitUntilAt?, childRunId?, wait?]``
- succeeded: ``[1, seq, attempt, outputJson, childRunId?]``
- failed:    ``[2, seq, attempt, errorJson, childRunId?]``
- canceled:  ``[3, seq, attempt, errorJson, childRunId?]``

``outputJson`` / ``errorJson`` are stored values: JSON text, or a
``@blob:`` reference (redflow/core/blobs.py). Optional items are left off
from the end, or written as null when a later one is present. A finished
step's times are not in its record (they are in ``P:run:<id>:trace``).
``wait`` is ``{"kind": "event", "event", "correlationKey"}`` or
``{"kind": "input", "message", "inputJsonSchema"?}``.

No I/O, and no field names of our own layout: :mod:`redflow.core.models`
turns an :class:`ArrayStep` into the object form. The encoders at the end
write records in this form for a worker that runs with
``compat="redflow-0.1"`` (a 0.1.x worker refuses the object form). A
durable wait of ours rides in the ``wait`` slot, which the asyncio package
reads as no wait of its own (it knows event waits by their ``correlationKey``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redflow.core import codec
from redflow.core.errors import CorruptDataError

RUNNING = 0
SUCCEEDED = 1
FAILED = 2
CANCELED = 3
#: Status code -> the status name of the object form.
STATUS_NAMES = {RUNNING: "running", SUCCEEDED: "succeeded", FAILED: "failed", CANCELED: "canceled"}


@dataclass(frozen=True, slots=True)
class ArrayStep:
    """One decoded array step record."""

    status: str
    seq: int
    attempt: int
    started_at: int | None = None  # running records only
    wait_until_at: int | None = None  # running: a durable sleep's wake time (ms)
    output: str | None = None  # succeeded: the stored output (JSON text or a @blob: reference)
    error: str | None = None  # failed / canceled: the stored error
    child_run_id: str | None = None
    wait: dict[str, Any] | None = None  # running: a wait (0.1.x's event or input wait, or one of ours)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def parse_step_array(record: list[Any], *, what: str) -> ArrayStep:
    """Decode one array step record (already JSON-decoded); :class:`CorruptDataError`
    naming ``what`` when it is not one the asyncio package would read."""
    if len(record) < 4:
        raise CorruptDataError(f"{what}: an array step record has at least 4 items: {record!r:.80}")
    code, seq, attempt, fourth = record[:4]
    if isinstance(code, bool) or code not in STATUS_NAMES:
        raise CorruptDataError(f"{what}: unknown status code in array step record: {record!r:.80}")
    if not _count(seq) or not _count(attempt):
        raise CorruptDataError(f"{what}: seq and attempt of an array step record are positive integers: {record!r:.80}")
    if code == RUNNING:
        if not isinstance(fourth, int) or isinstance(fourth, bool):
            raise CorruptDataError(f"{what}: a running array step record's startedAt is an integer: {record!r:.80}")
        wait_until_at = record[4] if len(record) > 4 and isinstance(record[4], int) and not isinstance(record[4], bool) else None
        wait = record[6] if len(record) > 6 and isinstance(record[6], dict) and isinstance(record[6].get("kind"), str) else None
        return ArrayStep("running", seq, attempt, started_at=fourth, wait_until_at=wait_until_at, child_run_id=_text(record, 5), wait=wait)
    if not isinstance(fourth, str):
        raise CorruptDataError(f"{what}: a finished array step record's payload is JSON text: {record!r:.80}")
    status = STATUS_NAMES[code]
    if code == SUCCEEDED:
        return ArrayStep(status, seq, attempt, output=fourth, child_run_id=_text(record, 4))
    return ArrayStep(status, seq, attempt, error=fourth, child_run_id=_text(record, 4))


def _text(record: list[Any], index: int) -> str | None:
    value = record[index] if len(record) > index else None
    return value if isinstance(value, str) and value else None


# -- encoders (a worker with compat="redflow-0.1") ----------------------------


def running_array(seq: int, attempt: int, started_at_ms: int, wake_at_ms: int | None = None, wait: Mapping[str, Any] | None = None) -> str:
    """A running record; ``wake_at_ms``: a sleep's wake time; ``wait``: any other wait (ours)."""
    record: list[Any] = [RUNNING, seq, attempt, started_at_ms]
    if wake_at_ms is not None or wait is not None:
        record.append(wake_at_ms)
    if wait is not None:
        record += [None, dict(wait)]
    return codec.dumps(record)


def finished_array(status: str, seq: int, attempt: int, payload_json: str) -> str:
    """A succeeded (``payload_json``: its output), failed or canceled (its error) record."""
    code = next(code for code, name in STATUS_NAMES.items() if name == status and code != RUNNING)
    return codec.dumps([code, seq, attempt, payload_json])
