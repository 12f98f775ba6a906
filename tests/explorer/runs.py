"""One run of a scenario: its operations interleaved call by call, checked after every step.

A scenario is an account's starting point (its plan, its overrides, some resources of one or
two kinds, each of some units) and a few concurrent operations: creates of n units (POST, PUT),
deletes, resizes (PATCH), override changes, plan changes and moves to another plan; background
work (a stream delivery, a sweep, a heal, a recount) can be run as one atomic step at any point.
A run executes one schedule (which operation's next DynamoDB call goes next, with which fault),
against DynamoDB Local on a fresh account, with the real domain code and deterministic ids and
clock. After every step the account is read back and the invariants are checked per kind (each
kind's counter item, ``COUNTER#<kind>``, against that kind's resources, in units); when every
operation has ended the stream is drained, the sweeper and the healer run with the clock past
the grace period, and the end state and the answers are checked (linearizability against
spec.py).

Every operation builds its own ``ResourceService``, so its plan cache starts cold: a create
reads the account's plan and the plan's limits once, during its own run, and an operation that
starts after a plan change has completed is judged by the new plan. The explorer checks what the
protocol does with the limit it read; the cache's own staleness window (``PlanCacheSeconds``: a
warm process keeps judging by the old plan for up to that long) is a time-based promise, tested
with a moving clock elsewhere (the plans' tests), not an interleaving.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from benchmarks.capacity import item_size
from hybrid_counter.counters.state import (
    BEST_EFFORT,
    EVENTUAL,
    CounterState,
    best_effort_share,
    eventual_share,
)
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.recount import Recounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper, SweepOutcome
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import (
    HoldExpired,
    IdempotencyConflict,
    InProgress,
    LimitExceeded,
    NotFound,
    StoreUnavailable,
    Throttled,
)
from hybrid_counter.governance.records import LIMIT_CHANGE
from hybrid_counter.healing import Healer
from hybrid_counter.keys import (
    ACCOUNT_PREFIX,
    COUNTER_PREFIX,
    DEFAULT_KIND,
    HISTORY_PREFIX,
    PROFILE_SK,
    REPAIR_PREFIX,
    RESOURCE_PREFIX,
    account_pk,
    all_ranges,
    iso_utc,
    parse_kind_resource_sk,
    parse_repair_sk,
    plan_key,
    range_of,
    resize_token,
    resource_key,
    token,
)
from hybrid_counter.recount_requests import is_request
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from hybrid_counter.resources.table import ResourceTable
from hybrid_counter.settings import Settings
from tests.explorer.scheduler import Call, Crash, Operation, Scheduler
from tests.explorer.spec import (
    CONFLICT,
    HOLD_EXPIRED,
    LIMIT_OPS,
    LIMIT_SET,
    NEVER_ENDED,
    REPAIR,
    Done,
    Held,
    Key,
    Limits,
    Model,
    explain,
)

START = 1_800_000_000.0
ITEM_LIMIT = 1024  # bytes: one write unit per write
# "late": every process stalls past the grace period there (_stall_past_the_grace_period)
BACKGROUNDS = ("stream", "sweep", "heal", "recount", "late")
STALLS = ("late", "sweep", "stream")  # a stall, the sweeper at what it left, the stream path
SEATS = "seats"  # the second kind of the mixed-kind scenarios
# Operations on one kind's resources or limit: they must write that kind's items only.
KIND_OPS = frozenset({"post", "put", "delete", "patch", "limit", "unlimit", "confirm", "reclaim"})
# Holds (design.md §12): a scenario's holds are made at START for HOLD_SECONDS (as a retried PUT
# of one asks for), so their deadline is ahead of every clock but the expiring processes' (the
# "expire" and "reclaim" operations), which run LATE seconds ahead: a confirm and an expiry meet
# on the one item, each sure of its side of the deadline. Past the end's sweep (grace + 60 s).
HOLD_SECONDS = 3600
LATE = 2 * HOLD_SECONDS


@dataclass(frozen=True)
class OpSpec:
    """One operation: ``kind`` is what it does (post | put | delete | patch | limit | unlimit |
    plan | assign | audit | recount | ttl | confirm | expire | reclaim: a confirm of a hold, the
    sweeper's expiry of the account's holds, a POST refused for room that expires the kind's
    holds and is judged again, the last two by a process whose clock is past the holds'
    deadline); ``arg`` the id (put, delete, patch, confirm, repairs), the
    limit (limit), (plan name, limits) (plan: the plan's new limits), the plan name (assign);
    ``units`` a create's units or a resize's target; ``of`` the kind of resource it acts on;
    ``after`` the index of an operation it starts after (once that one has answered), so that
    real time orders the two (the others all start together)."""

    kind: str
    arg: Any = None
    units: int = 1
    of: str = DEFAULT_KIND
    after: int | None = None
    hold: bool = False  # a PUT of a hold (hold_seconds=HOLD_SECONDS)

    def __str__(self) -> str:
        parts = []
        if self.kind == "plan":
            plan, limits = self.arg
            parts.append(f"{plan}: " + " ".join(f"{k}={v}" for k, v in limits))
        elif self.arg is not None:
            parts.append(str(self.arg))
        if self.kind == "patch":
            parts[-1] += f"->{self.units}"
        elif self.units != 1:
            parts.append(f"{self.units}u")
        if self.hold:
            parts.append("hold")
        text = f"{self.kind}({', '.join(parts)})" if parts else self.kind
        text = text if self.of == DEFAULT_KIND else f"{text}@{self.of}"
        return text if self.after is None else f"{text} after {chr(65 + self.after)}"


def parse_res(text: str) -> Held:
    """A resource of a scenario's setup: ``[kind/]id[:units]`` (default kind, 1 unit)."""
    kind, _, rest = text.rpartition("/")
    rid, _, units = rest.partition(":")
    return (kind or DEFAULT_KIND, rid, int(units or 1))


@dataclass(frozen=True)
class Scenario:
    name: str
    limit: int | None  # the account's override for the default kind (None: none, its plan's)
    ops: tuple[OpSpec, ...]
    counted: tuple[str, ...] = ()  # resources that exist, counted by the stream path (parse_res)
    uncounted: tuple[str, ...] = ()  # resources that exist, not yet counted
    backgrounds: tuple[str, ...] = ()
    # What requests that died before the run left, by id (see STUCK), and whether the stream
    # records of the setup were lost (trimmed) rather than left for the stream path.
    stuck: tuple[tuple[str, str], ...] = ()
    records_lost: bool = False
    overrides: Limits = ()  # the overrides of the other kinds
    plan: Limits = ()  # the limits of the account's plan ("a"); a kind it does not list: 0
    other_plan: Limits = ()  # the limits of plan "b" (which an "assign" operation moves it to)
    holds: tuple[str, ...] = ()  # the ids of counted/uncounted made as holds (HOLD_SECONDS)

    def make_run(self, world: World, choose: Callable[[Run, list[Choice]], Choice | None]) -> Run:
        """The run that executes a schedule of this scenario (an organization's: orgs.py)."""
        return Run(world, self, choose)

    def described(self) -> str:
        """What a report says of the setup beyond the account's (none here)."""
        return ""

    def kinds(self) -> tuple[str, ...]:
        found = {DEFAULT_KIND, *(op.of for op in self.ops), *(k for k, _ in self.overrides)}
        found |= {parse_res(r)[0] for r in (*self.counted, *self.uncounted)}
        found |= {k for k, _ in (*self.plan, *self.other_plan)}
        for op in self.ops:
            if op.kind == "plan":
                found |= {k for k, _ in op.arg[1]}
        return tuple(sorted(found))


# A PATCH that died long ago, as ``<how>:<target>`` (the resource set up as counted/uncounted):
RESIZES_STUCK = (
    "resizing",  # claimed, then died before its counter write
    "resized",  # claimed, its counter write applied, died before it finished
    "refused",  # claimed, its grow refused (answered 409), its revert failed
)
# How a request that died before the run left an id (set up long enough ago to be stale):
STUCK = (
    "claimed",  # a delete claimed it and died before its release: visible, holding its slot
    "released",  # a delete released it (answered 204) but could not remove its item
    "admitted",  # a create was admitted and died before making it live: pending, holding a slot
    "unadmitted",  # a create put it and died before its admission: pending, holding nothing
)
REPAIRS = ("audit", "recount", "ttl")


# ("op", index, fault) or ("bg", name, None)
Choice = tuple[str, Any, str | None]


@dataclass
class World:
    """What every run shares: the table, the (hooked) clients, the stream, the settings."""

    settings: Settings
    clients: Any
    stream: Any
    runs: int = 0

    def fresh_account(self) -> str:
        self.runs += 1
        return f"ex{self.runs:06d}-{id(self) % 10_000:04d}"


def of_kind(kind: str, value: str) -> str:
    """A counter item's token with its kind: tokens name an id and incarnation, which two kinds
    of one account can share (each kind's counter item has its own last_release)."""
    return f"{kind}/{value}"


@dataclass
class Truth:
    """What the scheduler saw take effect, which callers may not know (lost responses)."""

    admitted: set[str] = field(default_factory=set)
    released: Counter[str] = field(default_factory=Counter)
    # Admitted creates left pending past the grace period whose slot a recount's correction
    # released (the item is removed right after, design.md §5.2): they hold no slot any more.
    released_pending: set[str] = field(default_factory=set)
    adopted: bool = False  # a PUT made a stale pending item live without an admission (C1a)
    faults: int = 0
    # Slots best_effort still holds for admitted pending items TTL removed, by (kind, range),
    # until the census their removal asked for corrects the range (design.md: P2 and TTL).
    owed: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Resizes whose counter write (Z3) applied, by token (<id>#<incarnation>#<request>).
    resized: set[str] = field(default_factory=set)
    # Census requests outstanding, by (kind, range) (recount_requests.py).
    requested: set[tuple[str, str]] = field(default_factory=set)
    # Claims a takeover left to the census of their range (resources/dead_claims.py), by (kind,
    # range): their tokens; and the claims a correction of their range has since let go of (the
    # census counted them as holding nothing: from then on they hold no slot, as if released).
    left: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    let_go_by_census: set[str] = field(default_factory=set)

    def observe(self, call: Call) -> None:
        if call.outcome and call.outcome.startswith("fault:"):
            self.faults += 1
        if made_live_unadmitted(call):
            self.adopted = True
        if call.applied and call.key.startswith(REPAIR_PREFIX):
            requested = parse_repair_sk(call.key)
            if call.operation == "UpdateItem":
                self.requested.add(requested)
            elif call.operation == "DeleteItem":
                self.requested.discard(requested)
        if call.applied and call.operation == "TransactWriteItems":
            # the stream path's release of a member's delete handed off to it (eventual.py)
            for update in released_in(call):
                self.observe(update)
            return
        self._observe_left(call)
        if not call.applied or call.operation != "UpdateItem" or not call.key.startswith(COUNTER_PREFIX):
            return
        kind = call.key[len(COUNTER_PREFIX) :]
        for range_id in _corrected_ranges(call):
            self.owed.pop((kind, range_id), None)
            self.let_go_by_census |= self.left.pop((kind, range_id), set())
        assigned = _assignments(call)
        if "last_admission" in assigned:
            self.admitted.add(of_kind(kind, assigned["last_admission"]))
        if "last_release" in assigned:
            self.released[of_kind(kind, assigned["last_release"])] += 1
        if "last_resize" in assigned:
            self.resized.add(of_kind(kind, assigned["last_resize"]))

    def _observe_left(self, call: Call) -> None:
        """A takeover's mark that leaves its claim to the census of the range."""
        if not (call.applied and call.operation == "UpdateItem" and call.key.startswith(RESOURCE_PREFIX)):
            return
        if "left_to_census" in str(call.body.get("UpdateExpression", "")):
            kind, rid = parse_kind_resource_sk(call.key)
            tok = of_kind(kind, token(rid, call.values()[":inc"]["S"]))
            self.left.setdefault((kind, range_of(rid)), set()).add(tok)

    @property
    def undercounts(self) -> bool:
        """A retried delete released twice (design.md §4: none since the census of a dead delete)."""
        return any(n > 1 for n in self.released.values())

    def let_go(self, tok: str) -> bool:
        """A claim whose slot is free: its release applied, or a census counted it as holding
        nothing and corrected its range to that."""
        return bool(self.released[tok]) or tok in self.let_go_by_census


def ends_a_resize(call: Call) -> tuple[str, bool] | None:
    """A write that ends a resize's claim (the resize's own, the stream path's, a settlement's):
    (the claim's request, whether it gives the resource the target)."""
    expression = str(call.body.get("UpdateExpression", ""))
    if call.operation != "UpdateItem" or not call.key.startswith(RESOURCE_PREFIX):
        return None
    if "REMOVE resize_request" not in expression:
        return None
    return call.values()[":req"]["S"], "= resize_to" in expression


def released_in(call: Call) -> list[Call]:
    """A transaction's updates of counter items that release (set ``last_release``), each as
    the UpdateItem it would be on its own (applied as the transaction was)."""
    found = []
    for action in call.body.get("TransactItems", []):
        update = action.get("Update")
        if update is None:
            continue
        single = Call(call.op, "UpdateItem", update, outcome=call.outcome, applied=call.applied)
        if single.key.startswith(COUNTER_PREFIX) and "last_release" in _assignments(single):
            found.append(single)
    return found


def _corrected_ranges(call: Call) -> list[str]:
    """The ranges a recount's correction (conditional on a range's version) fixed."""
    condition = str(call.body.get("ConditionExpression", ""))
    names = call.body.get("ExpressionAttributeNames", {})
    return [names[n][1:] for n in re.findall(r"#v[0-9a-f]\b", condition) if n in names]


def _assignments(call: Call) -> dict[str, str]:
    body = call.body
    names = body.get("ExpressionAttributeNames", {})
    values = body.get("ExpressionAttributeValues", {})
    found = {}
    for name, value in re.findall(r"(#\w+) = (:\w+)", body.get("UpdateExpression", "")):
        if value in values and "S" in values[value]:
            found[names.get(name, name)] = values[value]["S"]
    return found


@dataclass
class Snapshot:
    counters: dict[str, dict[str, Any]]  # kind -> its counter item
    resources: dict[Key, dict[str, Any]]  # (kind, resource id) -> item
    census_requests: int = 0  # REPAIR# items of the account (recount_requests.py)
    plan: str = "a"  # the plan the account is on (by the scenario's names)
    plans: dict[str, dict[str, int]] = field(default_factory=dict)  # plan name -> limits
    profile: dict[str, Any] = field(default_factory=dict)  # the account's profile item (its membership)

    def state(self, kind: str = DEFAULT_KIND) -> CounterState:
        return CounterState.from_item(self.counters.get(kind))

    def of(self, kind: str, *states: str) -> list[Key]:
        return [
            key
            for key, item in self.resources.items()
            if key[0] == kind and resource_items.state_of(item) in states
        ]

    def plan_limit(self, kind: str) -> int:
        return self.plans.get(self.plan, {}).get(kind, 0)


@dataclass
class RunResult:
    scenario: Scenario
    choices: list[Choice]
    trace: list[str]
    violations: list[str]
    answers: dict[str, Any]
    steps: int
    complete: bool  # False: stopped early (a state already explored)
    done: dict[int, Done] = field(default_factory=dict)  # how each operation ended, by index


class Run:
    def __init__(
        self, world: World, scenario: Scenario, choose: Callable[[Run, list[Choice]], Choice | None]
    ) -> None:
        self.world = world
        self.scenario = scenario
        self.choose = choose
        self.account = world.fresh_account()
        self.kinds = scenario.kinds()
        self.reads_plans = any(op.kind in ("plan", "assign") for op in scenario.ops)
        self.now = START
        self.truth = Truth()
        self.violations: list[str] = []
        self.trace: list[str] = []
        self.choices: list[Choice] = []
        self.used: set[str] = set()
        self.ops: list[Operation] = []
        self.done: dict[int, Done] = {}
        self.writes_since_delivery: list[str] = []
        self.backlog: list[dict[str, Any]] = []
        self.step_no = 0
        self.snapshot = Snapshot({}, {})
        # The highest limit each kind's plan has had during the run: a create may be judged by
        # any plan limit in force while it ran (each operation reads its plan once).
        self.plan_limit_max: dict[str, int] = {}
        self._waiting_since: dict[int, int] = {}
        self.last_write = 0
        self.ttl_removed: set[str] = set()  # incarnations the "ttl" operation removed
        self.dead: list[Done] = []  # the requests that died before the run (spec.py)
        self.scheduler = Scheduler(
            world.clients.dynamodb, world.clients.dynamodb_single_attempt, redact=self.redact
        )

    # ---- plumbing ----------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        return text.replace(self.account, "ACCT")

    def plan_id(self, name: str) -> str:
        """The run's own plans (plans are global items): ``a`` and ``b`` by the scenario's names."""
        return f"{name}-{self.account}"

    def effects(self, label: str, late: bool = False) -> Effects:
        """``late``: a process whose clock is LATE seconds ahead (past the holds' deadline)."""
        serial = iter(range(1_000_000))
        ahead = LATE if late else 0
        return Effects(
            clock=lambda: self.clock() + ahead,
            new_id=lambda: f"{label}{next(serial):031x}",
            waiter=Waiter(attempts=3, delay=0.0, sleep=lambda _: self.scheduler.sleep_point()),
        )

    def clock(self) -> float:
        """Every process's clock in the run: an operation's read of it is a scheduling point of
        its own in a run that may stall (``late``), so the stall can come before the reading
        that a check of the operation's claim's age makes, not only after it."""
        self.scheduler.clock_point()
        return self.now

    def service(self, label: str, late: bool = False) -> ResourceService:
        return ResourceService(self.world.settings, self.world.clients, effects=self.effects(label, late))

    def counter(self) -> EventualCounter:
        return EventualCounter(
            self.world.settings.table_name,
            "batched",
            self.world.clients,
            sleep=lambda _: None,
            clock=self.clock,
        )

    # ---- the run -----------------------------------------------------------------------------------
    def execute(self) -> RunResult:
        complete = False
        try:
            self._setup()
            self.refresh()
            for index, spec in enumerate(self.scenario.ops):
                self.ops.append(
                    self.scheduler.spawn(
                        f"{chr(65 + index)}:{spec}",
                        self._operation(index, spec),
                        clock_points="late" in self.scenario.backgrounds,
                    )
                )
                self._record_end(index)
            while True:
                enabled = self.enabled()
                if not enabled:
                    break
                choice = self.choose(self, enabled)
                if choice is None:
                    return self._result(complete=False)
                self.apply(choice)
            self._finish()
            complete = True
        finally:
            self.scheduler.close()
        return self._result(complete)

    def _result(self, complete: bool) -> RunResult:
        answers = {self.ops[i].name: d.answer for i, d in self.done.items()}
        return RunResult(
            self.scenario,
            self.choices,
            self.trace,
            self.violations,
            answers,
            self.step_no,
            complete,
            dict(self.done),
        )

    def _setup(self) -> None:
        scenario = self.scenario
        setup = self.service("s")
        setup.put_plan(self.plan_id("a"), dict(scenario.plan))
        if scenario.other_plan or any(op.kind in ("plan", "assign") for op in scenario.ops):
            setup.put_plan(self.plan_id("b"), dict(scenario.other_plan))
        setup.assign_plan(self.account, self.plan_id("a"), force=True)
        if scenario.limit is not None:
            setup.set_limit(self.account, scenario.limit, force=True)
        for kind, limit in scenario.overrides:
            setup.set_limit(self.account, limit, kind=kind, force=True)
        claimed = [rid for rid, how in scenario.stuck if how in ("claimed", "released")]
        for text in (*scenario.counted, *claimed):
            self._create_in_setup(setup, text)
        if scenario.counted or claimed:
            self._deliver()
        for text in scenario.uncounted:  # their admissions stay in the stream, undelivered
            self._create_in_setup(setup, text)
        for rid, how in scenario.stuck:
            self._leave_stuck(rid, how)
        if scenario.records_lost:
            self.world.stream.records_for(self.account)  # trimmed: the stream path never sees them

    def _create_in_setup(self, setup: ResourceService, text: str) -> None:
        kind, rid, units = parse_res(text)
        hold = HOLD_SECONDS if rid in self.scenario.holds else None
        setup.create(
            self.account, f"name-{rid}", {}, resource_id=rid, kind=kind, units=units, hold_seconds=hold
        )

    def _leave_stuck(self, rid: str, how: str) -> None:
        """What a request that died long ago (past the grace period) left under ``rid``."""
        long_ago = START - self.world.settings.pending_grace_seconds - 60
        dead = self.service("d")
        table = ResourceTable(
            self.world.settings.table_name, self.world.clients, Effects(clock=lambda: long_ago)
        )
        if how.split(":", maxsplit=1)[0] in RESIZES_STUCK:
            self._leave_resize(table, dead, rid, how)
            return
        if how in ("claimed", "released"):
            claim = table.claim(self.account, rid, f"dead-{rid}")
            assert claim.applied
            assert claim.item is not None
            if how == "released":
                incarnation = resource_items.incarnation_of(claim.item)
                counted = resource_items.is_counted(claim.item)
                assert dead.counters.release(self.account, rid, token(rid, incarnation), counted).applied
                self.truth.released[of_kind(DEFAULT_KIND, token(rid, incarnation))] += 1
            else:
                self.dead.append(Done("delete0", rid, "crash", started=0, ended=NEVER_ENDED))
            return
        incarnation = f"{rid}dead{0:012x}"[:16]
        item = resource_items.pending_item(self.account, rid, f"name-{rid}", {}, incarnation, now=long_ago)
        assert table.put_pending(item).applied
        if how == "admitted":
            admission = token(rid, incarnation)
            state = dead.counters.read(self.account)
            judge = dead.limits.judge(self.account, DEFAULT_KIND)
            admitted = dead.counters.admit(self.account, rid, admission, state, judge=judge)
            assert admitted.outcome.value == "admitted"
            self.truth.admitted.add(of_kind(DEFAULT_KIND, admission))
        self.dead.append(Done("create0", rid, "crash", started=0, ended=NEVER_ENDED))

    def _leave_resize(self, table: ResourceTable, dead: ResourceService, text: str, how: str) -> None:
        """A PATCH of ``text``'s resource to the target in ``how`` that claimed it long ago and
        then died: before its counter write, or after it ("resized"), or after it was refused
        (409) and its revert failed ("refused")."""
        what, target = how.split(":")
        kind, rid, _ = parse_res(text)
        item = table.get(self.account, rid, kind=kind)
        assert item is not None
        units, incarnation = resource_items.units_of(item), resource_items.incarnation_of(item)
        request = f"deadz-{rid}"
        claimed = table.claim_resize(
            self.account, rid, request, kind=kind, incarnation=incarnation, units=units, target=int(target)
        )
        assert claimed.applied
        patch = Done("patch", rid, "crash", started=0, ended=NEVER_ENDED, of=kind, units=int(target))
        if what == "resized":
            moved = dead.counters.resize(
                self.account,
                rid,
                resize_token(rid, incarnation, request),
                int(target) - units,
                counted=resource_items.is_counted(item),
                seen=dead.counters.read(self.account, kind=kind),
                kind=kind,
                judge=dead.limits.judge(self.account, kind),
            )
            assert moved.outcome.value == "admitted"
            self.truth.resized.add(of_kind(kind, resize_token(rid, incarnation, request)))
        elif what == "refused":
            patch = replace(patch, answer=409, ended=0)  # its caller was told nothing changed
        self.dead.append(patch)

    def _operation(self, index: int, spec: OpSpec) -> Callable[[], Any]:
        service = self.service(chr(97 + index))
        if spec.kind in REPAIRS:
            return self._repair(spec, service)
        account, of, units, arg = self.account, spec.of, spec.units, spec.arg
        by = changed_by(index)
        hold = HOLD_SECONDS if spec.hold else None
        late = self.service(chr(97 + index), late=True) if spec.kind in ("expire", "reclaim") else service
        flows: dict[str, Callable[[], Any]] = {
            "post": lambda: service.create(account, "posted", {}, kind=of, units=units),
            "put": lambda: service.create(
                account, f"name-{arg}", {}, resource_id=str(arg), kind=of, units=units, hold_seconds=hold
            ),
            "confirm": lambda: service.confirm(account, str(arg), kind=of),
            "expire": lambda: self._expire_holds(late, of),
            "reclaim": lambda: late.create(account, "posted", {}, kind=of, units=units),
            "delete": lambda: service.delete(account, str(arg), kind=of),
            "patch": lambda: service.resize(account, str(arg), units, kind=of),
            "limit": lambda: service.set_limit(account, int(arg), kind=of, force=True, by=by),
            "unlimit": lambda: service.remove_limit(account, kind=of, force=True, by=by),
            "plan": lambda: service.put_plan(self.plan_id(arg[0]), dict(arg[1]), by=by),
            "assign": lambda: service.assign_plan(account, self.plan_id(str(arg)), force=True, by=by),
        }
        return flows[spec.kind]

    def _expire_holds(self, late: ResourceService, kind: str) -> int:
        """The sweeper's expiry of holds (HoldFlow.sweep), by a process whose clock is past their
        deadline, of this run's account: a read of the HoldIndex filtered to past deadlines (the
        sweeper's Scan, here its Query of the account, so that what earlier runs left in the
        shared table is not this run's), then each one expired (claim, tombstone, release)."""
        expired = late.holds.expired(self.account, kind)
        return sum(late.holds.expire(self.account, str(item["resource_id"]["S"]), item) for item in expired)

    def _repair(self, spec: OpSpec, service: ResourceService) -> Callable[[], Any]:
        """A repair as an operation, every call a scheduling point: the audit's work on the
        account's items, the recount of the id's range, or TTL removing a stale pending item."""
        account, world, rid = self.account, self.world, str(spec.arg)
        grace = world.settings.pending_grace_seconds
        recounter = self.recounter(service)
        if spec.kind == "recount":
            return lambda: recounter.recount_range(account, range_of(rid), fix=True)
        if spec.kind == "audit":
            sweeper = Sweeper(
                world.settings.table_name,
                self.counter(),
                grace,
                world.clients,
                clock=self.clock,
                recounter=recounter,
            )

            def audit() -> SweepOutcome:
                page = world.clients.dynamodb.query(
                    TableName=world.settings.table_name,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": account_pk(account)}},
                    ConsistentRead=True,
                )["Items"]
                outcome = SweepOutcome()
                sweeper._audit_page([dict(item) for item in page], iso_utc(self.clock() - grace), outcome)
                return outcome

            return audit

        def ttl() -> None:
            item = world.clients.dynamodb.get_item(
                TableName=world.settings.table_name, Key=resource_key(account, rid), ConsistentRead=True
            ).get("Item")
            if resource_items.state_of(item) != resource_items.PENDING:
                return
            assert item is not None
            incarnation = resource_items.incarnation_of(item)
            try:
                world.clients.dynamodb.delete_item(
                    TableName=world.settings.table_name,
                    Key=resource_key(account, rid),
                    ConditionExpression="#state = :pending AND incarnation = :inc",
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={":pending": {"S": "pending"}, ":inc": {"S": incarnation}},
                )
            except ClientError:
                return  # it went live (adopted) or was rolled back first
            self.ttl_removed.add(incarnation)
            removed = of_kind(DEFAULT_KIND, token(rid, incarnation))
            if removed in self.truth.admitted and removed not in self.truth.released_pending:
                self.truth.owed[(DEFAULT_KIND, range_of(rid))] += (
                    1  # best_effort holds its slot until the census
                )

        return ttl

    def recounter(self, service: ResourceService) -> Recounter:
        world = self.world
        table = world.settings.table_name
        return Recounter(
            table,
            service.counters,
            self.counter(),
            Healer(table, world.clients),
            world.clients,
            service=service,
            grace_seconds=world.settings.pending_grace_seconds,
            clock=self.clock,
            sleep=lambda _: None,
            attempts=3,
        )

    def _gated(self, index: int) -> bool:
        """Not started yet: it starts once the operation it comes after has answered."""
        after = self.scenario.ops[index].after
        return after is not None and not self.ops[after].done

    def enabled(self) -> list[Choice]:
        running = [i for i, op in enumerate(self.ops) if op.blocked and not op.waiting and not self._gated(i)]
        waiting = [i for i, op in enumerate(self.ops) if op.waiting and not self._gated(i)]
        # A waiting operation polls again once something was written since it began to wait, or
        # when nothing else can move (then its wait runs out).
        woken = [i for i in waiting if self._waiting_since.get(i, -1) < self.last_write]
        if not running and not woken:
            woken = waiting
        choices: list[Choice] = [("op", i, None) for i in sorted(running + woken)]
        if any(not op.done for op in self.ops):
            # A stall past the grace period comes between an operation's calls, before the
            # reading of its clock that decides its next one, never between the two (Scheduler.clock_point).
            stalls = not any(op.past_its_clock for op in self.ops)
            choices += [
                ("bg", name, None)
                for name in self.scenario.backgrounds
                if name not in self.used and (name != "late" or stalls)
            ]
        return choices

    def apply(self, choice: Choice) -> None:
        self.choices.append(choice)
        self.step_no += 1
        kind, what, fault = choice
        if kind == "bg":
            self.used.add(what)
            self.background(what)
            return
        op = self.ops[what]
        call = self.scheduler.step(op, fault)
        if call is None:
            return
        self.observe(call)
        self.trace.append(f"{self.step_no:3d}. {call.describe()}")
        if op.waiting:
            self._waiting_since[what] = self.step_no
        self._record_end(what)
        if call.writes and call.applied is not False:
            self._check_kind_of(self.scenario.ops[what], op, call)
            self.last_write = self.step_no
            self.writes_since_delivery.append(self.redact(json.dumps(call.body, sort_keys=True)))
            self.after_write(call)

    def observe(self, call: Call) -> None:
        """What a call of this run's took effect on (the truth), as soon as it returns."""
        self.truth.observe(call)
        self.violations.extend(f"step {self.step_no}: {problem}" for problem in self._resize_ended(call))

    def after_write(self, call: Call) -> None:
        """A write took effect (or may have): read the state back and check it."""
        before = self.refresh()
        self._note_released_pending(call)
        self.check(after=call, before=before)

    def refresh(self) -> Any:
        """Read the state back; returns the state before (a Snapshot here)."""
        before, self.snapshot = self.snapshot, self.read()
        return before

    def state_view(self) -> list[Any]:
        """The table's state as the search tells points apart (search.state_key)."""
        snapshot = {
            f"{kind}/{rid}": {k: v for k, v in item.items() if not k.endswith("_shard")}
            for (kind, rid), item in self.snapshot.resources.items()
        }
        counters = {
            kind: {k: v for k, v in item.items() if not k.endswith("_shard")}
            for kind, item in self.snapshot.counters.items()
        }
        return [snapshot, counters, [self.snapshot.plan, self.snapshot.plans]]

    def _check_kind_of(self, spec: OpSpec, op: Operation, call: Call) -> None:
        """One kind's operations write that kind's items only (its counter item, its resources)."""
        if spec.kind not in KIND_OPS:
            return
        key = call.key
        if key.startswith(COUNTER_PREFIX):
            written = key[len(COUNTER_PREFIX) :]
        elif key.startswith(RESOURCE_PREFIX):
            written = parse_kind_resource_sk(key)[0]
        else:
            return
        if written != spec.of:
            self.violations.append(f"step {self.step_no}: {op.name} wrote {key}, an item of another kind")

    def _record_end(self, index: int) -> None:
        op = self.ops[index]
        if op.done and index not in self.done:
            spec = self.scenario.ops[index]
            # An operation that comes after another started once that one had answered (its
            # first call is held until then; nothing it does before that call is observable).
            started = 0 if spec.after is None else self.done[spec.after].ended + 1
            self.done[index] = self._done_of(index, spec, op, started)
            self.trace.append(f"     {op.name} answered {self.done[index].answer}")
            if self.done[index].answer == 500:
                self.violations.append(f"{op.name} failed unexpectedly: {op.error!r}")
            unadmitted = any(made_live_unadmitted(c) for c in op.calls)
            if unadmitted and not self._past_limit_allowed(self.done[index]):
                self.violations.append(
                    f"{op.name} made its resource live unadmitted though DynamoDB refused every admission"
                )

    def _done_of(self, index: int, spec: OpSpec, op: Operation, started: int) -> Done:
        """How an operation ended, as the sequential model takes it (spec.py)."""
        return Done(
            REPAIR if spec.kind in REPAIRS else spec.kind,
            spec.arg,
            answer_of(op, spec.kind),
            started=started,
            ended=self.step_no,
            created_id=self._created_id(index, spec, op),
            past_limit_allowed=made_live_without_a_known_refusal(op.calls),
            of=spec.of,
            units=spec.units,
            hold=spec.hold,
        )

    def _created_id(self, index: int, spec: OpSpec, op: Operation) -> str | None:
        """The id a POST got (its service's first id). A reclaim's: the one it answered (its
        first attempt's id was refused; the expiry and the second attempt take ids of their own)."""
        if spec.kind == "post":
            return f"{chr(97 + index)}{0:031x}"
        if spec.kind == "reclaim" and op.error is None:
            return str(op.result[0].resource_id)
        return None

    def _past_limit_allowed(self, done: Done) -> bool:
        return done.past_limit_allowed

    # ---- background work, as one step each ------------------------------------------------------
    def background(self, name: str) -> None:
        op = self.scheduler.spawn(f"bg:{name}", self._background_work(name))
        while not op.done:
            call = self.scheduler.step(op)
            if call is not None and self._mine(call):
                self.observe(call)
                if call.operation == "TransactWriteItems" and call.applied:
                    self._after_count()
        if op.error is not None:
            self.violations.append(f"background {name} failed: {op.error!r}")
        self.trace.append(f"{self.step_no:3d}. background {name}")
        self.last_write = self.step_no
        before = self.refresh()
        self.check(after=None, before=before)

    def _after_count(self) -> None:
        """A count, looked at on its own: a delivery may also finish the resize that held the
        resource, right after (design.md §5.1: counts first)."""
        before = self.refresh()
        found = self._counted_while_resizing(before)
        self.violations.extend(f"step {self.step_no}: {problem}" for problem in found)

    def _background_work(self, name: str) -> Callable[[], Any]:
        account, world = self.account, self.world
        table = world.settings.table_name
        if name == "stream":
            work: Callable[[], Any] = self._deliver
        elif name == "sweep":
            sweeper = Sweeper(
                table,
                self.counter(),
                world.settings.pending_grace_seconds,
                world.clients,
                clock=self.clock,
                changes=self.service("w").changes,  # completes limit changes left waiting
            )
            work = sweeper.sweep
        elif name == "heal":
            healer = Healer(table, world.clients)
            work = lambda: [healer.heal_account(account, kind=kind) for kind in self.kinds]  # noqa: E731
        elif name == "recount":
            recounter = self.recounter(self.service("r"))
            work = lambda: [recounter.recount(account, fix=True, kind=kind) for kind in self.kinds]  # noqa: E731
        elif name == "audit":
            work = self._repair(OpSpec("audit"), self.service("u"))
        elif name == "late":
            work = self._stall_past_the_grace_period
        elif name == "expire":
            work = self._expire_again
        else:
            raise ValueError(name)
        return work

    def _expire_again(self) -> None:
        """The sweeper's next run, past the holds' deadline: it expires the holds an expiry of
        the run gave up (its claim reverted), as one more expiry the answers must explain (its
        count is no caller's answer: a confirm may have been told HoldExpired by the claim it
        reverted, which the model takes as the given-up expiry's, so this one may find nothing)."""
        kinds = sorted({op.of for op in self.scenario.ops if op.kind in ("expire", "reclaim")})
        for kind in kinds:
            self._expire_holds(self.service("n", late=True), kind)
            self.dead.append(Done("expire", None, 503, started=self.step_no + 1, ended=NEVER_ENDED, of=kind))

    def _stall_past_the_grace_period(self) -> None:
        """``late``: every process stalls here until the grace period has passed; from then on
        every clock (the operations' own, the sweeper's, a takeover's) reads past it, so work
        still in flight looks dead to the repairers, and finds its own claims, leases and marks
        too old when it goes on (items.in_time)."""
        self.now = max(self.now, START + self.world.settings.pending_grace_seconds + 60)

    def _deliver(self) -> None:
        records = self.backlog + [self._as_ttl(r) for r in self.world.stream.records_for(self.account)]
        self.backlog = []
        counter = self.counter()
        for start in range(0, len(records), 100):
            outcome = process_stream_batch(records[start : start + 100], counter)
            if outcome.failed_sequence_numbers:
                failed = set(outcome.failed_sequence_numbers)
                self.backlog.extend(r for r in records[start:] if r["dynamodb"]["SequenceNumber"] in failed)
        self.writes_since_delivery = []

    def _as_ttl(self, record: dict[str, Any]) -> dict[str, Any]:
        """DynamoDB Local has no TTL: a removal by the "ttl" operation is marked as TTL's would be."""
        old = record.get("dynamodb", {}).get("OldImage") or {}
        if record.get("eventName") == "REMOVE" and old.get("incarnation", {}).get("S") in self.ttl_removed:
            return {**record, "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}}
        return record

    # ---- reading back and checking -----------------------------------------------------------------
    def read(self) -> Snapshot:
        paginator = self.world.clients.dynamodb.get_paginator("query")
        snapshot = Snapshot({}, {})
        for page in paginator.paginate(
            TableName=self.world.settings.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": account_pk(self.account)}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                sk = str(item["sk"]["S"])
                if sk.startswith(COUNTER_PREFIX):
                    snapshot.counters[sk[len(COUNTER_PREFIX) :]] = dict(item)
                elif sk.startswith(RESOURCE_PREFIX):
                    snapshot.resources[parse_kind_resource_sk(sk)] = dict(item)
                elif sk == PROFILE_SK:
                    snapshot.profile = dict(item)
                    if "plan_id" in item:  # (a member's profile may name none)
                        snapshot.plan = str(item["plan_id"]["S"]).removesuffix(f"-{self.account}")
                elif is_request(item):
                    snapshot.census_requests += 1
        snapshot.plans = self._plans()
        for kind in self.kinds:
            self.plan_limit_max[kind] = max(self.plan_limit_max.get(kind, 0), snapshot.plan_limit(kind))
        return snapshot

    def _plans(self) -> dict[str, dict[str, int]]:
        if not self.reads_plans:  # nothing in the run changes them: as set up
            return {"a": dict(self.scenario.plan), "b": dict(self.scenario.other_plan)}
        plans = {}
        for name in ("a", "b"):
            item = self.world.clients.dynamodb.get_item(
                TableName=self.world.settings.table_name,
                Key=plan_key(self.plan_id(name)),
                ConsistentRead=True,
            ).get("Item", {})
            plans[name] = {k: int(v["N"]) for k, v in item.get("limits", {}).get("M", {}).items()}
        return plans

    def _note_released_pending(self, call: Call) -> None:
        if not call.key.startswith(COUNTER_PREFIX):
            return
        kind = call.key[len(COUNTER_PREFIX) :]
        stale_before = iso_utc(self.now - self.world.settings.pending_grace_seconds)
        for range_id in _corrected_ranges(call):
            for (of, rid), item in self.snapshot.resources.items():
                if (
                    of == kind
                    and range_of(rid) == range_id
                    and resource_items.state_of(item) == resource_items.PENDING
                    and resource_items.since(item, "created_at") < stale_before
                ):
                    self.truth.released_pending.add(
                        of_kind(kind, token(rid, resource_items.incarnation_of(item)))
                    )

    def held_units(self, key: Key, item: dict[str, Any]) -> int:
        """The units a resource holds on its counters: its own, or, while a resize holds it,
        the target once the resize's counter write has applied (the scheduler saw it)."""
        request = resource_items.since(item, "resize_request")
        if request:
            moved = resize_token(key[1], resource_items.incarnation_of(item), request)
            if of_kind(key[0], moved) in self.truth.resized:
                return int(item["resize_to"]["N"])
        return resource_items.units_of(item)

    def _mine(self, call: Call) -> bool:
        """A call on this run's account, a plan or a transaction (a sweep also finishes what
        earlier runs, cut short by the search, left in the PendingIndex: not this run's truth)."""
        partition = call.partition
        return (
            partition is None
            or not partition.startswith(ACCOUNT_PREFIX)
            or partition == account_pk(self.account)
        )

    def _resize_ended(self, call: Call) -> list[str]:
        """A resize's claim ended: at the size its counters hold (design.md §4.4), or, only by a
        settlement that asked for a census of the range first, at the smaller size while they
        hold the larger: that census brings them down (an owed slot, as TTL's). Never at more
        than they hold. ``self.snapshot`` is still the state before the call (the claim in it)."""
        ended = ends_a_resize(call) if call.applied else None
        if ended is None:
            return []
        request, to_target = ended
        key = parse_kind_resource_sk(call.key)
        item = self.snapshot.resources.get(key)
        if item is None or resource_items.since(item, "resize_request") != request:
            return [f"{key} ended a resize {request} that the snapshot does not show"]
        origin, target = int(item["resize_from"]["N"]), int(item["resize_to"]["N"])
        held = self.held_units(key, item)
        now = target if to_target else origin
        if now > held:
            return [f"{key}'s resize ended at {now} units, more than the {held} its counters hold"]
        if now < held:
            kind, rid = key
            if (kind, range_of(rid)) not in self.truth.requested:
                return [
                    f"{key}'s resize ended at {now} units below the {held} its counters hold, with no census asked for"
                ]
            self.truth.owed[(kind, range_of(rid))] += held - now
        return []

    def slot_holders(self, snap: Snapshot, kind: str) -> dict[Key, int]:
        """The kind's resources holding a slot, with the units each holds."""
        held = {}
        for key, item in snap.resources.items():
            if key[0] != kind:
                continue
            state = resource_items.state_of(item)
            tok = of_kind(kind, token(key[1], resource_items.incarnation_of(item)))
            if (
                state == resource_items.LIVE
                or (
                    state == resource_items.PENDING
                    and tok in self.truth.admitted
                    and tok not in self.truth.released_pending
                )
                or (state == resource_items.DELETING and not self.truth.let_go(tok))
            ):
                held[key] = self.held_units(key, item)
        return held

    def counted_units(self, snap: Snapshot, kind: str) -> dict[Key, int]:
        """The kind's resources the stream path counted that no delete released, with their units."""
        return {
            key: self.held_units(key, item)
            for key, item in snap.resources.items()
            if key[0] == kind
            and resource_items.is_counted(item)
            and (
                resource_items.state_of(item) == resource_items.LIVE
                or not self.truth.let_go(of_kind(kind, token(key[1], resource_items.incarnation_of(item))))
            )
        }

    def check(self, after: Call | None, before: Snapshot | None = None) -> None:
        found: list[str] = []
        for kind in self.kinds:
            found.extend(f"{kind}: {problem}" for problem in self._check_kind(kind, after))
        for key, item in self.snapshot.resources.items():
            if resource_items.is_counted(item) and resource_items.state_of(item) == resource_items.PENDING:
                found.append(f"{key} is counted but pending")
        found.extend(self._counted_while_resizing(before))
        for problem in found:
            self.violations.append(f"step {self.step_no}: {problem}")

    def _counted_while_resizing(self, before: Snapshot | None) -> list[str]:
        """The stream path (or the sweeper) never counts a resource while a resize holds it: the
        resize's counter write moves eventual only if the resource was counted at its claim."""
        found = []
        for key, item in self.snapshot.resources.items():
            old = before.resources.get(key) if before is not None else None
            request = resource_items.since(item, "resize_request")
            if (
                old is not None
                and request
                and request == resource_items.since(old, "resize_request")
                and not resource_items.is_counted(old)
                and resource_items.is_counted(item)
            ):
                found.append(f"{key} was counted while a resize held it")
        return found

    def _check_kind(self, kind: str, after: Call | None) -> list[str]:
        snap, truth = self.snapshot, self.truth
        found: list[str] = []
        item = snap.counters.get(kind)
        if item is not None:
            size = item_size(item)
            if size >= ITEM_LIMIT:
                found.append(f"counter item is {size} bytes")
            state = snap.state(kind)
            shares = [state.share(r) for r in all_ranges()]
            if state.best_effort != sum(s.best_effort for s in shares):
                found.append(f"{BEST_EFFORT} {state.best_effort} != sum of its range shares")
            if state.eventual != sum(s.eventual for s in shares):
                found.append(f"{EVENTUAL} {state.eventual} != sum of its range shares")
        state = snap.state(kind)
        held = self.slot_holders(snap, kind)
        units = sum(held.values())
        owed = sum(n for (of, _), n in truth.owed.items() if of == kind)
        if state.best_effort > units + owed:
            found.append(
                f"best_effort {state.best_effort} overcounts the {units} units holding a slot {held}"
            )
        if truth.undercounts:  # (documented until the census of a dead delete: now a defect)
            found.append(f"a release made twice: {[t for t, n in truth.released.items() if n > 1]}")
        # Exact only without faults, or a resource made live without an admission (an adoption:
        # best_effort may undercount it until it is counted and healed)
        exact = truth.faults == 0 and self.now == START and not truth.adopted
        if exact and state.best_effort != units + owed:
            found.append(f"best_effort {state.best_effort} != {units} units holding a slot {held} (no fault)")
        counted = self.counted_units(snap, kind)
        total = sum(counted.values())
        if state.eventual != total:
            found.append(f"eventual {state.eventual} != {total} counted unreleased units {counted}")
        if after is not None and after.key == f"{COUNTER_PREFIX}{kind}" and _admits(after):
            unadmitted = sum(
                n
                for key, n in held.items()
                if of_kind(kind, token(key[1], resource_items.incarnation_of(snap.resources[key])))
                not in truth.admitted
            )
            # As it stands in the table: the override, exact (the admission's condition names it);
            # else the plan's, which a create may have read before a change lowered it.
            limit = state.limit if state.limit is not None else self.plan_limit_max.get(kind, 0)
            if units > limit + unadmitted:
                found.append(f"{units} units hold a slot after an admission, limit {limit}")
        return found

    def _finish(self) -> None:
        """Every operation has ended: drain, let the grace period pass, sweep, heal; then the end.
        Stream records that were lost make the retry path ask for an audit: it runs too."""
        self.background("stream")
        self.now += self.world.settings.pending_grace_seconds + 60  # past what a "late" step wrote too
        if self.scenario.records_lost:
            self.background("audit")
        changes = any(op.kind in LIMIT_OPS for op in self.scenario.ops)
        if (
            changes
            or self.snapshot.census_requests
            or any("pending_shard" in item for item in self.snapshot.resources.values())
        ):
            self.background("sweep")  # the PendingIndex holds something of this account
            self.background("stream")  # the sweep's own counter writes may ask for a heal
        if any(_reverted_a_claim(call) for op in self.ops for call in op.calls) and any(
            d.kind in ("expire", "reclaim") for d in self.done.values()
        ):
            # A claim reverted (a release too late, throttled): the hold it claimed, past its
            # deadline, is live again, and an expiry that met the claim passed over it, or gave
            # it up. What the sweeper's runs count is no caller's answer: the next run expires it.
            for index, done in list(self.done.items()):
                if done.kind == "expire":
                    self.done[index] = replace(done, answer=503)
            self.background("expire")
            self.background("stream")
        if any(self.snapshot.state(k).best_effort < self.snapshot.state(k).eventual for k in self.kinds):
            self.background("heal")
        for kind in self.kinds:
            self._check_end(kind)
        if changes:
            self._check_history()
        snap = self.snapshot
        final = frozenset(
            (kind, rid, resource_items.units_of(snap.resources[(kind, rid)]))
            for of in self.kinds
            for kind, rid in snap.of(of, resource_items.LIVE, resource_items.DELETING)
        )
        self._check_answers(final)

    def _held(self, snap: Snapshot) -> frozenset[Key]:
        """The live resources that are still holds (not confirmed, not expired)."""
        return frozenset(
            key
            for key, item in snap.resources.items()
            if resource_items.state_of(item) == resource_items.LIVE
            and resource_items.hold_until_of(item) is not None
        )

    def _check_end(self, kind: str) -> None:
        snap, truth = self.snapshot, self.truth
        state = snap.state(kind)
        visible = {
            key: self.held_units(key, snap.resources[key])
            for key in snap.of(kind, resource_items.LIVE, resource_items.DELETING)
        }
        for key in snap.of(kind, resource_items.LIVE):
            item = snap.resources[key]
            # A resize whose request died holds its item (and the count the stream path left to
            # the sweeper) until a retried request or a repair ends it (design.md §4.4), as a
            # dead delete's claim does.
            if not resource_items.is_counted(item) and not resource_items.resizing(item):
                self.violations.append(f"end: {key} is live but was never counted")
        for key in snap.of(kind, resource_items.PENDING):
            if (
                of_kind(kind, token(key[1], resource_items.incarnation_of(snap.resources[key])))
                in truth.admitted
            ):
                self.violations.append(f"end: {key} was admitted but is still pending")
        if state.best_effort > sum(visible.values()):
            self.violations.append(
                f"end: {kind} best_effort {state.best_effort} > {sum(visible.values())} visible units"
            )
        counted = sum(self.counted_units(snap, kind).values())
        if state.eventual != counted:
            self.violations.append(
                f"end: {kind} eventual {state.eventual} does not count the {counted} visible counted units"
            )
        if truth.faults == 0 and state.best_effort != state.eventual:
            self.violations.append(
                f"end: {kind} best_effort {state.best_effort} != eventual {state.eventual} (no fault)"
            )

    def _history(self) -> list[dict[str, Any]]:
        """The records of this run's account and plans, as history keeps them."""
        found = []
        for pk in (
            f"{HISTORY_PREFIX}ACCOUNT#{self.account}",
            *(f"{HISTORY_PREFIX}PLAN#{self.plan_id(p)}" for p in "ab"),
        ):
            found += self.world.clients.dynamodb.query(
                TableName=self.world.settings.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": pk}},
                ConsistentRead=True,
            )["Items"]
        return found

    def _check_history(self) -> None:
        """Every limit change made is in history once, with its own change id, and none that
        changed nothing; every change a counter item names is in history (design.md §9)."""
        found: Counter[str] = Counter()
        history = self._history()
        for item in history:
            record = json.loads(item["record"]["S"])
            found[record["by"]] += 1
            if record["old"] == record["new"]:
                self.violations.append(f"end: {record['by']} recorded a change of nothing: {record}")
        for index, spec in enumerate(self.scenario.ops):
            by = changed_by(index)
            if spec.kind in LIMIT_OPS and found[by] > 1:
                self.violations.append(f"end: {by} ({spec}) is in history {found[by]} times")
        recorded = {str(item["sk"]["S"]) for item in history}
        unrecorded = [
            str(item[LIMIT_CHANGE]["S"])
            for item in self.snapshot.counters.values()
            if LIMIT_CHANGE in item and str(item[LIMIT_CHANGE]["S"]) not in recorded
        ]
        if unrecorded:
            self.violations.append(f"end: changes {unrecorded} are named on counter items, not in history")

    def _check_answers(self, final: frozenset[Held]) -> None:
        scenario = self.scenario
        claimed = [parse_res(rid) for rid, how in scenario.stuck if how == "claimed"]
        overrides = dict(scenario.overrides)
        if scenario.limit is not None:
            overrides[DEFAULT_KIND] = scenario.limit
        initial = Model(
            frozenset((*(parse_res(r) for r in (*scenario.counted, *scenario.uncounted)), *claimed)),
            overrides=tuple(sorted(overrides.items())),
            plans=(("a", tuple(sorted(scenario.plan))), ("b", tuple(sorted(scenario.other_plan)))),
            held=frozenset(
                (kind, rid)
                for kind, rid, _ in map(parse_res, (*scenario.counted, *scenario.uncounted))
                if rid in scenario.holds
            ),
        )
        done = [*self.dead, *(self.done[i] for i in sorted(self.done))]
        if explain(initial, done, final, self._held(self.snapshot)) is None:
            shown = ", ".join(f"{self.ops[i].name}={d.answer}" for i, d in sorted(self.done.items()))
            self.violations.append(
                f"end: no sequential order explains the answers ({shown}) and {sorted(final)}"
            )


def changed_by(index: int) -> str:
    """Who a limit operation's change is recorded as made by: the operation itself."""
    return f"op-{chr(65 + index)}"


def answer_of(op: Operation, kind: str) -> int | str:
    error = op.error
    if error is None:
        return _success(op, kind)
    if isinstance(error, Crash):
        return "crash"
    for error_kind, status in (
        (LimitExceeded, 409),
        (HoldExpired, HOLD_EXPIRED),
        (IdempotencyConflict, CONFLICT),
        (NotFound, 404),
        (Throttled, 429),
        (InProgress, 503),
        (StoreUnavailable, 503),
    ):
        if isinstance(error, error_kind):
            return status
    return 500


def _success(op: Operation, kind: str) -> int:
    if kind in ("post", "put", "reclaim"):
        return 201 if op.result[1] else 200
    if kind == "expire":
        return int(op.result)  # how many holds it expired (but see Run._finish)
    # LIMIT_SET: limits, plans, repairs
    return {"delete": 204, "patch": 200, "confirm": 200}.get(kind, LIMIT_SET)


def _reverted_a_claim(call: Call) -> bool:
    """A delete's claim reverted (table.py ``revert``): the resource live again."""
    expression = str(call.body.get("UpdateExpression", ""))
    return (
        call.operation == "UpdateItem"
        and call.key.startswith(RESOURCE_PREFIX)
        and "#state = :live" in expression
        and "delete_request" in expression
        and call.applied is not False
    )


def _admits(call: Call) -> bool:
    """An admission, or a resize that grows (admitted like one: its condition names the limit)."""
    assigned = _assignments(call)
    return "last_admission" in assigned or (
        "last_resize" in assigned and "#limit" in str(call.body.get("ConditionExpression", ""))
    )


def share_names() -> list[str]:
    return [name for r in all_ranges() for name in (best_effort_share(r), eventual_share(r))]


def made_live_unadmitted(call: Call) -> bool:
    """The create's make-live that also indexes the resource for the sweeper: what it does when
    it cannot know that its admission applied, and what an adoption does (create.py, table.py)."""
    expression = str(call.body.get("UpdateExpression", ""))
    return (
        call.operation == "UpdateItem"
        and "#state = :live" in expression
        and "pending_shard = :pending_shard" in expression
        and ":pending" in call.values()
        and call.applied is not False
    )


def made_live_without_a_known_refusal(calls: list[Call]) -> bool:
    """P1's exception, and only it: made live unadmitted after an admission whose response was
    lost (or by adoption, which has no admission). An admission refused for sure (throttled,
    conditional check failed) must never end live."""
    if not any(made_live_unadmitted(call) for call in calls):
        return False
    admissions = [call for call in calls if _is_admission(call)]
    return not admissions or any(call.outcome == "fault:lost" for call in admissions)


def _is_admission(call: Call) -> bool:
    return call.operation == "UpdateItem" and "last_admission" in str(call.body.get("UpdateExpression", ""))
