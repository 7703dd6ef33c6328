"""The values runs carry, as the store holds them: one place encodes and decodes them.

Inputs, outputs, errors, step outputs, event payloads and progress values
are stored as JSON text in hash fields (DATA_MODEL.md), or, for a payload
over a size, as a ``@blob:`` reference into the run's blob hash (the
asyncio ``redflow`` package's large-payload form, redflow/core/blobs.py).
The client, the engine and the inline test runner write and read them
through :class:`Payloads` (``Store.payloads``; the inline runner makes its
own): references are written only when a threshold is set
(``create_client(..., blob_threshold=1024)``: the TypeScript 0.0.1 client
reads none), and read wherever a payload is read. Whole records read for
people (``Run.from_hash``, ``Step.from_json``: listings, the dashboard)
decode in ``core/models/`` from the text and blobs this module's readers
hand over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from redflow.core import blobs, codec
from redflow.core.errors import InputValidationError, SerializationError

#: A run's blob hash fields, as read: field -> blob value (None: missing).
Blobs = Mapping[str, str | None]


class Payloads:
    """Encode and decode run payloads (see the module docstring). ``threshold_bytes``:
    JSON text of more UTF-8 bytes than this is stored as a ``@blob:`` reference (None: never)."""

    __slots__ = ("threshold_bytes",)

    def __init__(self, threshold_bytes: int | None = None) -> None:
        self.threshold_bytes = blobs.check_threshold(threshold_bytes)

    def __repr__(self) -> str:
        return f"Payloads(threshold_bytes={self.threshold_bytes!r})"

    def dumps(self, value: Any, *, what: str = "value") -> str:
        """``value`` as JSON text; :class:`SerializationError` naming the path of what JSON refuses."""
        return codec.dumps(value, what=what)

    def stored(self, json_text: str) -> blobs.Stored:
        """How ``json_text`` goes into its field: itself, or (over the threshold) a
        reference, with the blob that the same script writes into the run's blob hash."""
        return blobs.encode(json_text, self.threshold_bytes)

    def loads(self, raw: str | None, *, what: str) -> Any:
        """A stored payload's value (``None`` for a missing field);
        :class:`CorruptDataError` naming ``what`` when it does not decode."""
        return None if raw is None else codec.loads(raw, what=what)

    def loads_stored(self, raw: str | None, found: Blobs, *, run_id: str, field: str) -> Any:
        """:meth:`loads` of a payload that may be a ``@blob:`` reference to one of
        ``found`` (the run's blob hash fields read); :class:`MissingBlobError` naming
        the run when its blob is not there."""
        if raw is None:
            return None
        return codec.loads(blobs.resolve(raw, found, run_id=run_id, field=field), what=f"run {run_id} {field}")

    def try_loads(self, raw: str | None) -> Any:
        """:meth:`loads`, with ``None`` for what does not decode (optional fields)."""
        return codec.try_loads(raw)

    def dumps_error(self, error: BaseException, *, with_stack: bool = True) -> str:
        """The ``errorJson`` of ``error``."""
        return codec.dumps_error(error, with_stack=with_stack)

    def input_json(self, value: Any, workflow: str) -> str:
        """A run's input as JSON text: :class:`InputValidationError` when JSON cannot hold it."""
        try:
            return codec.dumps(value, what="input")
        except SerializationError as exc:
            raise InputValidationError(f"input of workflow {workflow!r} is not JSON-serializable: {exc}") from exc

    def event_json(self, payload: Any, event: str) -> str:
        """An event's payload as JSON text: :class:`InputValidationError` when JSON cannot hold it."""
        try:
            return codec.dumps(payload)
        except SerializationError as exc:
            raise InputValidationError(f"payload of event {event!r} is not JSON-serializable: {exc}") from exc

    def signal_json(self, payload: Any, name: str) -> str:
        """A signal's payload as stored: :class:`InputValidationError` when JSON cannot hold it."""
        try:
            return codec.dumps(payload)
        except SerializationError as exc:
            raise InputValidationError(f"payload of signal {name!r} is not JSON-serializable: {exc}") from exc


#: The payloads of a store that writes none by reference (the default; the inline runner).
PLAIN = Payloads()


def read_blobs(redis: Any, blob_key: str, stored: Iterable[str | None]) -> dict[str, str | None]:
    """The fields of the blob hash ``blob_key`` that the ``stored`` values refer to:
    one HMGET, and no command at all when none is a reference (almost always)."""
    fields = blobs.blob_fields_of(stored)
    return dict(zip(fields, redis.hmget(blob_key, fields))) if fields else {}


def read_many_blobs(redis: Any, wanted: Sequence[tuple[str, Iterable[str | None]]]) -> list[dict[str, str | None]]:
    """:func:`read_blobs` of many runs (``(blob key, stored values)`` each) in one
    round trip, and none when no value is a reference."""
    fields = [blobs.blob_fields_of(stored) for _, stored in wanted]
    if not any(fields):
        return [{} for _ in wanted]
    pipe = redis.pipeline(transaction=False)
    for (blob_key, _), names in zip(wanted, fields):
        if names:
            pipe.hmget(blob_key, names)
    replies = iter(pipe.execute())
    return [dict(zip(names, next(replies))) if names else {} for names in fields]
