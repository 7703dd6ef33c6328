"""Request values: the options one state change carries down to its script.

An enqueue or a settle collects its options where they are decided (the
client, an attempt) and hands them to the script wrapper as one slotted
dataclass, which spells them as the script's KEYS and ARGV
(``store/scripts.py``); a new option is a field here and a line in the
script. Per-run values on the worker's hot path are plain slotted
dataclasses: a frozen one's ``__init__`` costs three times as much.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from redflow.core.blobs import Stored
from redflow.core.deadlines import NO_DEADLINES, Deadlines
from redflow.core.models import RunField
from redflow.core.singleton import KeyClaim
from redflow.core.tags import tags_json

#: How long an idempotency key names its run, by default (seconds).
IDEMPOTENCY_TTL_S = 7 * 24 * 3600


@dataclass(slots=True)
class EnqueueRequest:
    """One run to create (``enqueue_run.lua``)."""

    workflow: str
    queue: str
    input_json: str
    max_attempts: int
    #: When it may start, Redis epoch ms (0: now).
    available_at_ms: int = 0
    #: The same key (per workflow) gives the same run while the key lives.
    idempotency_key: str | None = None
    idempotency_ttl_s: int = IDEMPOTENCY_TTL_S
    parent_run_id: str = ""
    #: ``step.emit_workflow``'s run: linked to its parent (``parent_run_id``) but not
    #: listed among its children (a cancel of the parent leaves it alone).
    detached: bool = False
    #: A ``run_workflows`` child: its parent's queue, which whoever ends the child tells.
    notify_parent: str = ""
    #: 0..9: within its queue, a waiting run of higher priority starts first.
    priority: int = 0
    #: The limits its workflow puts on it (``core/flow.py``); "" when none or not known here.
    limits_json: str = ""
    tags: Mapping[str, str] | None = None
    #: An idempotency key that names a run returns that run whatever its status, even
    #: a failed, canceled or deleted one: a schedule's tick, or a replayed
    #: ``step.emit_workflow``, starts at most one run.
    keep_existing: bool = False
    #: More fields of the run hash (an enqueue hook's trace context); other clients ignore them.
    fields: Mapping[str, str] = field(default_factory=dict)
    #: ``start_within`` and ``timeout``, fixed on the run as absolute times when it is created.
    deadlines: Deadlines = NO_DEADLINES
    #: ``input_json`` is a ``@blob:`` reference: (blob field, blob value), written with the run.
    input_blob: tuple[str, str] | None = None
    #: Also write ``parentRunId`` = "" on a run without a parent, as the asyncio package
    #: does (compat): then whoever ends it adds its entry to its terminal stream.
    mark_parent: bool = False
    #: Its singleton key or debounce window (``core/singleton.py``), None for neither.
    claim: KeyClaim | None = None
    #: A singleton "replace": the run the client canceled, which the key may be taken from.
    replace_from: str = ""

    def due_ms(self, created_at_ms: int) -> int:
        """``available_at_ms`` (a debounced run: ``period`` from now), or the run's
        deadline if that comes first (see ``Deadlines.due_ms``)."""
        available = self.available_at_ms
        if self.claim is not None and self.claim.debounced:
            available = created_at_ms + self.claim.period_ms
        return self.deadlines.due_ms(created_at_ms, available) if self.deadlines.active else available

    def hash_fields(self, created_at_ms: int) -> dict[str, str]:
        """The run-hash fields beyond the ones every client writes (redflow-gevent
        extensions); ``created_at_ms``: the run's creation, its deadlines count from it."""
        extra = dict(self.fields)
        if self.deadlines.active:
            extra.update(self.deadlines.run_fields(created_at_ms, self.due_ms(created_at_ms)))
        if self.mark_parent and not self.parent_run_id:
            extra[RunField.PARENT_RUN_ID] = ""
        if self.notify_parent:
            extra[RunField.NOTIFY_PARENT] = self.notify_parent
        if self.priority:
            extra[RunField.PRIORITY] = str(self.priority)
        if self.limits_json:
            extra[RunField.LIMITS_JSON] = self.limits_json
        if self.tags:
            extra[RunField.TAGS_JSON] = tags_json(self.tags)
        if self.claim is not None:
            debounced = self.claim.debounced
            extra[RunField.DEBOUNCE_KEY if debounced else RunField.SINGLETON_KEY] = self.claim.redis_key
            extra[RunField.DEBOUNCE if debounced else RunField.SINGLETON] = self.claim.summary()
        return extra


