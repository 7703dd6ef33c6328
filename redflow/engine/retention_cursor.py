"""Where a walk of the retention cleaner is in a sorted set, kept in Redis.

The cleaner walks indexes in score order (a terminal status index by end
time, a workflow's runs by creation time), deciding each entry once, and
stores its place between passes so that a restart or another worker
resumes there. Entries that share a score are ordered by member, so a place
is (score, member); ``kept`` counts the entries at that score the walk left
in place, which sizes the next read (it starts at the score, inclusive).
"""

from __future__ import annotations

from dataclasses import dataclass

from redflow.core import codec

#: Index entries as ZRANGEBYSCORE WITHSCORES returns them: (member, score).
Page = list[tuple[str, float]]


@dataclass(slots=True)
class Cursor:
    """Past (score, member), with ``kept`` entries at that score left in
    place; ``members``: the workflows a lane has served (see engine/retention.py)."""

    score: float | None = None
    member: str = ""
    kept: int = 0
    members: frozenset[str] = frozenset()

    @classmethod
    def load(cls, raw: str | None, members: frozenset[str] = frozenset()) -> tuple[Cursor, bool]:
        """The stored cursor, or a fresh one (and True: store it) when there
        is none, it does not read, or it has not served all of ``members``
        (a workflow joined a lane: its older runs may be due now, so the walk
        starts again once)."""
        record = codec.try_loads(raw)
        served: frozenset[str] = frozenset()
        if isinstance(record, dict):
            served = frozenset(m for m in record.get("workflows") or () if isinstance(m, str))
            score, kept = record.get("score"), record.get("kept")
            if members <= served and (score is None or isinstance(score, int | float)) and isinstance(kept, int):
                return cls(score, str(record.get("member") or ""), kept, served), False
        # The union: workers whose tables differ for a moment do not restart the lane in turn.
        return cls(members=served | members), True

    def dump(self) -> str:
        return codec.dumps({"score": self.score, "member": self.member, "kept": self.kept, "workflows": sorted(self.members)})

    @property
    def low(self) -> float | str:
        """Where the next read starts (inclusive: entries behind are filtered out)."""
        return "-inf" if self.score is None else self.score

    def is_behind(self, member: str, score: float) -> bool:
        """Whether an entry read again was already handled by this cursor."""
        return self.score is not None and score == self.score and member <= self.member

    def fresh(self, page: Page) -> Page:
        """The entries of ``page`` this cursor has not handled yet."""
        return [(m, s) for m, s in page if not self.is_behind(m, s)]

    def past(self, page: Page, member: str, score: float, removed: frozenset[str]) -> Cursor:
        """This cursor moved past (score, member), an entry of ``page`` (read
        from this cursor), where ``removed`` left the index."""
        kept = sum(1 for m, s in page if s == score and m <= member and m not in removed)
        return Cursor(score, max(member, self.member) if score == self.score else member, kept, self.members)
