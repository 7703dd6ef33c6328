"""What the chaos tests share: proofs that nothing was lost or finalized twice.

"Finalized twice" is detected four independent ways, so that no single
piece of the engine's own bookkeeping has to be trusted:

* :class:`FinalizeWitness` listens to Redis keyspace notifications and
  counts, per run, the pushes onto its ``:done`` wake-up list: the finalize
  script pushes exactly one per finalization, and Redis reports every push,
  whoever made it;
* :func:`audit_runs` checks that every run is in exactly one
  ``runs:status:*`` index, the one its hash names, with the index score
  equal to ``finishedAt``, and that its ``:done`` list holds one token;
* :class:`TerminalWatch` samples the runs while the test runs and records
  any run whose terminal status or ``finishedAt`` changes after first seen;
* the side channel (:mod:`tests.chaos.apps.side`) counts handler and step
  executions in another redis-server, and a run's output, built from its
  steps' tokens, must equal the step outputs the engine stored.

"Lost" means submitted and not terminal at the end.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.event
import redis
from redis.exceptions import RedisError

from redflow.core import codec
from redflow.core.keys import RUN_STATUSES, TERMINAL_STATUSES, Keys
from redflow.store.scripts import WAKE_TTL_MS
from tests.chaos.apps.side import handler_key, step_key

BATCH = 500


def chunks(items: Sequence[str], size: int = BATCH) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- the side channel, read from the test ------------------------------------------


class SideCounts:
    """Executions counted by the workflows themselves, in the side redis-server."""

    def __init__(self, side: redis.Redis, prefix: str) -> None:
        self.side = side
        self.prefix = prefix

    def handler(self, run_id: str) -> int:
        return int(self.side.hget(handler_key(self.prefix), run_id) or 0)

    def step(self, step: str, run_id: str) -> int:
        return int(self.side.hget(step_key(self.prefix, step), run_id) or 0)

    def handlers(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.side.hgetall(handler_key(self.prefix)).items()}

    def steps(self, step: str) -> dict[str, int]:
        return {k: int(v) for k, v in self.side.hgetall(step_key(self.prefix, step)).items()}

    def executions(self, run_id: str, steps: Iterable[str]) -> dict[str, int]:
        """``{"handler": n, <step>: n, ...}`` for one run."""
        return {"handler": self.handler(run_id), **{s: self.step(s, run_id) for s in steps}}


# -- the finalization witness -----------------------------------------------------------


def watched(client: Any) -> Any:
    """A client whose runs are flagged as waited for when they are created
    (the ``waiters`` field a waiting client sets), so that every finalization
    of them pushes its wake-up token and :class:`FinalizeWitness` can count it:
    every run of ``client.run`` (the targeted tests) and every other run of
    ``client.run_many`` (the loads, so that the unwaited path runs there too)."""
    enqueue, run_many = client.scripts.enqueue_run, client.run_many
    bulk = [False]

    def enqueue_flagged(request: Any, **kwargs: Any) -> Any:
        every_other = bulk[0] and kwargs["run_id"][-1] in "02468ace"
        flagged = request if every_other else dataclasses.replace(request, fields={**request.fields, "waiters": "1"})
        return enqueue(flagged, **kwargs)

    def run_many_half_flagged(*args: Any, **kwargs: Any) -> Any:
        bulk[0] = True
        try:
            return run_many(*args, **kwargs)
        finally:
            bulk[0] = False

    client.run_many = run_many_half_flagged
    client.scripts.enqueue_run = enqueue_flagged
    return client


class FinalizeWitness:
    """Counts finalizations per run from Redis keyspace notifications.

    The server must run with ``notify-keyspace-events`` including ``K`` and
    ``l`` (the chaos ``engine`` fixture starts it so). Every finalization of
    a run someone waits for (:func:`watched`) RPUSHes one token onto
    ``<prefix>:run:<id>:done``; waiters only move
    tokens within the list (LMOVE: pop + LPUSH events), so counting
    ``rpush`` events counts finalizations. Survives a server restart by
    subscribing again once the server has loaded its data (a server
    replaying its AOF reports those pushes again); events while it is away
    are missed, so after a restart only "never twice" is meaningful."""

    def __init__(self, url: str, keys: Keys) -> None:
        self._url = url
        head, tail = keys.run_done("\0").split("\0")  # the key around the run id
        self._pattern = f"__keyspace@0__:{head}*{tail}"
        self._head, self._tail = len(f"__keyspace@0__:{head}"), len(tail)
        self.pushes: collections.Counter[str] = collections.Counter()
        self.reconnects = 0
        self._stopped = False
        self._ready = gevent.event.Event()
        self._greenlet = gevent.spawn(self._listen)
        if not self._ready.wait(10):
            raise AssertionError("the finalize witness could not subscribe")

    def _listen(self) -> None:
        while not self._stopped:
            client = redis.Redis.from_url(self._url, decode_responses=True)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                while client.info("persistence")["loading"]:  # replaying its AOF, whose pushes it reports again
                    gevent.sleep(0.05)
                pubsub.psubscribe(self._pattern)
                pubsub.get_message(timeout=5)  # the subscription confirmation
                self._ready.set()
                while not self._stopped:
                    message = pubsub.get_message(timeout=0.2)
                    if message and message["data"] == "rpush":
                        self.pushes[message["channel"][self._head : -self._tail]] += 1
            except (RedisError, OSError):
                self.reconnects += 1
                gevent.sleep(0.1)
            finally:
                pubsub.close()
                client.close()

    def drain(self, quiet_s: float = 0.5) -> None:
        """Wait until no event arrived for ``quiet_s`` seconds (the events in flight are in)."""
        last = -1
        while sum(self.pushes.values()) != last:
            last = sum(self.pushes.values())
            gevent.sleep(quiet_s)

    def stop(self) -> None:
        self._stopped = True
        self._greenlet.join(timeout=2)
        self._greenlet.kill(block=False)

    def finalized_more_than_once(self, run_ids: Iterable[str]) -> dict[str, int]:
        return {run_id: self.pushes[run_id] for run_id in run_ids if self.pushes[run_id] > 1}

    def never_finalized(self, run_ids: Iterable[str]) -> list[str]:
        return [run_id for run_id in run_ids if self.pushes[run_id] == 0]


# -- the terminal watch -----------------------------------------------------------------


class TerminalWatch:
    """Samples runs while a test runs; a terminal run must never change again.

    Records each run's first terminal ``(status, finishedAt)``; any later
    sample that differs (another finalization, a run leaving a terminal
    status) is a violation. Call :meth:`sample` once more at the end."""

    def __init__(self, r: redis.Redis, keys: Keys, interval_s: float = 0.5) -> None:
        self._r = r
        self._keys = keys
        self.interval_s = interval_s
        self.run_ids: list[str] = []
        self.first: dict[str, tuple[str, str | None]] = {}
        self.violations: list[tuple[str, tuple[str, str | None], tuple[str | None, str | None]]] = []
        self.samples = 0
        self._stopped = False
        self._greenlet = gevent.spawn(self._loop)

    def add(self, run_ids: Iterable[str]) -> None:
        self.run_ids.extend(run_ids)

    def _loop(self) -> None:
        while not self._stopped:
            try:
                self.sample()
            except (RedisError, OSError):
                pass  # the server is away (a restart test): sample again later
            gevent.sleep(self.interval_s)

    def sample(self) -> None:
        ids = list(self.run_ids)
        for batch in chunks(ids, 2000):
            pipe = self._r.pipeline(transaction=False)
            for run_id in batch:
                pipe.hmget(self._keys.run(run_id), "status", "finishedAt")
            for run_id, (status, finished_at) in zip(batch, pipe.execute()):
                seen = self.first.get(run_id)
                if seen is None:
                    if status in TERMINAL_STATUSES:
                        self.first[run_id] = (status, finished_at)
                elif (status, finished_at) != seen and status is not None:  # None: wiped (no-AOF restart)
                    self.violations.append((run_id, seen, (status, finished_at)))
        self.samples += 1

    def stop(self) -> None:
        self._stopped = True
        self._greenlet.join(timeout=5)
        self._greenlet.kill(block=False)


# -- the audit --------------------------------------------------------------------------


@dataclass
class Audit:
    """What the engine's Redis says about a set of runs at the end of a test."""

    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    missing: list[str] = field(default_factory=list)  # run hash gone
    not_terminal: list[str] = field(default_factory=list)  # lost
    bad_index: dict[str, list[str]] = field(default_factory=dict)  # not in exactly its own status index
    bad_score: list[str] = field(default_factory=list)  # terminal index score != finishedAt
    done_tokens: dict[str, int] = field(default_factory=dict)  # :done list length != 1 (waited) / 0 (not waited)
    waited: set[str] = field(default_factory=set)  # flagged as waited for: each finalization pushes a token
    leased: list[str] = field(default_factory=list)  # a lease left behind for good (no expiry)
    total: int = 0

    def summary(self) -> str:
        return (
            f"{self.total} runs: {dict(self.statuses)}; lost {len(self.not_terminal)}, missing {len(self.missing)}, "
            f"bad index {len(self.bad_index)}, bad score {len(self.bad_score)}, bad done list {len(self.done_tokens)}, "
            f"leased {len(self.leased)}"
        )

    def assert_each_finalized_exactly_once(self, *, statuses: Iterable[str] = TERMINAL_STATUSES) -> None:
        allowed = set(statuses)
        assert not self.missing, f"runs whose hash vanished: {self.missing[:5]}"
        assert not self.not_terminal, f"lost (not terminal): {len(self.not_terminal)}, e.g. {self.not_terminal[:5]}"
        assert set(self.statuses) <= allowed, f"unexpected statuses {dict(self.statuses)}, expected only {allowed}"
        assert not self.bad_index, f"runs not in exactly their own status index: {list(self.bad_index.items())[:5]}"
        assert not self.bad_score, f"status index score != finishedAt: {self.bad_score[:5]}"
        assert not self.done_tokens, f"runs whose done list is not one token (waited) or empty: {list(self.done_tokens.items())[:5]}"
        assert not self.leased, f"leases left behind: {self.leased[:5]}"


