"""A worker's queues a few at a time, in turn.

The background passes that read something of every queue (the reaper's
processing lists, the heartbeat's ready lengths, the flow sweeper's
prioritized sets) take a few queues a pass, so that what a pass costs Redis
does not grow with the worker's queues.
"""

from __future__ import annotations


class Rotation:
    """The worker's queues a few at a time, in turn: a background pass that reads
    something of each queue costs Redis ``per_pass`` commands, not one per queue."""

    def __init__(self, queues: list[str], per_pass: int) -> None:
        self.queues = list(queues)
        self.per_pass = max(1, per_pass)
        self._next = 0

    def next(self) -> list[str]:
        """The next ``per_pass`` queues (all of them when there are no more)."""
        if len(self.queues) <= self.per_pass:
            return list(self.queues)
        start, self._next = self._next, (self._next + self.per_pass) % len(self.queues)
        return [self.queues[(start + offset) % len(self.queues)] for offset in range(self.per_pass)]