@dataclass(frozen=True, slots=True)
class SignalTake:
    """A ``step.wait_for_signal`` looking for its signal (``take_signal.lua``): the
    step and signal names, the step's waiting record, the succeeded record's text
    before and after its output (``core/models``: ``step_succeeded_around``),
    and the wait's timeout (None: none) and the time now, Redis epoch ms."""

    step: str
    signal: str
    waiting: str
    before: str
    after: str
    timeout_at_ms: int | None
    now_ms: int


@dataclass(slots=True)
class StartRequest:
    """Starting a run the caller moved into processing itself (``start_run.lua``):
    lease it, mark it running, count the attempt, read its steps."""

    run_id: str
    queue: str
    token: str
    lease_ms: int
    now_ms: int
    #: The worker's workflows with limits (``engine/limits.py``).
    limited: str = ""
    #: The limits the worker computed for a run handed back with ``admit`` ("-" when it has none).
    limits_json: str = ""


@dataclass(slots=True)
class StepRecord:
    """A first-time step's record, sent behind (engine/step_records.py): written with
    the attempt's next call to Redis (``save_step.lua``'s further records, or its settle)."""

    name: str
    step_json: str
    #: The (blob field, blob value) its output's ``@blob:`` reference names, or None.
    blob: tuple[str, str] | None = None

    def args(self) -> tuple[str, str, str, str]:
        """As the scripts take it: name, JSON, blob field, blob."""
        return (self.name, self.step_json, *(self.blob or ("", "")))


def records_args(records: Sequence[StepRecord]) -> list[str]:
    """Records as consecutive script arguments (``step_records.lua``)."""
    return [part for record in records for part in record.args()]


@dataclass(slots=True)
class SettleRequest:
    """How an attempt ends (``settle_run.lua``): finalized (``status`` terminal),
    a retry scheduled (``scheduled``) or parked in a durable wait (``parked``)."""

    run_id: str
    queue: str
    status: str
    token: str
    lease_ms: int
    now_ms: int
    output_json: str = ""
    error_json: str = ""
    #: A retry's due time (Redis ms).
    retry_at_ms: int = 0
    #: Also refuse when the lease key is someone else's (the attempt's lease may have lapsed).
    check_lease: bool = True
    #: Delete fields an earlier attempt left (errorJson, availableAt).
    cleanup: bool = True
    #: Also claim and start the next run of the queue under this lease token ("" for none).
    next_token: str = ""
    #: The run's failed / canceled index pairs (``Keys.terminal_index_keys``).
    index_keys: Sequence[str] = ()
    #: The workflows with limits this worker knows (limits.lua).
    limited: str = ""
    #: The wait of a parking run (``park_run`` in waits.lua).
    park: Sequence[str] = ()
    #: The output or error is a ``@blob:`` reference: (blob field, blob value), written with it.
    blob: tuple[str, str] | None = None
    #: Step records sent behind that no call carried yet (engine/step_records.py): written first.
    steps: Sequence[StepRecord] = ()

    def set_output(self, output: Stored) -> None:
        """The run's output as stored (:meth:`Payloads.stored <redflow.store.payloads.Payloads.stored>`)."""
        self.output_json, self.blob = output.value, output.blob

    def set_error(self, error: Stored, *, retry_at_ms: int = 0) -> None:
        """The attempt's error as stored; ``retry_at_ms``: a retry's due time."""
        self.error_json, self.blob, self.retry_at_ms = error.value, error.blob, retry_at_ms


@dataclass(slots=True)
class TickDone:
    """The cron leader done with one tick of a schedule, or a trigger that started
    a run of it (``schedule_tick.lua``)."""

    schedule_id: str
    #: The tick done (ms), moved on from only if still current; None for a trigger.
    done_ms: int | None
    #: The run started ("" for none), and when (Redis ms): the latest becomes the last run.
    run_id: str = ""
    run_at_ms: int = 0
    #: The tick to move on to (ms, and its due ms), None for none.
    next_tick_ms: int | None = None
    next_due_ms: int = 0
    fired: int = 0
    #: Ticks missed (none reached them within the window) and skipped for overlap.
    skipped_late: int = 0
    skipped_overlap: int = 0
    #: Why the tick started no run ("" when it did or had not to).
    error: str = ""
