"""The output stream of an inline run (``redflow/testing/inline.py``): a list of
:class:`~redflow.StreamItem` that keeps what Redis keeps of a stream, so that
``ctx.stream`` behaves as on a worker: items numbered by position within an
attempt, and a run that resumes from a park writes again only what it
streams past the position it had reached when it parked. No bound: an inline
run keeps every item."""

from __future__ import annotations

from redflow.core.models.streams import StreamItem, stream_item


class InlineStream(list[StreamItem]):
    """The items of one inline run's stream, oldest first (ids ``0-1``, ``0-2`` ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = (0, 0)  # (attempt, position) of the last item written
        self.parked_at = (0, 0)  # the same, when the run last parked

    @property
    def values(self) -> list[object]:
        """The items' values, oldest first."""
        return [item.value for item in self]

    def append_item(self, attempt: int, position: int, record: str) -> int:
        """What ``append_stream.lua`` does, for an inline run (see ``engine.streams.StreamSink``)."""
        replayed = self.parked_at[1] if self.parked_at[0] == attempt else 0
        if position > replayed:
            self.append(stream_item(f"0-{len(self) + 1}", record, "inline run"))
            self.written = max(self.written, (attempt, position))
        return replayed

    def park(self) -> None:
        """The run parks: what it streamed so far is not streamed again when it resumes."""
        self.parked_at = self.written