def audit_runs(r: redis.Redis, keys: Keys, run_ids: Sequence[str]) -> Audit:
    audit = Audit(total=len(run_ids))
    per_run = 2 + len(RUN_STATUSES) + 1
    seconds, micros = r.time()
    # A waited run's wake-up list lives WAKE_TTL_MS: in a long test the early ones are gone.
    expired_before = seconds * 1000 + micros // 1000 - WAKE_TTL_MS + 5000
    for batch in chunks(run_ids):
        pipe = r.pipeline(transaction=False)
        for run_id in batch:
            pipe.hmget(keys.run(run_id), "status", "finishedAt", "waiters")
            for status in RUN_STATUSES:
                pipe.zscore(keys.runs_status(status), run_id)
            pipe.llen(keys.run_done(run_id))
            pipe.pttl(keys.run_lease(run_id))  # a finished run's lease may linger until it expires
        replies = pipe.execute()
        for index, run_id in enumerate(batch):
            (status, finished_at, waiters), *scores = replies[index * per_run : (index + 1) * per_run - 2]
            done, leased = replies[(index + 1) * per_run - 2 : (index + 1) * per_run]
            if status is None:
                audit.missing.append(run_id)
                continue
            audit.statuses[status] += 1
            indexed = [s for s, score in zip(RUN_STATUSES, scores) if score is not None]
            if indexed != [status]:
                audit.bad_index[run_id] = indexed
            if status not in TERMINAL_STATUSES:
                audit.not_terminal.append(run_id)
                continue
            if scores[RUN_STATUSES.index(status)] != float(finished_at or "nan"):
                audit.bad_score.append(run_id)
            if waiters:
                audit.waited.add(run_id)
            if done != (1 if waiters else 0) and not (waiters and done == 0 and int(finished_at) < expired_before):
                audit.done_tokens[run_id] = done
            if leased == -1:
                audit.leased.append(run_id)
    return audit


