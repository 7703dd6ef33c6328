"""A run's output stream as stored: the record of one item, and :class:`StreamItem`.

The layout is the asyncio ``redflow`` package's (0.1.7 and later), so that
its clients read what a redflow-gevent worker streams: each item is an
entry of the Redis Stream ``P:run:<id>:stream:pass:1`` whose field
``record`` holds ``{"attempt", "kind": "value", "ts", "value"}`` (``ts``:
Redis's ms when it was written). The run's end is announced on
``P:run:<id>:stream:signal`` by an entry whose ``record`` is
``{"kind": "signal", "pass", "reason": "terminal", "status", "ts"}``,
written by the script that ends the run (``finalize.lua``'s
``announce_end``). docs/guide/streams.md says why one pass holds every
attempt here.
"""

from __future__ import annotations

from typing import Any

from redflow.core import codec
from redflow.core.errors import CorruptDataError

#: The field of a stream entry that holds its record (the asyncio package's name).
RECORD = "record"


class StreamField:
    """Fields of an item's record, and of the run hash, that streams use."""

    ATTEMPT = "attempt"
    KIND = "kind"
    TS = "ts"
    VALUE = "value"
    #: ``kind`` of an item (the asyncio package's; its signal stream has ``signal``)
    KIND_VALUE = "value"
    # Run hash fields of the asyncio package: set by the first item (or, ``streamEnabled``
    # alone, by a reader, so that the run's end is announced to it).
    ENABLED = "streamEnabled"
    ACTIVE_PASS = "streamActivePass"
    MAX_PASS = "streamMaxPass"
    STARTED_AT = "streamStartedAt"
    # redflow-gevent extensions: ``<attempt>:<position>`` of the last item written, and
    # of the last item written before the run last parked (what a resumed handler skips).
    POSITION = "streamPosition"
    PARKED_AT = "streamParkedAt"


def item_record_json(value: Any, attempt: int, ts_ms: int) -> str:
    """The stored record of one item; :class:`~redflow.core.errors.SerializationError`
    naming the offending part if ``value`` is not JSON (then nothing is written)."""
    value_json = codec.dumps(value, what="stream item")
    return f'{{"attempt":{int(attempt)},"kind":"value","ts":{int(ts_ms)},"value":{value_json}}}'


class StreamItem(tuple[str, Any]):
    """One item of a run's output stream: the pair ``(id, value)``, as
    ``client.read_stream`` lists them, with more by name (as ``os.stat_result``
    has): ``attempt`` (the attempt of the run that wrote it) and ``written_at``
    (unix seconds, Redis's clock). Ids grow with every item: pass the last one
    seen as ``after=`` to read on from there."""

    attempt: int
    written_at: float

    def __new__(cls, item_id: str, value: Any, attempt: int, written_at: float) -> StreamItem:
        item = super().__new__(cls, (item_id, value))
        item.attempt = attempt
        item.written_at = written_at
        return item

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickling: every field, not the pair only
        return (self[0], self[1], self.attempt, self.written_at)

    @property
    def id(self) -> str:
        return str(self[0])

    @property
    def value(self) -> Any:
        return self[1]

    def __repr__(self) -> str:
        return f"StreamItem(id={self[0]!r}, value={self[1]!r}, attempt={self.attempt})"


def stream_item(item_id: str, raw: str | None, what: str) -> StreamItem:
    """The item of one stream entry (``raw``: its ``record``); :class:`CorruptDataError`
    naming ``what`` and the entry when the record is not an item's."""
    record = codec.loads(raw, what=f"{what} stream entry {item_id}")
    if not isinstance(record, dict) or record.get(StreamField.KIND) != StreamField.KIND_VALUE:
        raise CorruptDataError(f"{what} stream entry {item_id} is not an item record: {str(raw)[:80]!r}")
    attempt, ts = record.get(StreamField.ATTEMPT), record.get(StreamField.TS)
    if type(attempt) is not int or attempt < 1 or not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise CorruptDataError(f"{what} stream entry {item_id} has no valid attempt and ts: {str(raw)[:80]!r}")
    return StreamItem(item_id, record.get(StreamField.VALUE), attempt, ts / 1000.0)
