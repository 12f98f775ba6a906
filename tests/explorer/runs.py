"""One run of a scenario: its operations interleaved call by call, checked after every step.

A scenario is an account's starting point (a limit, some resources) and a few concurrent API
operations; background work (a stream delivery, a sweep, a heal, a recount) can be run as one
atomic step at any point. A run executes one schedule (which operation's next DynamoDB call
goes next, with which fault), against DynamoDB Local on a fresh account, with the real domain
code and deterministic ids and clock. After every step the account is read back and the
invariants are checked; when every operation has ended the stream is drained, the sweeper
and the healer run with the clock past the grace period, and the end state and the answers
are checked (linearizability against spec.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.capacity import item_size
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
    IdempotencyConflict,
    InProgress,
    LimitExceeded,
    NotFound,
    StoreUnavailable,
    Throttled,
)
from hybrid_counter.healing import Healer
from hybrid_counter.keys import account_pk, all_ranges, counter_sk, iso_utc, range_of, resource_key, token
from hybrid_counter.recount_requests import is_request
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from hybrid_counter.resources.table import ResourceTable
from hybrid_counter.settings import Settings
from tests.explorer.scheduler import Call, Crash, Operation, Scheduler
from tests.explorer.spec import NEVER_ENDED, REPAIR, Done, Model, explain

START = 1_800_000_000.0
COUNTER_SK_OF_THE_KIND = counter_sk()  # the runs use the default kind
ITEM_LIMIT = 1024  # bytes: one write unit per write
BACKGROUNDS = ("stream", "sweep", "heal", "recount")


@dataclass(frozen=True)
class OpSpec:
    kind: str  # post | put | delete | limit
    arg: str | int | None = None

    def __str__(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}({self.arg})"


@dataclass(frozen=True)
class Scenario:
    name: str
    limit: int
    ops: tuple[OpSpec, ...]
    counted: tuple[str, ...] = ()  # resources that exist, counted by the stream path, before the run
    uncounted: tuple[str, ...] = ()  # resources that exist, not yet counted
    backgrounds: tuple[str, ...] = ()
    # What requests that died before the run left, by id (see STUCK), and whether the stream
    # records of the setup were lost (trimmed) rather than left for the stream path.
    stuck: tuple[tuple[str, str], ...] = ()
    records_lost: bool = False


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
    # Slots best_effort still holds for admitted pending items TTL removed, by range, until the
    # census their removal asked for corrects the range (design.md: P2 and TTL).
    owed: Counter[str] = field(default_factory=Counter)

    def observe(self, call: Call) -> None:
        if call.outcome and call.outcome.startswith("fault:"):
            self.faults += 1
        if made_live_unadmitted(call):
            self.adopted = True
        if not call.applied or call.operation != "UpdateItem" or call.key != COUNTER_SK_OF_THE_KIND:
            return
        for range_id in _corrected_ranges(call):
            self.owed.pop(range_id, None)
        assigned = _assignments(call)
        if "last_admission" in assigned:
            self.admitted.add(assigned["last_admission"])
        if "last_release" in assigned:
            self.released[assigned["last_release"]] += 1

    @property
    def doubled(self) -> bool:
        return any(n > 1 for n in self.released.values())


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
    counter: dict[str, Any] | None
    resources: dict[str, dict[str, Any]]  # resource id -> item
    census_requests: int = 0  # REPAIR# items of the account (recount_requests.py)

    def state(self) -> CounterState:
        return CounterState.from_item(self.counter)

    def of(self, *states: str) -> list[str]:
        return [rid for rid, item in self.resources.items() if resource_items.state_of(item) in states]


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
        self.snapshot = Snapshot(None, {})
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

    def effects(self, label: str) -> Effects:
        serial = iter(range(1_000_000))
        return Effects(
            clock=lambda: self.now,
            new_id=lambda: f"{label}{next(serial):031x}",
            waiter=Waiter(attempts=3, delay=0.0, sleep=lambda _: self.scheduler.sleep_point()),
        )

    def service(self, label: str) -> ResourceService:
        return ResourceService(self.world.settings, self.world.clients, effects=self.effects(label))

    def counter(self) -> EventualCounter:
        return EventualCounter(
            self.world.settings.table_name, "batched", self.world.clients, sleep=lambda _: None
        )

    # ---- the run -----------------------------------------------------------------------------------
    def execute(self) -> RunResult:
        complete = False
        try:
            self._setup()
            self.snapshot = self.read()
            for index, spec in enumerate(self.scenario.ops):
                self.ops.append(
                    self.scheduler.spawn(f"{chr(65 + index)}:{spec}", self._operation(index, spec))
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
        setup = self.service("s")
        setup.set_limit(self.account, self.scenario.limit)
        claimed = [rid for rid, kind in self.scenario.stuck if kind in ("claimed", "released")]
        for rid in (*self.scenario.counted, *claimed):
            setup.create(self.account, f"name-{rid}", {}, resource_id=rid)
        if self.scenario.counted or claimed:
            self._deliver()
        for rid in self.scenario.uncounted:  # their admissions stay in the stream, undelivered
            setup.create(self.account, f"name-{rid}", {}, resource_id=rid)
        for rid, kind in self.scenario.stuck:
            self._leave_stuck(rid, kind)
        if self.scenario.records_lost:
            self.world.stream.records_for(self.account)  # trimmed: the stream path never sees them

    def _leave_stuck(self, rid: str, kind: str) -> None:
        """What a request that died long ago (past the grace period) left under ``rid``."""
        long_ago = START - self.world.settings.pending_grace_seconds - 60
        dead = self.service("d")
        table = ResourceTable(
            self.world.settings.table_name, self.world.clients, Effects(clock=lambda: long_ago)
        )
        if kind in ("claimed", "released"):
            claim = table.claim(self.account, rid, f"dead-{rid}")
            assert claim.applied
            assert claim.item is not None
            if kind == "released":
                incarnation = resource_items.incarnation_of(claim.item)
                counted = resource_items.is_counted(claim.item)
                assert dead.counters.release(self.account, rid, token(rid, incarnation), counted).applied
                self.truth.released[token(rid, incarnation)] += 1
            else:
                self.dead.append(Done("delete0", rid, "crash", started=0, ended=NEVER_ENDED))
            return
        incarnation = f"{rid}dead{0:012x}"[:16]
        item = resource_items.pending_item(self.account, rid, f"name-{rid}", {}, incarnation, now=long_ago)
        assert table.put_pending(item).applied
        if kind == "admitted":
            admission = token(rid, incarnation)
            state = dead.counters.read(self.account)
            assert dead.counters.admit(self.account, rid, admission, state).outcome.value == "admitted"
            self.truth.admitted.add(admission)
        self.dead.append(Done("create0", rid, "crash", started=0, ended=NEVER_ENDED))

    def _operation(self, index: int, spec: OpSpec) -> Callable[[], Any]:
        service = self.service(chr(97 + index))
        account = self.account
        if spec.kind == "post":
            return lambda: service.create(account, "posted", {})
        if spec.kind == "put":
            return lambda: service.create(account, f"name-{spec.arg}", {}, resource_id=str(spec.arg))
        if spec.kind == "delete":
            return lambda: service.delete(account, str(spec.arg))
        if spec.kind == "limit":
            new_limit = spec.arg
            assert isinstance(new_limit, int)
            return lambda: service.set_limit(account, new_limit)
        if spec.kind in REPAIRS:
            return self._repair(spec, service)
        raise ValueError(spec.kind)

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
                clock=lambda: self.now,
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
                sweeper._audit_page([dict(item) for item in page], iso_utc(self.now - grace), outcome)
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
            removed = token(rid, incarnation)
            if removed in self.truth.admitted and removed not in self.truth.released_pending:
                self.truth.owed[range_of(rid)] += 1  # best_effort holds its slot until the census

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
            clock=lambda: self.now,
            sleep=lambda _: None,
            attempts=3,
        )

    def enabled(self) -> list[Choice]:
        running = [i for i, op in enumerate(self.ops) if op.blocked and not op.waiting]
        waiting = [i for i, op in enumerate(self.ops) if op.waiting]
        # A waiting operation polls again once something was written since it began to wait, or
        # when nothing else can move (then its wait runs out).
        woken = [i for i in waiting if self._waiting_since.get(i, -1) < self.last_write]
        if not running and not woken:
            woken = waiting
        choices: list[Choice] = [("op", i, None) for i in sorted(running + woken)]
        if any(not op.done for op in self.ops):
            choices += [("bg", name, None) for name in self.scenario.backgrounds if name not in self.used]
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
        self.truth.observe(call)
        self.trace.append(f"{self.step_no:3d}. {call.describe()}")
        if op.waiting:
            self._waiting_since[what] = self.step_no
        self._record_end(what)
        if call.writes and call.applied is not False:
            self.last_write = self.step_no
            self.writes_since_delivery.append(self.redact(json.dumps(call.body, sort_keys=True)))
            self.snapshot = self.read()
            self._note_released_pending(call)
            self.check(after=call)

    def _record_end(self, index: int) -> None:
        op = self.ops[index]
        if op.done and index not in self.done:
            spec = self.scenario.ops[index]
            repair = spec.kind in REPAIRS
            self.done[index] = Done(
                REPAIR if repair else spec.kind,
                spec.arg,
                2000 if repair and op.error is None else answer_of(op),
                started=0,
                ended=self.step_no,
                created_id=f"{chr(97 + index)}{0:031x}" if spec.kind == "post" else None,
                past_limit_allowed=made_live_without_a_known_refusal(op.calls),
            )
            self.trace.append(f"     {op.name} answered {self.done[index].answer}")
            if self.done[index].answer == 500:
                self.violations.append(f"{op.name} failed unexpectedly: {op.error!r}")
            if any(made_live_unadmitted(c) for c in op.calls) and not self.done[index].past_limit_allowed:
                self.violations.append(
                    f"{op.name} made its resource live unadmitted though DynamoDB refused every admission"
                )

    # ---- background work, as one step each ------------------------------------------------------
    def background(self, name: str) -> None:
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
                clock=lambda: self.now,
            )
            work = sweeper.sweep
        elif name == "heal":
            work = lambda: Healer(table, world.clients).heal_account(account)  # noqa: E731
        elif name == "recount":
            recounter = self.recounter(self.service("r"))
            work = lambda: recounter.recount(account, fix=True)  # noqa: E731
        elif name == "audit":
            work = self._repair(OpSpec("audit"), self.service("u"))
        else:
            raise ValueError(name)
        op = self.scheduler.spawn(f"bg:{name}", work)
        while not op.done:
            call = self.scheduler.step(op)
            if call is not None:
                self.truth.observe(call)
        if op.error is not None:
            self.violations.append(f"background {name} failed: {op.error!r}")
        self.trace.append(f"{self.step_no:3d}. background {name}")
        self.last_write = self.step_no
        self.snapshot = self.read()
        self.check(after=None)

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
        counter: dict[str, Any] | None = None
        resources: dict[str, dict[str, Any]] = {}
        requests = 0
        for page in paginator.paginate(
            TableName=self.world.settings.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": account_pk(self.account)}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                if item["sk"]["S"] == COUNTER_SK_OF_THE_KIND:
                    counter = dict(item)
                elif is_request(item):
                    requests += 1
                else:
                    resources[str(item["resource_id"]["S"])] = dict(item)
        return Snapshot(counter, resources, requests)

    def _note_released_pending(self, call: Call) -> None:
        stale_before = iso_utc(self.now - self.world.settings.pending_grace_seconds)
        for range_id in _corrected_ranges(call) if call.key == COUNTER_SK_OF_THE_KIND else []:
            for rid, item in self.snapshot.resources.items():
                if (
                    range_of(rid) == range_id
                    and resource_items.state_of(item) == resource_items.PENDING
                    and resource_items.since(item, "created_at") < stale_before
                ):
                    self.truth.released_pending.add(token(rid, resource_items.incarnation_of(item)))

    def slot_holders(self, snap: Snapshot) -> list[str]:
        held = []
        for rid, item in snap.resources.items():
            state, tok = resource_items.state_of(item), token(rid, resource_items.incarnation_of(item))
            if (
                state == resource_items.LIVE
                or (
                    state == resource_items.PENDING
                    and tok in self.truth.admitted
                    and tok not in self.truth.released_pending
                )
                or (state == resource_items.DELETING and not self.truth.released[tok])
            ):
                held.append(rid)
        return held

    def check(self, after: Call | None) -> None:
        snap, truth = self.snapshot, self.truth
        found: list[str] = []
        if snap.counter is not None:
            size = item_size(snap.counter)
            if size >= ITEM_LIMIT:
                found.append(f"counter item is {size} bytes")
            state = snap.state()
            shares = [state.share(r) for r in all_ranges()]
            if state.best_effort != sum(s.best_effort for s in shares):
                found.append(f"{BEST_EFFORT} {state.best_effort} != sum of its range shares")
            if state.eventual != sum(s.eventual for s in shares):
                found.append(f"{EVENTUAL} {state.eventual} != sum of its range shares")
        state = snap.state()
        held = self.slot_holders(snap)
        owed = sum(truth.owed.values())
        if state.best_effort > len(held) + owed:
            found.append(
                f"best_effort {state.best_effort} overcounts the {len(held)} resources holding a slot {held}"
            )
        # Exact only without faults, double releases, or a resource made live without an admission
        # (an adoption: best_effort may undercount it until it is counted and healed)
        exact = truth.faults == 0 and not truth.doubled and self.now == START and not truth.adopted
        if exact and state.best_effort != len(held) + owed:
            found.append(
                f"best_effort {state.best_effort} != {len(held)} resources holding a slot {held} (no fault)"
            )
        counted = [
            rid
            for rid, item in snap.resources.items()
            if resource_items.is_counted(item)
            and (
                resource_items.state_of(item) == resource_items.LIVE
                or not truth.released[token(rid, resource_items.incarnation_of(item))]
            )
        ]
        if state.eventual > len(counted) or (not truth.doubled and state.eventual != len(counted)):
            found.append(
                f"eventual {state.eventual} != {len(counted)} counted unreleased resources {counted}"
            )
        for rid, item in snap.resources.items():
            if resource_items.is_counted(item) and resource_items.state_of(item) == resource_items.PENDING:
                found.append(f"{rid} is counted but pending")
        if (
            after is not None
            and after.key == COUNTER_SK_OF_THE_KIND
            and "last_admission" in _assignments(after)
        ):
            unadmitted = [
                rid
                for rid in held
                if token(rid, resource_items.incarnation_of(snap.resources[rid])) not in truth.admitted
            ]
            limit = state.effective_limit(self.world.settings.default_limit)  # as it stands in the table
            if len(held) > limit + len(unadmitted):
                found.append(f"{len(held)} resources hold a slot after an admission, limit {limit}")
        for problem in found:
            self.violations.append(f"step {self.step_no}: {problem}")

    def _finish(self) -> None:
        """Every operation has ended: drain, let the grace period pass, sweep, heal; then the end.
        Stream records that were lost make the retry path ask for an audit: it runs too."""
        self.background("stream")
        self.now = START + self.world.settings.pending_grace_seconds + 60
        if self.scenario.records_lost:
            self.background("audit")
        if self.snapshot.census_requests or any(
            "pending_shard" in item for item in self.snapshot.resources.values()
        ):
            self.background("sweep")  # the PendingIndex holds something of this account
            self.background("stream")  # the sweep's own counter writes may ask for a heal
        if self.snapshot.state().best_effort < self.snapshot.state().eventual:
            self.background("heal")
        snap, truth = self.snapshot, self.truth
        state = snap.state()
        visible = snap.of(resource_items.LIVE, resource_items.DELETING)
        for rid in snap.of(resource_items.LIVE):
            if not resource_items.is_counted(snap.resources[rid]):
                self.violations.append(f"end: {rid} is live but was never counted")
        for rid in snap.of(resource_items.PENDING):
            if token(rid, resource_items.incarnation_of(snap.resources[rid])) in truth.admitted:
                self.violations.append(f"end: {rid} was admitted but is still pending")
        if state.best_effort > len(visible):
            self.violations.append(f"end: best_effort {state.best_effort} > {len(visible)} visible resources")
        if not truth.doubled and state.eventual != len(snap.of(resource_items.LIVE)) + len(
            [r for r in snap.of(resource_items.DELETING) if resource_items.is_counted(snap.resources[r])]
        ):
            self.violations.append(f"end: eventual {state.eventual} does not count the visible resources")
        if truth.faults == 0 and state.best_effort != state.eventual:
            self.violations.append(
                f"end: best_effort {state.best_effort} != eventual {state.eventual} (no fault)"
            )
        self._check_answers(frozenset(visible))

    def _check_answers(self, final: frozenset[str]) -> None:
        claimed = (rid for rid, kind in self.scenario.stuck if kind == "claimed")
        initial = Model(
            frozenset((*self.scenario.counted, *self.scenario.uncounted, *claimed)), self.scenario.limit
        )
        done = [*self.dead, *(self.done[i] for i in sorted(self.done))]
        if explain(initial, done, final) is None:
            shown = ", ".join(f"{self.ops[i].name}={d.answer}" for i, d in sorted(self.done.items()))
            self.violations.append(
                f"end: no sequential order explains the answers ({shown}) and {sorted(final)}"
            )


def answer_of(op: Operation) -> int | str:
    error = op.error
    if error is None:
        result = op.result
        if isinstance(result, tuple):
            return 201 if result[1] else 200
        return 204 if result is None else 2000
    if isinstance(error, Crash):
        return "crash"
    for kind, status in (
        (LimitExceeded, 409),
        (IdempotencyConflict, "conflict"),  # a PUT of the same id always repeats its body here
        (NotFound, 404),
        (Throttled, 429),
        (InProgress, 503),
        (StoreUnavailable, 503),
    ):
        if isinstance(error, kind):
            return status
    return 500


def share_names() -> list[str]:
    return [name for r in all_ranges() for name in (best_effort_share(r), eventual_share(r))]


def made_live_unadmitted(call: Call) -> bool:
    """The create's make-live that also indexes the resource for the sweeper: what it does when
    it cannot know that its admission applied (create.py)."""
    expression = str(call.body.get("UpdateExpression", ""))
    return call.operation == "UpdateItem" and "pending_shard" in expression and call.applied is not False


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