def prove_each_finalized_once(
    r: redis.Redis,
    keys: Keys,
    run_ids: Sequence[str],
    *,
    witness: FinalizeWitness | None = None,
    watch: TerminalWatch | None = None,
    statuses: Iterable[str] = ("succeeded",),
    witness_saw_everything: bool = True,
) -> Audit:
    """Every run terminal (in ``statuses``) and finalized once, by every detector given.

    ``witness_saw_everything=False`` after a server restart: the witness may
    have missed events while it was away, so only "never twice" is checked."""
    audit = audit_runs(r, keys, run_ids)
    audit.assert_each_finalized_exactly_once(statuses=statuses)
    if witness is not None:
        witness.drain()
        assert witness.finalized_more_than_once(run_ids) == {}
        if witness_saw_everything:
            assert witness.never_finalized([run_id for run_id in run_ids if run_id in audit.waited]) == []
    if watch is not None:
        watch.sample()
        assert watch.violations == [], f"terminal runs that changed afterwards: {watch.violations[:5]}"
    return audit


def queue_leftovers(r: redis.Redis, keys: Keys, queues: Iterable[str]) -> dict[str, int]:
    """Entries left in ready / processing / scheduled and runs indexed as not finished; all 0 when drained."""
    out: dict[str, int] = {}
    for queue in queues:
        out[f"{queue}:ready"] = r.llen(keys.queue_ready(queue))
        out[f"{queue}:processing"] = r.llen(keys.queue_processing(queue))
        out[f"{queue}:scheduled"] = r.zcard(keys.queue_scheduled(queue))
    for status in ("scheduled", "queued", "running"):
        out[f"status:{status}"] = r.zcard(keys.runs_status(status))
    return out


