"""Every script wrapper sends KEYS and ARGV in the order its Lua file reads them.

A table names, for each script, a call of its wrapper with a distinct value
for every argument, and what each Lua local that reads ``KEYS[i]`` /
``ARGV[i]`` must then hold; the test reads the ``local ... = ...`` lines of
the script's file and checks each one against what the wrapper sent (a
swapped pair, a missing or extra argument, or a local nobody listed fails).
Tails read in bulk (``status_keys(2)``, ``unpack(KEYS, 11)``, a park's
``ARGV, 16``) are checked by position.
"""

from __future__ import annotations

import re

import pytest

from redflow.core.keys import Keys
from redflow.core.singleton import KeyClaim
from redflow.store.catalog import LIBRARY, SCRIPT_NAMES, lua
from redflow.store.requests import EnqueueRequest, SettleRequest, SignalTake, StartRequest, StepRecord, TickDone
from redflow.store.scripts import WAKE_TTL_MS, Scripts, run_own_keys

K = Keys("P", cluster=True)
Q = "q"


class Recorder:
    """Stands in for a redis client: keeps the KEYS and ARGV of each FCALL."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[list[str], list[str]]] = {}

    def fcall(self, function: str, numkeys: int, *rest: object) -> object:
        name = next(script for script, full in LIBRARY.functions.items() if full == function)
        self.calls[name] = ([str(k) for k in rest[:numkeys]], [str(a) for a in rest[numkeys:]])
        return REPLIES.get(name, 1)


REPLIES = {
    "enqueue_run": ["created", "run_x"], "start_run": ["busy"], "take_run": [], "settle_run": ["succeeded"],
    "retry_run": ["queued", "failed"], "save_step": ["saved", ""], "purge_invalid_entries": [], "watch_run": [None] * 5,
    "search_runs": [[], "", "", 1, 0], "claim_scheduled_events": ["1", ""], "confirm_run": ["owned", "running", ""],
    "take_signal": ["waiting", ""],
}  # fmt: skip
REPLIES.update({"append_stream": ["written", "1-0", 0], "read_stream": [""]})

TAGS = {"t": "v"}
TERMINAL = K.terminal_index_keys("wf", TAGS, Q)
ENQUEUE = EnqueueRequest(
    "wf", Q, "input", 7, available_at_ms=11, idempotency_key="idem", idempotency_ttl_s=13, parent_run_id="parent", tags=TAGS,
    input_blob=("v1:in", "blob-in"), claim=KeyClaim("mode", "skey", 31, 37), replace_from="prev",
)  # fmt: skip
SETTLE = SettleRequest(
    "run_1", Q, "parked", "token", 17, 19, output_json="out", error_json="err", retry_at_ms=23, check_lease=True, cleanup=False,
    next_token="next", index_keys=TERMINAL, limited="lim", park=["children", "step", "rec", "29", "1", "run_c"],
    blob=("v1:out", "blob-out"), steps=[StepRecord("a", "rec-a", ("v1:a", "blob-a")), StepRecord("b", "rec-b")],
)  # fmt: skip

#: script -> (call of its wrapper, {Lua local: what it must hold}, {(KEYS|ARGV, first index): the tail from there})
TABLE = {
    "enqueue_run": (
        lambda s: s.enqueue_run(ENQUEUE, run_id="run_1", created_at_ms=3, replace_id="old"),
        {"run_key": K.run("run_1", Q), "created_key": K.runs_created(Q), "queued_key": K.runs_status("queued", Q),
         "scheduled_key": K.runs_status("scheduled", Q), "workflow_runs_key": K.workflow_runs("wf", Q), "ready_key": K.queue_ready(Q),
         "queue_scheduled_key": K.queue_scheduled(Q), "idem_key": K.idempotency("wf", "idem", Q),
         "prioritized_key": K.queue_prioritized(Q), "priority_seq_key": K.queue_priority_seq(Q), "policy_key": "skey",
         "calls_key": K.one_run_calls(Q),
         "run_id": "run_1", "workflow": "wf", "queue": Q, "input_json": "input", "created_at": "3", "available_at": "11",
         "max_attempts": "7", "idempotent": "1", "idem_ttl": "13", "replace_id": "old", "parent_run_id": "parent",
         "blob_field": "v1:in", "blob": "blob-in", "policy": "mode", "replace_from": "prev", "period": "31", "max_wait": "37"},
        {("KEYS", 13): K.tag_index_keys("wf", TAGS, Q),
         ("ARGV", 18): ["tagsJson", '{"t":"v"}', "singletonKey", "skey", "singleton", "mode"]},
    ),
    "start_run": (
        lambda s: s.start_run(StartRequest("run_1", Q, "token", 5, 3, "lim", "limits")),
        {"processing_key": K.queue_processing(Q), "run_id": "run_1", "token": "token", "lease_ms": "5", "now": "3",
         "scope": K.scope(Q), "limited": "lim", "supplied": "limits"},
        {},
    ),
    "take_run": (
        lambda s: s.take_run(queue=Q, token="token", lease_ms=5, now_ms=3, limited="lim", marker_moved=True),
        {"ready_key": K.queue_ready(Q), "token": "token", "lease_ms": "5", "now": "3", "scope": K.scope(Q),
         "queue_prefix": K.queue_prefix(Q), "limited": "lim", "marker_moved": "1"},
        {},
    ),
    "settle_run": (
        lambda s: s.settle_run(SETTLE),
        {"run_key": K.run("run_1", Q), "run_id": "run_1", "requested": "parked", "now": "19", "output_json": "out",
         "error_json": "err", "token": "token", "wake_ttl": str(WAKE_TTL_MS), "retry_at": "23", "check_lease": "1", "cleanup": "0",
         "next_token": "next", "lease_ms": "17", "scope": K.scope(Q), "queue_prefix": K.queue_prefix(Q), "limited": "lim",
         "blob_field": "v1:out", "blob": "blob-out", "records": "2"},
        {("KEYS", 2): TERMINAL,
         ("ARGV", 19): ["a", "rec-a", "v1:a", "blob-a", "b", "rec-b", "", "", "children", "step", "rec", "29", "1", "run_c"]},
    ),
    "cancel_run": (
        lambda s: s.cancel_run(run_id="run_1", queue=Q, now_ms=3, reason="why", error_json="err", index_keys=TERMINAL),
        {"run_key": K.run("run_1", Q), "done_key": K.run_done("run_1", Q), "queue_scheduled_key": K.queue_scheduled(Q),
         "lease_key": K.run_lease("run_1", Q), "processing_key": K.queue_processing(Q), "prioritized_key": K.queue_prioritized(Q),
         "run_id": "run_1", "now": "3", "reason": "why", "error_json": "err", "wake_ttl": str(WAKE_TTL_MS),
         "run_prefix": K.run_prefix(Q), "notices_key": K.cancel_notices(Q)},
        {("KEYS", 2): K.all_runs_status(Q), ("KEYS", 14): TERMINAL},
    ),
    "retry_run": (
        lambda s: s.retry_run(run_id="run_1", queue=Q, now_ms=3, index_keys=TERMINAL),
        {"run_key": K.run("run_1", Q), "ready_key": K.queue_ready(Q), "done_key": K.run_done("run_1", Q),
         "lease_key": K.run_lease("run_1", Q), "processing_key": K.queue_processing(Q), "prioritized_key": K.queue_prioritized(Q),
         "priority_seq_key": K.queue_priority_seq(Q), "run_id": "run_1", "now": "3"},
        {("KEYS", 2): K.all_runs_status(Q), ("KEYS", 14): TERMINAL},
    ),
    "promote_run": (
        lambda s: s.promote_run(run_id="run_1", queue=Q, now_ms=3),
        {"run_key": K.run("run_1", Q), "queue_scheduled_key": K.queue_scheduled(Q), "scheduled_key": K.runs_status("scheduled", Q),
         "queued_key": K.runs_status("queued", Q), "ready_key": K.queue_ready(Q), "prioritized_key": K.queue_prioritized(Q),
         "priority_seq_key": K.queue_priority_seq(Q), "run_id": "run_1", "now": "3"},
        {},
    ),
    "unlock": (lambda s: s.release_lock(key="lock", token="token"), {"lock_key": "lock", "token": "token"}, {}),
    "renew_lease": (lambda s: s.renew_lock(key="lock", token="token", lock_ms=5), {"lock_key": "lock", "token": "token", "ms": "5"}, {}),
    "claim_inline": (
        lambda s: s.claim_queued_run_for_inline(run_id="run_1", queue=Q),
        {"ready_key": K.queue_ready(Q), "processing_key": K.queue_processing(Q), "run_key": K.run("run_1", Q), "run_id": "run_1"},
        {},
    ),
    "save_step": (
        lambda s: s.save_step(run_id="run_1", queue=Q, token="token", name="step", step_json="rec", lease_ms=5, marker_started_at_ms=7,
                              expected="old", blob=("v1:s", "blob-s"), check_lease=False, behind=[StepRecord("b", "rec-b", ("v1:b", "x"))]),
        {"steps_key": K.run_steps("run_1", Q), "lease_key": K.run_lease("run_1", Q), "run_key": K.run("run_1", Q), "token": "token",
         "name": "step", "step_json": "rec", "marker": "7", "lease_ms": "5", "expected": "old", "blob_field": "v1:s", "blob": "blob-s",
         "check_lease": "0"},
        {("ARGV", 10): ["b", "rec-b", "v1:b", "x"]},
    ),
    "confirm_run": (
        lambda s: s.confirm_run(run_id="run_1", queue=Q, token="token", lease_ms=5),
        {"lease_key": K.run_lease("run_1", Q), "run_key": K.run("run_1", Q), "token": "token", "lease_ms": "5"},
        {},
    ),
    "purge_invalid_entries": (lambda s: s.purge_invalid_entries(queue=Q), {"processing_key": K.queue_processing(Q)}, {}),
    "reap_run": (
        lambda s: s.reap_run(run_id="run_1", queue=Q),
        {"processing_key": K.queue_processing(Q), "ready_key": K.queue_ready(Q), "lease_key": K.run_lease("run_1", Q), "run_id": "run_1"},
        {},
    ),
    "repair_orphan": (
        lambda s: s.repair_orphan(run_id="run_1", queue=Q),
        {"run_key": K.run("run_1", Q), "lease_key": K.run_lease("run_1", Q), "processing_key": K.queue_processing(Q),
         "ready_key": K.queue_ready(Q), "run_id": "run_1"},
        {},
    ),
    "watch_run": (lambda s: s.watch_run(run_id="run_1", queue=Q), {"run_key": K.run("run_1", Q)}, {}),
    "search_runs": (
        lambda s: s.search_runs(walk="walk", probes=["p1", "p2"], after=("5", "run_0"), wanted=3, skip_budget=4, batch=6),
        {"walk_key": "walk", "after_score": "5", "after_id": "run_0", "wanted": "3", "skip_budget": "4", "batch": "6"},
        {("KEYS", 2): ["p1", "p2"]},
    ),
    "purge_run": (
        lambda s: s.purge_run(run_id="run_1", queue=Q, workflow="wf", tags=TAGS, status="failed", finished_at="9"),
        {"run_key": K.run("run_1", Q), "run_id": "run_1", "own_count": str(len(run_own_keys(K, "run_1", Q))), "seen_finished_at": "9",
         "seen_workflow": "wf", "seen_status": "failed"},
        {},
    ),
    "heal_limit": (
        lambda s: s.heal_limit(held_key="held", queue=Q),
        {"index_key": K.limits_held_index(Q), "running_key": K.runs_status("running", Q), "held_key": "held",
         "run_prefix": K.run_prefix(Q)},
        {},
    ),
    "ensure_marker": (
        lambda s: s.ensure_marker(queue=Q),
        {"ready_key": K.queue_ready(Q), "processing_key": K.queue_processing(Q), "prioritized_key": K.queue_prioritized(Q)},
        {},
    ),
    "deliver_event": (
        lambda s: s.deliver_event(run_id="run_1", queue=Q, step="step", waiting="rec", resolved="done", now_ms=3),
        {"run_key": K.run("run_1", Q), "steps_key": K.run_steps("run_1", Q), "queue_scheduled_key": K.queue_scheduled(Q),
         "ready_key": K.queue_ready(Q), "run_id": "run_1", "step": "step", "waiting": "rec", "resolved": "done", "now": "3"},
        {("KEYS", 2): K.all_runs_status(Q)},
    ),
    "child_ended": (
        lambda s: s.child_ended(child_id="run_c", parent_id="run_p", parent_queue=Q, now_ms=3),
        {"run_key": K.run("run_p", Q), "ended_key": K.run_children_ended("run_p", Q), "queue_scheduled_key": K.queue_scheduled(Q),
         "ready_key": K.queue_ready(Q), "child_id": "run_c", "parent_id": "run_p", "now": "3"},
        {("KEYS", 2): K.all_runs_status(Q)},
    ),
    "forget_waiters": (
        lambda s: s.forget_waiters(event="e", entries=[("run_1", "h1"), ("run_2", "h2")]),
        {"waiters_key": K.event_waiters("e")},
        {("ARGV", 1): ["run_1", "h1", "run_2", "h2"]},
    ),
    "list_child": (
        lambda s: s.list_child(children_key=K.run_children("run_p", Q), child_id="run_c", now_ms=3),
        {"run_key": K.run("run_p", Q), "children_key": K.run_children("run_p", Q), "child_id": "run_c", "created_at": "3"},
        {},
    ),
    "register_waiter": (
        lambda s: s.register_waiter(event="e", run_id="run_1", head="{"),
        {"waiters_key": K.event_waiters("e"), "run_id": "run_1", "head": "{"},
        {},
    ),
    "claim_scheduled_events": (
        lambda s: s.claim_scheduled_events(most=3, claim_ms=5),
        {"key": K.scheduled_events(), "most": "3", "claim_ms": "5"},
        {},
    ),
    "schedule_event": (
        lambda s: s.schedule_event(entry="member", at_ms=3),
        {"key": K.scheduled_events(), "member": "member", "at": "3"},
        {},
    ),
    "append_stream": (
        lambda s: s.append_stream(run_id="run_1", queue=Q, token="token", attempt=3, position=5, record="rec", now_ms=7, max_items=11),
        {"run_key": K.run("run_1", Q), "stream_key": K.run_stream("run_1", Q), "token": "token", "attempt": "3", "position": "5",
         "record": "rec", "now": "7", "max_items": "11"},
        {},
    ),
    "read_stream": (
        lambda s: s.read_stream(run_id="run_1", queue=Q, after="1-0", count=3, watch=True),
        {"run_key": K.run("run_1", Q), "stream_key": K.run_stream("run_1", Q), "signal_key": K.run_stream_signal("run_1", Q),
         "after": "1-0", "count": "3", "watch": "1"},
        {},
    ),
    "send_signal": (
        lambda s: s.send_signal(run_id="run_1", queue=Q, name="sig", payload_json="pay", now_ms=3, bounds=(5, 7)),
        {"run_key": K.run("run_1", Q), "signals_key": K.run_signals("run_1", Q), "steps_key": K.run_steps("run_1", Q),
         "queue_scheduled_key": K.queue_scheduled(Q), "ready_key": K.queue_ready(Q), "run_id": "run_1", "name": "sig",
         "payload": "pay", "now": "3", "most_per_name": "5", "most_per_run": "7"},
        {("KEYS", 3): K.all_runs_status(Q)},
    ),
    "take_signal": (
        lambda s: s.take_signal(run_id="run_1", queue=Q, token="token", lease_ms=5, take=SignalTake("step", "sig", "rec", "<", ">", 7, 3)),
        {"steps_key": K.run_steps("run_1", Q), "lease_key": K.run_lease("run_1", Q), "run_key": K.run("run_1", Q),
         "signals_key": K.run_signals("run_1", Q), "token": "token", "step": "step", "name": "sig", "waiting": "rec",
         "before": "<", "after": ">", "timeout_at": "7", "now": "3", "lease_ms": "5"},
        {},
    ),
    "schedule_save": (
        lambda s: s.schedule_save(action="update", schedule_id="sid", now_ms=3, tick=(5, 7), fields={"cron": "c"}),
        {"hash_key": K.schedule("sid"), "ids_key": K.schedules(), "next_key": K.schedules_next(), "action": "update", "id": "sid",
         "now": "3", "tick": "5", "due": "7"},
        {("ARGV", 6): ["cron", "c"]},
    ),
    "schedule_tick": (
        lambda s: s.schedule_tick(TickDone("sid", 3, run_id="run_1", run_at_ms=5, next_tick_ms=7, next_due_ms=11, fired=1,
                                           skipped_late=13, skipped_overlap=17, error="err")),
        {"hash_key": K.schedule("sid"), "next_key": K.schedules_next(), "id": "sid", "done": "3", "run_id": "run_1", "run_at": "5",
         "tick": "7", "due": "11", "fired": "1", "late": "13", "overlapped": "17", "err": "err"},
        {},
    ),
}  # fmt: skip

_LOCAL = re.compile(r"^local ([\w, ]+?) = (.+?)(?:\s*--.*)?$")
_READ = re.compile(r"\b(KEYS|ARGV)\[(\d+)\]")


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    return [*parts, text[start:].strip()]


def lua_reads(name: str) -> dict[str, tuple[str, int]]:
    """Lua local -> (KEYS or ARGV, index) of every ``local`` line of the script that reads one directly."""
    reads = {}
    for line in lua(name).splitlines():
        found = _LOCAL.match(line)
        if not found or not _READ.search(line):
            continue
        names, values = [n.strip() for n in found.group(1).split(",")], split_top(found.group(2))
        assert len(names) == len(values), f"{name}.lua: {line!r}"
        for local, value in zip(names, values):
            read = _READ.search(value)
            if read:
                reads[local] = (read.group(1), int(read.group(2)))
    return reads


def test_the_table_covers_every_script():
    assert sorted(TABLE) == sorted(SCRIPT_NAMES)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_the_wrapper_sends_what_each_lua_local_reads(name):
    call, expected, tails = TABLE[name]
    recorder = Recorder()
    call(Scripts(recorder, K))
    keys, args = recorder.calls[name]
    sent = {"KEYS": keys, "ARGV": args}
    reads = lua_reads(name)
    assert sorted(reads) == sorted(expected), f"{name}.lua reads locals the table does not name, or the reverse"
    got = {local: sent[kind][index - 1] if index <= len(sent[kind]) else None for local, (kind, index) in reads.items()}
    assert got == expected
    for (kind, first), tail in tails.items():
        assert sent[kind][first - 1 : first - 1 + len(tail)] == [str(part) for part in tail], (kind, first)


def test_a_swapped_pair_of_arguments_is_caught():
    """The check itself: a wrapper that sent two ARGV the other way round fails it."""
    call, expected, _ = TABLE["start_run"]
    recorder = Recorder()
    call(Scripts(recorder, K))
    keys, args = recorder.calls["start_run"]
    args[1], args[2] = args[2], args[1]
    got = {local: {"KEYS": keys, "ARGV": args}[kind][index - 1] for local, (kind, index) in lua_reads("start_run").items()}
    assert got != expected and {local for local in got if got[local] != expected[local]} == {"token", "lease_ms"}
