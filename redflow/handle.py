"""What ``client.run`` returns: a started run, and ways to wait for it or look at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from redflow.core.errors import RunNotFoundError
from redflow.core.models import Run, Step
from redflow.core.models.streams import StreamItem
from redflow.core.run_state import RunState


class RunReader(Protocol):
    """What a handle asks of its client (a ``RedflowClient``), by the run's id."""

    def wait_for(self, run_id: str, *, timeout: float = 30.0, assist: Any = None) -> RunState: ...
    def read_state(self, run_id: str, *, watch: bool = False) -> RunState | None: ...
    def get_run(self, run_id: str) -> Run | None: ...
    def get_steps(self, run_id: str) -> list[Step]: ...
    def cancel(self, run_id: str, reason: str | None = None) -> bool: ...
    def retry(self, run_id: str) -> bool: ...
    def get_progress(self, run_id: str) -> Any: ...
    def follow_stream(self, run_id: str, *, after: str | None = None, timeout: float | None = None) -> Iterator[StreamItem]: ...


class RunHandle:
    """A started run: its id, and ways to wait for it or look at it."""

    __slots__ = ("id", "client")

    def __init__(self, client: RunReader, run_id: str) -> None:
        self.client = client
        self.id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def result(self, timeout: float = 30.0) -> Any:
        """Wait for the run to end: its output, or ``RunFailedError`` / ``CanceledError``;
        ``TimeoutError`` if it has not ended within ``timeout`` seconds."""
        return self.client.wait_for(self.id, timeout=timeout).outcome()

    def status(self) -> str:
        state = self.client.read_state(self.id)
        if state is None:
            raise RunNotFoundError(self.id)
        return state.status

    def get(self) -> Run | None:
        return self.client.get_run(self.id)

    def steps(self) -> list[Step]:
        return self.client.get_steps(self.id)

    def cancel(self, reason: str | None = None) -> bool:
        return self.client.cancel(self.id, reason=reason)

    def retry(self) -> bool:
        return self.client.retry(self.id)

    def progress(self) -> Any:
        """The latest value the run gave ``ctx.progress``, or ``None``."""
        return self.client.get_progress(self.id)

    def stream(self, timeout: float | None = None, *, after: str | None = None) -> Iterator[StreamItem]:
        """The run's output stream (what ``ctx.stream`` wrote), live: each item in order as
        it is written, ``(id, value)`` with ``.attempt``, until the run ends; a run that
        ended long ago gives its items and ends. ``TimeoutError`` if the run has not ended
        within ``timeout`` seconds (None: no limit); ``after``: an item id to go on after."""
        return self.client.follow_stream(self.id, after=after, timeout=timeout)