def outputs_disagreeing_with_steps(r: redis.Redis, keys: Keys, run_ids: Sequence[str], steps: Sequence[str]) -> list[str]:
    """Succeeded runs whose output (step name -> token) is not what the engine stored for those steps.

    A step whose success was recorded twice (a stale execution overwriting
    the record) shows up here: the run finished with one token, the record
    holds another."""
    bad = []
    for batch in chunks(run_ids):
        pipe = r.pipeline(transaction=False)
        for run_id in batch:
            pipe.hmget(keys.run(run_id), "status", "outputJson")
            pipe.hmget(keys.run_steps(run_id), list(steps))
        replies = pipe.execute()
        for index, run_id in enumerate(batch):
            (status, output_json), records = replies[2 * index], replies[2 * index + 1]
            if status != "succeeded":
                continue
            output = codec.loads(output_json)
            stored = [codec.loads(codec.loads(raw)["outputJson"]) if raw else None for raw in records]
            if [output.get(step) for step in steps] != stored:
                bad.append(run_id)
    return bad


def terminal_count(r: redis.Redis, keys: Keys) -> int:
    """How many runs of the prefix are terminal, from the status indexes (cheap enough to poll under load)."""
    return sum(r.zcard(keys.runs_status(status)) for status in TERMINAL_STATUSES)


def wait_terminal(r: redis.Redis, keys: Keys, run_ids: Sequence[str], *, timeout: float, interval: float = 0.25) -> float:
    """Wait until every run is terminal (or ``timeout`` s passed); returns the seconds waited."""
    began = time.monotonic()
    pending = list(run_ids)
    while pending and time.monotonic() - began < timeout:
        still: list[str] = []
        try:
            for batch in chunks(pending, 2000):
                pipe = r.pipeline(transaction=False)
                for run_id in batch:
                    pipe.hget(keys.run(run_id), "status")
                still.extend(run_id for run_id, status in zip(batch, pipe.execute()) if status not in TERMINAL_STATUSES)
        except (RedisError, OSError):
            still = pending  # the server is away (a restart test): look again later
        pending = still
        if pending:
            gevent.sleep(interval)
    return time.monotonic() - began


def decode_steps(r: redis.Redis, keys: Keys, run_id: str) -> dict[str, Any]:
    return {name: codec.loads(raw) for name, raw in r.hgetall(keys.run_steps(run_id)).items()}
