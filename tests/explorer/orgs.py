"""Organizations in the explorer (issue 24): two accounts, A and B, members of one organization.

An ``OrgRun`` is a ``Run`` whose operations each act for an account (``who``): creates of n
units (POST, PUT), deletes, resizes (PATCH: a member's resize moves both levels), an account's
override, the organization's override (forced), and
membership changes (``join``, ``leave``: allowed only while the account is empty); and the
organization's own: its split (``org_shards``), its deletion (``org_delete``) and its creation
again under its id (``recreate``: an operator's PUT /orgs/{id} on a plan of ``arg`` units,
forced, through the domain call the API makes; 201 and a new creation while the organization is
gone, 200 and a move to that plan while it is there, 503 while a deletion is unfinished). Background
steps deliver the stream of A, of B or of the organization's partition (``stream-A``,
``stream-B``, ``stream-org``; ``stream`` all three), sweep, heal (both accounts, and the
organization's counters by the stream path's own heal) and recount (both accounts: nothing
recounts an organization). A scenario may fix faults at named calls of an operation (its
organization's admission, its account's release, ...), so that every interleaving is explored
with that fault in place.

After every step each account is checked as a single-account run checks its one account (I1 to
I6: ``Run.check`` pointed at that account's snapshot and truth), and the organization is checked
the same way at its level, summing every counter item of a kind on ``ORG#<org>`` (its sort key
begins with ``COUNTER#<kind>#``: the counter may be split over shard items):

- each of its counter items stays under 1 KB and its range shares sum to its totals;
- its ``best_effort`` never exceeds the units held at the organization's level: member
  resources live, claimed by a delete whose release there has not applied, or pending with an
  admission there that applied and was not released (what the run saw apply: ``OrgTruth``),
  each with its units there: a resource a resize holds, its target once the resize's move there
  applied and was not undone, else its units;
  with no fault, it equals them;
- its ``eventual`` counts each member resource exactly once: the resources it counted
  (``org_counted``) that no release there has released;
- after an admission there, the units held do not exceed the organization's limit as it stands
  in the table (past it only by resources made live without a known admission there).

The organization's level is its current creation's (design.md §10.2: each creation of the id
has its own ``epoch_base``): when its item names a new one, the truth there starts from nothing
and what a creation before admitted holds nothing at it. At every step: while it is gone its
partition holds no counter item; every counter item is the current creation's (its mark
``org_epoch`` names it, a shard's epoch is above its ``epoch_base``); no member resource that only
a creation before admitted is live; and an admission there that applied is of a create whose
last read of its membership (its account's counter item, else its profile, as the table held it
then) named the current creation: a create judged by one deleted since ends admitted at its
account alone, or refused, never held at the new one.

At the end (every stream drained, the clock past the grace period, swept, healed): each account
as today, and the organization's ``best_effort == eventual ==`` the units of its members' live
resources (or claimed and not released there); nothing pending holds a slot there; every live
member resource is counted there. The answers must be linearizable (spec.py, with the
organization's level); a create whose process died between the two levels held the
organization's slot until the sweeper gave it back, which the model takes as a dead create
undone by a repair (spec.py's rule for dead creates).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.capacity import item_size
from hybrid_counter.counters import AdmissionOutcome
from hybrid_counter.counters.split import Shard, ShardSet
from hybrid_counter.counters.state import (
    BEST_EFFORT,
    EPOCH,
    EVENTUAL,
    LIMIT,
    NO_ORG,
    ORG,
    ORG_EPOCH,
    REBASING,
    CounterState,
)
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.effects import Effects
from hybrid_counter.errors import LimitExceeded, MembershipConflict
from hybrid_counter.healing import Healer
from hybrid_counter.keys import (
    ACCOUNT_PREFIX,
    COUNTER_PREFIX,
    DEFAULT_KIND,
    HISTORY_PREFIX,
    ORG_PREFIX,
    ORG_PROFILE_SK,
    PROFILE_SK,
    REBASE_PREFIX,
    REPAIR_PREFIX,
    RESOURCE_PREFIX,
    UNDO_SUFFIX,
    account_pk,
    all_ranges,
    member_token,
    org_pk,
    org_resize_token,
    parse_kind_resource_sk,
    parse_org_resize_token,
    parse_repair_sk,
    range_of,
)
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from hybrid_counter.resources.table import ResourceTable
from tests.explorer.runs import (
    HOLD_SECONDS,
    ITEM_LIMIT,
    KIND_OPS,
    START,
    Choice,
    OpSpec,
    Run,
    Scenario,
    Snapshot,
    Truth,
    World,
    _assignments,
    _corrected_ranges,
    _is_admission,
    answer_of,
    changed_by,
    ends_a_resize,
    made_live_unadmitted,
    of_kind,
    parse_res,
)
from tests.explorer.scheduler import Call, Operation
from tests.explorer.spec import (
    ABSENT,
    CHANGED,
    CREATED,
    DELETED,
    EXISTS,
    LIMIT_OPS,
    MAYBE,
    MEMBERSHIP_OPS,
    NEVER_ENDED,
    NOT_EMPTY,
    ORG_ADMIN_OPS,
    RECREATE,
    REFUSED,
    REPAIR,
    RESIZED,
    UNCHANGED,
    Done,
    Held,
    Key,
    Limits,
    Model,
    explain,
)

WHO = ("A", "B")
PARTS = ("A", "B", "org")  # the stream's partitions of a run: each account's, the organization's
DRAIN_PASSES = 6  # deliveries at most at the end: each pass takes the records the last one made
ORG_BACKGROUNDS = ("stream-A", "stream-B", "stream-org", "sweep", "heal", "recount")
# (operation index, call site (site_of), fault, how many of its calls get it: 0 = every one)
FaultAt = tuple[int, str, str, int]
ORG_LEVEL_OPS = frozenset({"org_limit"}) | ORG_ADMIN_OPS  # the organization's, no account's


@dataclass(frozen=True)
class OrgOp(OpSpec):
    """An operation for account ``who``: post, put, delete, limit (its override), join, leave;
    or the organization's: org_limit (``arg`` the limit, ``of`` the kind), org_shards (``arg``
    the number of shards), org_delete, recreate (``arg`` the default kind's limit on the plan it
    is created again on: PUT /orgs/{id}, forced)."""

    who: str = "A"

    def __str__(self) -> str:
        if self.kind in MEMBERSHIP_OPS:
            text = f"{self.who}'s {self.kind}"
            return text if self.after is None else f"{text} after {chr(65 + self.after)}"
        return OpSpec.__str__(self) if self.kind in ORG_LEVEL_OPS else f"{self.who}'s {OpSpec.__str__(self)}"


def org_op(
    kind: str,
    arg: Any = None,
    *,
    who: str = "A",
    units: int = 1,
    of: str = DEFAULT_KIND,
    after: int | None = None,
) -> OrgOp:
    return OrgOp(kind, arg, units=units, of=of, after=after, who=who)


def parse_member_res(text: str) -> tuple[str, Held]:
    """A resource of a scenario's setup: ``<who>.[kind/]id[:units]``."""
    who, _, rest = text.partition(".")
    return who, parse_res(rest)


@dataclass(frozen=True)
class OrgScenario(Scenario):
    """Two accounts (their overrides per kind) and their organization (its plan's limits, its
    overrides, which of them are members at the start); resources ``<who>.[kind/]id[:units]``."""

    account_limits: tuple[tuple[str, str, int], ...] = ()  # (who, kind, override)
    org_plan: Limits = ()
    org_overrides: Limits = ()
    members: tuple[str, ...] = WHO
    faults: tuple[FaultAt, ...] = ()
    # Creates that died between the two levels long ago (``<who>.[kind/]id[:units]``): admitted
    # by the organization, pending; with ``records_lost``, the stream records of the setup are
    # gone (trimmed), so the stream path never counts them and the audit runs at the end.
    dead: tuple[str, ...] = ()
    # The organization's counter split over this many shard items per kind (design.md §10.6),
    # once the setup's resources exist (so the split lays their claims out).
    shards: int = 1
    # The ci profile's cap on its schedules, where smaller than the profile's (a scenario of six
    # operations is about twice the steps of a pair's).
    ci_schedules: int | None = None

    def make_run(self, world: World, choose: Callable[[Run, list[Choice]], Choice | None]) -> Run:
        return OrgRun(world, self, choose)

    def described(self) -> str:
        limits = ", ".join(f"{who} {kind}<={n}" for who, kind, n in self.account_limits)
        text = f"; accounts {limits}; organization {dict(self.org_plan)} (plan)"
        if self.org_overrides:
            text += f", {dict(self.org_overrides)} (override)"
        text += f", members {list(self.members)}"
        if self.shards > 1:
            text += f", split over {self.shards} shards"
        if self.dead:
            text += f", died between the levels long ago {list(self.dead)}"
            text += ", stream records lost" if self.records_lost else ""
        if self.faults:
            text += ", faults " + ", ".join(
                f"{chr(65 + i)}'s {site}: {fault}" + (f" x{n}" if n else " (every attempt)")
                for i, site, fault, n in self.faults
            )
        return text

    def kinds(self) -> tuple[str, ...]:
        found = {DEFAULT_KIND, *(op.of for op in self.ops if op.kind not in MEMBERSHIP_OPS)}
        found |= {kind for _, kind, _ in self.account_limits}
        found |= {kind for kind, _ in (*self.org_plan, *self.org_overrides)}
        found |= {parse_member_res(r)[1][0] for r in (*self.counted, *self.uncounted, *self.dead)}
        return tuple(sorted(found))


def site_of(call: Call) -> str:
    """Which call of a flow this is, for a scenario's faults: ``org-admit``, ``admit``,
    ``org-release``, ``release`` (a counter item's admission or release, at the organization's
    level or the account's), ``org-resize``, ``resize`` (a member resize's move at either
    level), ``org-unresize`` (the undoing of its grow at the organization), ``mark-undo``, ``drop-undo`` (an undo's writes of the pending item), ``hand-off`` (a delete's hand-off),
    else the DynamoDB operation."""
    expression = str(call.body.get("UpdateExpression", ""))
    at_org = (call.partition or "").startswith(ORG_PREFIX)
    if call.operation == "UpdateItem" and call.key.startswith(COUNTER_PREFIX):
        if "last_resize" in expression:  # a resize's move (or, at the organization, its undoing)
            undo = _assignments(call).get("last_resize", "").endswith(UNDO_SUFFIX)
            return ("org-unresize" if undo else "org-resize") if at_org else "resize"
        for attribute, site in (("last_admission", "admit"), ("last_release", "release")):
            if attribute in expression:
                return f"org-{site}" if at_org else site
    if call.operation == "UpdateItem" and "handoff" in expression:
        return "hand-off"  # a member's delete handing the rest to the stream path (delete.py)
    if call.operation == "UpdateItem" and "undoing" in expression:
        return "mark-undo"
    if call.operation == "DeleteItem" and "undoing" in str(call.body.get("ConditionExpression", "")):
        return "drop-undo"
    return call.operation


def org_kind_of(sk: str) -> str:
    """The kind of an organization's counter item (``COUNTER#<kind>#<shard>``)."""
    return sk[len(COUNTER_PREFIX) :].rpartition("#")[0]


@dataclass
class OrgTruth:
    """What the scheduler saw take effect at the organization's level, by member token (of its
    kind): admissions and releases, counted (an incarnation can be admitted again after an undo)."""

    admitted: Counter[str] = field(default_factory=Counter)
    released: Counter[str] = field(default_factory=Counter)
    # Member resizes' moves there that applied, by org resize token of its kind (keys.py's
    # org_resize_token: a grow's or shrink's, or, with ".undo", the undoing of a grow).
    resized: set[str] = field(default_factory=set)
    faults: int = 0
    # Censuses of its ranges a repair asked for, outstanding, by (kind, range)
    # (recount_requests.py); and what its counters hold for nothing until that census corrects
    # the range, by (kind, range, shard): units a repair ended or removed without moving the
    # organization, as nothing could tell whether its write there had applied (best_effort;
    # eventual where the resource was counted there).
    requested: set[tuple[str, str]] = field(default_factory=set)
    owed: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    owed_counted: Counter[tuple[str, str, int]] = field(default_factory=Counter)

    def observe(self, call: Call) -> None:
        if call.applied and call.key.startswith(REPAIR_PREFIX):
            if call.operation == "UpdateItem":
                self.requested.add(parse_repair_sk(call.key))
            elif call.operation == "DeleteItem":
                self.requested.discard(parse_repair_sk(call.key))
        if not call.applied or call.operation != "UpdateItem" or not call.key.startswith(COUNTER_PREFIX):
            return
        kind = org_kind_of(call.key)
        shard = int(call.key.rpartition("#")[2])
        for range_id in _corrected_ranges(call):
            self.owed.pop((kind, range_id, shard), None)
            self.owed_counted.pop((kind, range_id, shard), None)
        assigned = _assignments(call)
        if "last_admission" in assigned:
            self.admitted[of_kind(kind, assigned["last_admission"])] += 1
        if "last_release" in assigned:
            self.released[of_kind(kind, assigned["last_release"])] += 1
        if "last_resize" in assigned:
            self.resized.add(of_kind(kind, assigned["last_resize"]))

    def holds_target(self, kind: str, resize: str) -> bool:
        """A member resize's move there applied (``resize``: its org resize token) and was not
        undone."""
        return (
            of_kind(kind, resize) in self.resized and of_kind(kind, resize + UNDO_SUFFIX) not in self.resized
        )

    def holds(self, tok: str) -> bool:
        return self.admitted[tok] > self.released[tok]

    @property
    def undercounts(self) -> bool:
        """A release made twice (a takeover's, design.md §4): both counters short until a recount."""
        return any(n > 1 for n in self.released.values())


@dataclass
class OrgView:
    """The organization's counter items, by kind (every shard item of the kind)."""

    counters: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    profile: dict[str, Any] | None = None  # the organization's item (None: there is none)
    keys: list[str] = field(default_factory=list)  # every sort key of its partition

    @property
    def epoch_base(self) -> int | None:
        """Which creation of the id it is (design.md §10.2); None: there is none."""
        return None if self.profile is None else int(self.profile.get("epoch_base", {}).get("N", "0"))

    def items(self, kind: str) -> list[dict[str, Any]]:
        return self.counters.get(kind, [])

    def total(self, kind: str, name: str) -> int:
        return sum(int(item.get(name, {}).get("N", "0")) for item in self.items(kind))

    def picture(self, kind: str) -> ShardSet:
        """The kind's shard items as the split counter reads them (counters/split.py)."""
        return ShardSet(
            {
                int(str(item["sk"]["S"]).rpartition("#")[2]): Shard(
                    int(str(item["sk"]["S"]).rpartition("#")[2]), CounterState.from_item(item)
                )
                for item in self.items(kind)
            }
        )

    def override(self, kind: str) -> int | None:
        """The organization's override as its counter items carry it (the highest, should
        shards ever carry it apart)."""
        found = [int(item[LIMIT]["N"]) for item in self.items(kind) if LIMIT in item]
        return max(found) if found else None


@dataclass(frozen=True)
class OrgModel(Model):
    """spec.py's model, with a member's resize judged at both levels: a grow answers 200 iff the
    difference fits its account's limit and its organization's, else 409 naming a level that is
    full (as a member's create); a shrink answers 200. A member's grow whose process died may
    have held its target (at its organization) until its settlement undid it: a repair may undo
    it (``dead_resized``: the units it had), as it may a dead create."""

    dead_resized: tuple[tuple[Key, int], ...] = ()

    def _resize(self, op: Done, key: Key) -> tuple[int | str, Model]:
        units = self.units_of(key)
        if units is None:
            return ABSENT, self
        more = op.units - units
        if more > 0 and "/" in op.of:
            full = [
                f"{REFUSED}/{scope}"
                for scope, fits in (
                    ("account", self._fits(op.of, more)),
                    ("organization", self.fits_org(op.of, more)),
                )
                if not fits
            ]
            if full:
                return (op.answer if op.answer in full else full[0]), self
        elif more > 0 and not self._fits(op.of, more):
            return REFUSED, self
        rest = tuple(pair for pair in self.dead_resized if pair[0] != key)
        made = replace(self._holding(key, op.units), dead_resized=rest)
        if op.answer == "crash" and more > 0 and "/" in op.of:
            made = replace(made, dead_created=made.dead_created | {key}, dead_resized=(*rest, (key, units)))
        return RESIZED, made

    def _holding(self, key: Key, units: int) -> OrgModel:
        held = self.holding(key, units)
        assert isinstance(held, OrgModel)
        return held

    def _delete(self, op: Done, key: Key) -> tuple[int | str, Model]:
        cleared = replace(self, dead_resized=tuple(pair for pair in self.dead_resized if pair[0] != key))
        return Model._delete(cleared, op, key)

    def without(self, key: Key) -> Model:
        """A repair's undoing: of a dead grow, back to the units it had; else as spec.py's."""
        before = dict(self.dead_resized).get(key)
        if before is None:
            return super().without(key)
        rest = tuple(pair for pair in self.dead_resized if pair[0] != key)
        return replace(self._holding(key, before), dead_created=self.dead_created - {key}, dead_resized=rest)


@dataclass
class OrgState:
    views: dict[str, Snapshot]
    org: OrgView


class OrgRun(Run):
    scenario: OrgScenario

    def __init__(
        self, world: World, scenario: OrgScenario, choose: Callable[[Run, list[Choice]], Choice | None]
    ) -> None:
        super().__init__(world, scenario, choose)
        self.accounts = {"A": self.account, "B": world.fresh_account()}
        self.org = f"org{world.fresh_account()}"
        self.truths = {"A": self.truth, "B": Truth()}
        self.views = {"A": self.snapshot, "B": Snapshot({}, {})}
        self.plan_maxes = {"A": self.plan_limit_max, "B": {}}
        self.org_truth = OrgTruth()
        self.org_view = OrgView()
        self.backlogs: dict[str, list[dict[str, Any]]] = {part: [] for part in PARTS}
        self.delivered = 0  # records the deliveries took since it was last set to 0 (_drain)
        self.undelivered: dict[str, list[str]] = {part: [] for part in PARTS}
        self.busy: set[int] = set()  # membership operations that saw their account hold something
        # Its creations (design.md §10.2): each one's epoch_base, in order (the last: the current
        # one); the truth at its level is the current creation's (org_truth), and the member tokens
        # an earlier creation admitted hold nothing at it.
        self.bases: list[int] = []
        self.old_tokens: set[str] = set()
        # The creation each create was judged by: the membership (organization, org_epoch) its
        # last read of its account's counter item (or, where that does not say, its profile) saw.
        self.judged: dict[str, tuple[str | None, int | None]] = {}
        self.by_counter: set[str] = set()  # creates whose last judgement their counter item gave
        self.org_plans: dict[str, dict[str, int]] = {}  # the organization's plans by id

    # ---- plumbing ----------------------------------------------------------------------------------
    def effects(self, label: str, late: bool = False) -> Effects:
        """Run's, with each id's serial within its first 16 characters: an incarnation is an id's
        first 16 (effects.py), so each attempt of a create has one of its own, as its random ids
        give it in production. (Run's ids put the serial last: every incarnation of a process
        was ``<label>000000000000000``, so a create judged again after its organization's
        admission applied and was undone (its account left) made its resource again under the
        incarnation of that admission, whose count there the stream path then retried without
        end: a count of an incarnation it meets as a resource of no organization, whose
        ``org_counted`` condition fails every time; the batch, and every count after it on the
        organization's partition, failed for good. The first id is Run's, a POST's id.)"""
        serial = iter(range(1_000_000))
        made = super().effects(label, late)
        width = max(1, 16 - len(label))
        return replace(made, new_id=lambda: f"{label}{next(serial):0{width}x}{0:016x}")

    def redact(self, text: str) -> str:
        text = text.replace(self.org, "ORG")
        return text.replace(self.accounts["A"], "ACCT-A").replace(self.accounts["B"], "ACCT-B")

    @contextmanager
    def viewing(self, who: str) -> Iterator[None]:
        """Point the single-account checks (Run's) at one account: its id, snapshot and truth."""
        saved = (self.account, self.snapshot, self.truth, self.plan_limit_max)
        self.account, self.snapshot = self.accounts[who], self.views[who]
        self.truth, self.plan_limit_max = self.truths[who], self.plan_maxes[who]
        try:
            yield
        finally:
            self.account, self.snapshot, self.truth, self.plan_limit_max = saved

    def part_of(self, partition: str | None) -> str | None:
        if partition == org_pk(self.org):
            return "org"
        return next((who for who in WHO if partition == account_pk(self.accounts[who])), None)

    def who_of(self, op_name: str) -> str | None:
        """The account an operation acts for (None: the organization's, or background work)."""
        index = next((i for i, op in enumerate(self.ops) if op.name == op_name), None)
        if index is None:
            return None
        spec = self.scenario.ops[index]
        return getattr(spec, "who", None) if spec.kind not in ORG_LEVEL_OPS else None

    def _mine(self, call: Call) -> bool:
        partition = call.partition
        if partition is None or not partition.startswith((ACCOUNT_PREFIX, ORG_PREFIX)):
            return True
        return self.part_of(partition) is not None

    def state_view(self) -> list[Any]:
        found: list[Any] = []
        for who in WHO:
            with self.viewing(who):
                found.append(super().state_view())
        counters = {kind: self.org_view.items(kind) for kind in self.kinds}
        backlogs = {part: len(records) for part, records in self.backlogs.items()}
        return [found, counters, self.undelivered, backlogs]

    # ---- setting up --------------------------------------------------------------------------------
    def _setup(self) -> None:
        scenario = self.scenario
        setup = self.service("s")
        # The accounts are judged by their overrides (on the default plan otherwise).
        self._put_org_plans(setup)
        setup.put_org(self.org, self.plan_id("o"))
        for who in WHO:
            account = self.accounts[who]
            for of, kind, limit in scenario.account_limits:
                if of == who:
                    setup.set_limit(account, limit, kind=kind, force=True)
            if who in scenario.members:
                setup.add_member(self.org, account)
        for kind, limit in scenario.org_overrides:
            setup.set_org_limit(self.org, kind, limit, force=True)
        for text in scenario.counted:
            self._create_member(setup, text)
        if scenario.counted:
            self._deliver(PARTS)
        if scenario.shards > 1:
            setup.set_org_shards(self.org, scenario.shards)
        for text in scenario.uncounted:  # their admissions stay in the stream, undelivered
            self._create_member(setup, text)
        for text in scenario.dead:
            self._leave_dead(text)
        if scenario.records_lost:  # trimmed: the stream path never sees them
            for pk in (*(account_pk(a) for a in self.accounts.values()), org_pk(self.org)):
                self.world.stream.records_of(pk)

    def recreate_plan(self, op: OpSpec) -> str:
        return self.plan_id(f"r{op.arg}")

    def _put_org_plans(self, setup: ResourceService) -> None:
        """The organization's plan, and those it may be created again on (recreate)."""
        self.org_plans[self.plan_id("o")] = dict(self.scenario.org_plan)
        for op in self.scenario.ops:
            if op.kind == RECREATE:
                self.org_plans[self.recreate_plan(op)] = {DEFAULT_KIND: int(op.arg)}
        for plan_id, limits in self.org_plans.items():
            setup.put_plan(plan_id, limits)

    def _leave_dead(self, text: str) -> None:
        """A create that died between the levels long ago: put pending, admitted by the
        organization (its own calls, on a clock past the grace period), never by its account."""
        who, (kind, rid, units) = parse_member_res(text)
        account = self.accounts[who]
        long_ago = START - self.world.settings.pending_grace_seconds - 60
        table = ResourceTable(
            self.world.settings.table_name, self.world.clients, Effects(clock=lambda: long_ago)
        )
        incarnation = f"{rid}dead{0:012x}"[:16]
        orgs = self.service("d").orgs
        seen = orgs.precheck(self.org, kind, units, rid, epoch=None)  # (as the cache has it)
        item = resource_items.pending_item(
            account,
            rid,
            f"name-{rid}",
            {},
            incarnation,
            now=long_ago,
            kind=kind,
            units=units,
            org=self.org,
            org_shard=seen.shard,
        )
        assert table.put_pending(item).applied
        admitted = orgs.admit(self.org, account, rid, incarnation, kind=kind, units=units, seen=seen)
        assert admitted.outcome is AdmissionOutcome.ADMITTED
        self.org_truth.admitted[of_kind(kind, member_token(account, rid, incarnation))] += 1
        self.dead.append(
            Done("create0", rid, "crash", started=0, ended=NEVER_ENDED, of=f"{who}/{kind}", units=units)
        )

    def _create_member(self, setup: ResourceService, text: str) -> None:
        who, (kind, rid, units) = parse_member_res(text)
        hold = HOLD_SECONDS if text in self.scenario.holds else None  # (a member's hold: "<who>.<id>")
        setup.create(
            self.accounts[who], f"name-{rid}", {}, resource_id=rid, kind=kind, units=units, hold_seconds=hold
        )

    # ---- operations --------------------------------------------------------------------------------
    def _operation(self, index: int, spec: OpSpec) -> Callable[[], Any]:
        assert isinstance(spec, OrgOp)
        service = self.service(chr(97 + index))
        for kind in self.kinds:
            # A warm process: the organization's plan (which no scenario changes) is cached, so
            # its two reads are not scheduling points of every create.
            service.limits.org_plan_limit(self.org, kind)
        account, org, of, units, arg = self.accounts[spec.who], self.org, spec.of, spec.units, spec.arg
        by = changed_by(index)
        # (the expiring processes, whose clock is past the holds' deadline: runs.LATE)
        late = self.service(chr(97 + index), late=True) if spec.kind in ("expire", "reclaim") else service
        flows: dict[str, Callable[[], Any]] = {
            "post": lambda: service.create(account, "posted", {}, kind=of, units=units),
            "confirm": lambda: service.confirm(account, str(arg), kind=of),
            "expire": lambda: sum(self._expire_holds_of(late, who, of) for who in WHO),
            "reclaim": lambda: late.create(account, "posted", {}, kind=of, units=units),
            "put": lambda: service.create(
                account, f"name-{arg}", {}, resource_id=str(arg), kind=of, units=units
            ),
            "delete": lambda: service.delete(account, str(arg), kind=of),
            "patch": lambda: service.resize(account, str(arg), units, kind=of),
            "limit": lambda: service.set_limit(account, int(arg), kind=of, force=True, by=by),
            "org_limit": lambda: service.set_org_limit(org, of, int(arg), force=True, by=by),
            "org_shards": lambda: service.set_org_shards(org, int(arg)),
            "org_delete": lambda: service.delete_org(org),
            RECREATE: lambda: service.put_org(org, self.recreate_plan(spec), force=True),
            "join": lambda: service.add_member(org, account),
            "leave": lambda: service.remove_member(org, account),
        }
        return flows[spec.kind]

    def _expire_holds_of(self, late: ResourceService, who: str, kind: str) -> int:
        """Run's ``_expire_holds`` (the sweeper's expiry of past deadlines), for member ``who``."""
        account = self.accounts[who]
        expired = late.holds.expired(account, kind)
        return sum(late.holds.expire(account, str(item["resource_id"]["S"]), item) for item in expired)

    def apply(self, choice: Choice) -> None:
        kind, what, fault = choice
        if kind == "op" and fault is None:
            choice = (kind, what, self._planned_fault(int(what)))
        super().apply(choice)

    def _planned_fault(self, index: int) -> str | None:
        op = self.ops[index]
        call = op.pending
        if call is None or call.pseudo:
            return None
        site = site_of(call)
        for at, where, fault, times in self.scenario.faults:
            if at != index or where != site:
                continue
            given = sum(1 for c in op.calls if site_of(c) == site and c.outcome == f"fault:{fault}")
            if times == 0 or given < times:
                return fault
        return None

    def _done_of(self, index: int, spec: OpSpec, op: Operation, started: int) -> Done:
        assert isinstance(spec, OrgOp)
        unadmitted = any(made_live_unadmitted(c) for c in op.calls)
        at_org = [c for c in op.calls if _is_admission(c) and (c.partition or "").startswith(ORG_PREFIX)]
        at_account = [c for c in op.calls if _is_admission(c) and c not in at_org]
        membership = spec.kind in MEMBERSHIP_OPS
        return Done(
            spec.kind,
            spec.who if membership else spec.arg,
            org_answer_of(op, spec.kind),
            started=started,
            ended=self.step_no,
            created_id=self._created_id(index, spec, op),
            past_limit_allowed=unadmitted
            and (not at_account or any(c.outcome == "fault:lost" for c in at_account)),
            past_org_limit_allowed=unadmitted
            and (not at_org or any(c.outcome == "fault:lost" for c in at_org)),
            of=spec.of if spec.kind in ORG_LEVEL_OPS or membership else f"{spec.who}/{spec.of}",
            units=spec.units,
            busy=index in self.busy,
        )

    def _past_limit_allowed(self, done: Done) -> bool:
        return done.past_limit_allowed or done.past_org_limit_allowed

    def _check_kind_of(self, spec: OpSpec, op: Operation, call: Call) -> None:
        """An account's operations write its own partition (and the organization's counter items
        of their kind), never the other account's: but an expiry of holds, the sweeper's or a
        create's refused at its organization, which expires every member's (design.md §12)."""
        part = self.part_of(call.partition)
        who = getattr(spec, "who", None)
        if part in WHO and part != who and spec.kind not in ORG_LEVEL_OPS | {"expire", "reclaim"}:
            self.violations.append(f"step {self.step_no}: {op.name} wrote {part}'s {call.key}")
        if part == "org" and call.key.startswith(COUNTER_PREFIX):
            if spec.kind in KIND_OPS and org_kind_of(call.key) != spec.of:
                self.violations.append(f"step {self.step_no}: {op.name} wrote {call.key}, of another kind")
            return
        super()._check_kind_of(spec, op, call)

    # ---- what took effect ----------------------------------------------------------------------------
    def observe(self, call: Call) -> None:
        part = self.part_of(call.partition)
        faulted = bool(call.outcome and call.outcome.startswith("fault:"))
        by = self.who_of(call.op)
        if by is not None and part == by and call.operation == "GetItem":
            self._note_judged(call, by)
        if part == "org" and call.applied and "last_admission" in _assignments(call):
            self.violations.extend(f"step {self.step_no}: org: {p}" for p in self._admitted_by(call))
        for who in WHO:
            if part == who:
                with self.viewing(who):
                    self._note_left_to_org_census(call, who)
                    super().observe(call)
            elif faulted and by == who:
                self.truths[who].faults += 1
        if part == "org":
            self.org_truth.observe(call)
        if faulted:
            self.org_truth.faults += 1

    def _note_left_to_org_census(self, call: Call, who: str) -> None:
        """A member's resize ended, or its pending create removed, below what the organization
        holds for it (the truth: its moves there that applied): only by a repair that asked for
        the census of its range there first (resize_settlement.py, repairs.py), which then holds
        the difference for nothing until that census corrects the range (an owed slot, as an
        account's). ``self.views`` is still the state before the call."""
        ended = ends_a_resize(call) if call.applied else None
        removed = bool(call.applied) and call.operation == "DeleteItem"
        if not (ended or removed) or not call.key.startswith(RESOURCE_PREFIX):
            return
        kind, rid = parse_kind_resource_sk(call.key)
        item = self.views[who].resources.get((kind, rid))
        if item is None or resource_items.org_of(item) != self.org:
            return
        tok = of_kind(kind, member_token(self.accounts[who], rid, resource_items.incarnation_of(item)))
        if ended is not None:
            request, to_target = ended
            if resource_items.since(item, "resize_request") != request:
                return
            before = self.org_units(kind, who, rid, item)
            now = int(item["resize_to" if to_target else "resize_from"]["N"])
        elif (
            resource_items.state_of(item) == resource_items.PENDING
            and "undoing" not in item  # (an undo's: released there, or its census taken first)
            and self.org_truth.holds(tok)
        ):
            before, now = resource_items.units_of(item), 0
        else:
            return
        if now >= before:
            return
        if (kind, range_of(rid)) not in self.org_truth.requested:
            self.violations.append(
                f"step {self.step_no}: org: {who}'s {rid} left at {now} units while its organization "
                f"holds {before} for it, with no census of its range there asked for"
            )
            return
        owed = (kind, range_of(rid), resource_items.org_shard(item))
        self.org_truth.owed[owed] += before - now
        if resource_items.org_counted(item):
            self.org_truth.owed_counted[owed] += before - now

    def _note_judged(self, call: Call, who: str) -> None:
        """A create's read of its membership (resources/org_level.py membership): its account's
        counter item of the kind, where that says (``org``), else its profile; as the table holds
        it now (every write before this read was read back)."""
        index = next((i for i, op in enumerate(self.ops) if op.name == call.op), None)
        if index is None or self.scenario.ops[index].kind not in ("post", "put"):
            return
        view = self.views[who]
        of = self.scenario.ops[index].of
        if call.key == f"{COUNTER_PREFIX}{of}":
            item = view.counters.get(of) or {}
            if ORG in item:
                org = str(item[ORG]["S"])
                epoch = item.get(ORG_EPOCH, {}).get("N")
                self.judged[call.op] = (
                    None if org == NO_ORG else org,
                    None if org == NO_ORG or epoch is None else int(epoch),
                )
                self.by_counter.add(call.op)
            else:
                self.by_counter.discard(call.op)
        elif call.key == PROFILE_SK and call.op not in self.by_counter:
            org_id = view.profile.get("org_id", {}).get("S")
            epoch = view.profile.get(ORG_EPOCH, {}).get("N")
            self.judged[call.op] = (org_id, None if org_id is None or epoch is None else int(epoch))

    def _admitted_by(self, call: Call) -> list[str]:
        """An admission at the organization applied: its create was judged a member of the
        current creation of the organization (its membership read named it), never of one
        deleted since, nor of none."""
        index = next((i for i, op in enumerate(self.ops) if op.name == call.op), None)
        if index is None or self.scenario.ops[index].kind not in ("post", "put"):
            return []
        org, epoch = self.judged.get(call.op, (None, None))
        current = self.bases[-1] if self.bases else None
        if self.org_view.profile is None:
            return [f"{call.op} admitted at the organization while it is gone (deleted)"]
        if org == self.org and epoch == current:
            return []
        creation = self.bases.index(epoch) if epoch in self.bases else None
        return [
            f"{call.op} admitted at creation {len(self.bases) - 1} of the organization (epoch_base "
            f"{current}), judged by its membership {org and 'ORG'}/{epoch} (creation {creation})"
        ]

    def after_write(self, call: Call) -> None:
        part = self.part_of(call.partition)
        written = self.redact(json.dumps(call.body, sort_keys=True))
        for to in PARTS if part is None else (part,):
            self.undelivered[to].append(written)
        before = self.refresh(PARTS if part is None else (part,))  # a single-item write: its partition
        if part in WHO:
            assert part is not None
            with self.viewing(part):
                self._note_released_pending(call)
        self.check(after=call, before=before)

    def refresh(self, parts: tuple[str, ...] = PARTS) -> Any:
        before = OrgState(dict(self.views), self.org_view)
        for who in WHO:
            if who in parts:
                with self.viewing(who):
                    view = self.read()
                self.views[who] = view
        self.snapshot = self.views["A"]
        if "org" in parts:
            self.org_view = self.read_org()
            self._note_creation()
        for index, spec in enumerate(self.scenario.ops):
            running = index < len(self.ops) and not self.ops[index].done and not self._gated(index)
            if spec.kind in MEMBERSHIP_OPS and running and self._holds_anything(getattr(spec, "who", "A")):
                self.busy.add(index)
        return before

    def _note_creation(self) -> None:
        """The organization created again under its id (its item's epoch_base changed): the
        truth at its level starts from nothing; what the creations before admitted holds nothing
        at this one."""
        base = self.org_view.epoch_base
        if base is None or (self.bases and base == self.bases[-1]):
            return
        if self.bases:
            self.old_tokens |= {tok for tok, n in self.org_truth.admitted.items() if n}
            self.org_truth = OrgTruth()
        self.bases.append(base)

    def _holds_anything(self, who: str) -> bool:
        """Items a caller cannot see (a create in flight, an undo left to the sweeper), or any
        counter holding something: what makes a membership change refuse (orgs/store.py)."""
        view = self.views[who]
        pending = any(resource_items.state_of(i) == resource_items.PENDING for i in view.resources.values())
        return pending or any(view.state(kind).used for kind in view.counters)

    def read_org(self) -> OrgView:
        view = OrgView()
        paginator = self.world.clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self.world.settings.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": org_pk(self.org)}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                sk = str(item["sk"]["S"])
                view.keys.append(sk)
                if sk == ORG_PROFILE_SK:
                    view.profile = dict(item)
                for kind in self.kinds:  # every item whose sort key begins with COUNTER#<kind>#
                    if sk.startswith(f"{COUNTER_PREFIX}{kind}#"):
                        view.counters.setdefault(kind, []).append(dict(item))
        return view

    # ---- background work ---------------------------------------------------------------------------
    def _background_work(self, name: str) -> Callable[[], Any]:
        if name.startswith("stream"):
            parts = PARTS if name == "stream" else (name.removeprefix("stream-"),)
            return lambda: self._deliver(parts)
        if name == "heal":
            healer = Healer(self.world.settings.table_name, self.world.clients)
            org_counters = self.service("h").orgs.counters

            def heal() -> None:
                for kind in self.kinds:
                    for who in WHO:
                        healer.heal_account(self.accounts[who], kind=kind)
                    org_counters.heal(self.org, kind=kind)  # the stream path's own heal there

            return heal
        if name.startswith("audit-"):  # an account's items, as the audit's pages would hold them
            with self.viewing(name.removeprefix("audit-")):
                return self._repair(OpSpec("audit"), self.service("u"))
        if name == "recount":
            recounter = self.recounter(self.service("r"))
            return lambda: [
                recounter.recount(self.accounts[who], fix=True, kind=kind)
                for who in WHO
                for kind in self.kinds
            ]
        return super()._background_work(name)

    def _deliver(self, parts: tuple[str, ...] = PARTS) -> None:
        counter = self.counter()
        for part in parts:
            pk = org_pk(self.org) if part == "org" else account_pk(self.accounts[part])
            records = self.backlogs[part] + self.world.stream.records_of(pk)
            self.delivered += len(records)
            self.backlogs[part] = []
            for start in range(0, len(records), 100):
                outcome = process_stream_batch(records[start : start + 100], counter)
                if outcome.failed_sequence_numbers:
                    failed = set(outcome.failed_sequence_numbers)
                    self.backlogs[part].extend(
                        r for r in records[start:] if r["dynamodb"]["SequenceNumber"] in failed
                    )
            self.undelivered[part] = []
        self.writes_since_delivery = []

    def _after_count(self) -> None:
        before = self.refresh()
        for who in WHO:
            with self.viewing(who):
                found = self._counted_while_resizing(before.views[who])
            self.violations.extend(f"step {self.step_no}: {who}: {problem}" for problem in found)

    # ---- checking ----------------------------------------------------------------------------------
    def check(self, after: Call | None, before: Any = None) -> None:
        for who in WHO:
            mark = len(self.violations)
            with self.viewing(who):
                mine = after if after is not None and after.partition == account_pk(self.account) else None
                super().check(mine, before.views[who] if before is not None else None)
            self.violations[mark:] = [v.replace(": ", f": {who}: ", 1) for v in self.violations[mark:]]
        self.violations.extend(f"step {self.step_no}: org: {problem}" for problem in self._check_org(after))

    def member_resources(self, kind: str) -> Iterator[tuple[str, str, dict[str, Any], str]]:
        """(who, resource id, item, member token of its kind) of the organization's resources:
        those of its current creation (none that only a creation before it admitted)."""
        for who, rid, item, tok in self._org_resources(kind):
            if tok not in self.old_tokens or self.org_truth.admitted[tok]:
                yield who, rid, item, tok

    def _org_resources(self, kind: str) -> Iterator[tuple[str, str, dict[str, Any], str]]:
        """Every member resource naming the organization, of whichever creation admitted it."""
        for who in WHO:
            for (of, rid), item in self.views[who].resources.items():
                if of == kind and resource_items.org_of(item) == self.org:
                    incarnation = resource_items.incarnation_of(item)
                    yield who, rid, item, of_kind(kind, member_token(self.accounts[who], rid, incarnation))

    def org_holders(self, kind: str) -> dict[Key, int]:
        """Member resources holding units at the organization's level: live; claimed by a delete
        whose release there has not applied; pending with an admission there not released."""
        held = {}
        truth = self.org_truth
        for who, rid, item, tok in self.member_resources(kind):
            state = resource_items.state_of(item)
            if (
                state == resource_items.LIVE
                or (state == resource_items.DELETING and not truth.released[tok])
                or (state == resource_items.PENDING and truth.holds(tok))
            ):
                held[(who, rid)] = self.org_units(kind, who, rid, item)
        return held

    def org_units(self, kind: str, who: str, rid: str, item: dict[str, Any]) -> int:
        """The units a member resource holds at the organization's level: its own, or, while a
        resize holds it, the target once the resize's move there applied (and was not undone)."""
        request = resource_items.since(item, "resize_request")
        if request:
            incarnation = resource_items.incarnation_of(item)
            moved = org_resize_token(self.accounts[who], rid, incarnation, request)
            if self.org_truth.holds_target(kind, moved):
                return int(item["resize_to"]["N"])
        return resource_items.units_of(item)

    def org_grows(self, call: Call, kind: str) -> bool:
        """A member resize's grow at the organization (admitted like a create of the difference)."""
        token = _assignments(call).get("last_resize")
        if token is None or token.endswith(UNDO_SUFFIX):
            return False
        account, rid, _, request, _ = parse_org_resize_token(token)
        return any(
            self.accounts[who] == account
            and resource_items.since(item, "resize_request") == request
            and int(item["resize_to"]["N"]) > int(item["resize_from"]["N"])
            for who, of_rid, item, _ in self.member_resources(kind)
            if of_rid == rid
        )

    def org_counted(self, kind: str) -> dict[Key, int]:
        """Member resources the stream path counted at the organization that no release there
        has released."""
        return {
            (who, rid): self.org_units(kind, who, rid, item)
            for who, rid, item, tok in self.member_resources(kind)
            if resource_items.org_counted(item) and not self.org_truth.released[tok]
        }

    def org_limit(self, kind: str) -> int:
        """Its override, else the limit of the plan its item names (0 while it is gone)."""
        override = self.org_view.override(kind)
        if override is not None:
            return override
        profile = self.org_view.profile
        if profile is None:
            return 0  # gone: none of its members is left to hold anything
        return self.org_plans.get(str(profile["plan_id"]["S"]), {}).get(kind, 0)

    def _creation_problems(self) -> list[str]:
        """Each creation of the organization is one of its own (design.md §10.2): while it is
        gone its partition holds no counter item; while it is there every counter item in it is
        the current creation's (its mark, ``org_epoch``, names it; a shard's epoch is above its
        epoch_base); and no member resource that only a creation before it admitted is live or
        claimed by a delete (it would be held by none)."""
        found: list[str] = []
        view, base = self.org_view, self.org_view.epoch_base
        items = [item for kind in self.kinds for item in view.items(kind)]
        if base is None:
            if items:
                found.append(f"gone, but its partition holds {sorted(view.keys)}")
            return found
        for item in items:
            sk = item["sk"]["S"]
            marked = item.get(ORG_EPOCH, {}).get("N")
            if marked is not None and int(marked) != base:
                found.append(f"{sk} is marked by creation {marked}, not the current one ({base})")
            epoch = int(item.get(EPOCH, {}).get("N", "0"))
            if "allowance" in item and epoch <= base:
                found.append(f"{sk} has epoch {epoch}, of a creation before the current one ({base})")
        for kind in self.kinds:
            for who, rid, item, tok in self._org_resources(kind):
                state = resource_items.state_of(item)
                old = tok in self.old_tokens and not self.org_truth.admitted[tok]
                if old and state in (resource_items.LIVE, resource_items.DELETING):
                    found.append(
                        f"{who}'s {rid} is {state}, admitted only by a creation before the current one"
                    )
        return found

    def _check_org(self, after: Call | None) -> list[str]:
        found: list[str] = self._creation_problems()
        truth, view = self.org_truth, self.org_view
        adopted = any(t.adopted for t in self.truths.values())
        for kind in self.kinds:
            for item in view.items(kind):
                found.extend(f"{item['sk']['S']}: {problem}" for problem in _item_problems(item))
            found.extend(self._split_problems(kind))
            best_effort, eventual = view.total(kind, BEST_EFFORT), view.total(kind, EVENTUAL)
            held = self.org_holders(kind)
            units = sum(held.values())
            owed = sum(n for (of, _, _), n in truth.owed.items() if of == kind)
            if best_effort > units + owed:
                found.append(
                    f"{kind} best_effort {best_effort} overcounts the {units} units held there {held}"
                    + (f" (and {owed} owed to a census)" if owed else "")
                )
            exact = truth.faults == 0 and self.now == START and not adopted
            if exact and best_effort != units:
                found.append(
                    f"{kind} best_effort {best_effort} != {units} units held there {held} (no fault)"
                )
            counted = self.org_counted(kind)
            total = sum(counted.values())
            owed_counted = sum(n for (of, _, _), n in truth.owed_counted.items() if of == kind)
            if eventual != total + owed_counted:
                found.append(
                    f"{kind} eventual {eventual} != {total} counted unreleased units {counted}"
                    + (f" (and {owed_counted} owed to a census)" if owed_counted else "")
                )
            if (
                after is not None
                and after.applied
                and self.part_of(after.partition) == "org"
                and after.key.startswith(f"{COUNTER_PREFIX}{kind}#")
                and (_is_admission(after) or self.org_grows(after, kind))
            ):
                tokens = {(who, rid): tok for who, rid, _, tok in self.member_resources(kind)}
                unadmitted = sum(n for key, n in held.items() if not truth.admitted[tokens[key]])
                limit = self.org_limit(kind)
                if units > limit + unadmitted:
                    found.append(f"{kind}: {units} units held after an admission, limit {limit} {held}")
        return found

    def _split_problems(self, kind: str) -> list[str]:
        """A split counter (design.md §10.6): the shards' claims (each ``max(used, allowance)``)
        within the basis whenever no rebase holds them frozen, and that basis the organization's
        limit as it stands (its override, else its plan's: the current creation's). (Checked
        where no limit changes: a limit lowered below use, forced, leaves claims = used over the
        basis by design, and a changed limit is laid out by the next create.)"""
        picture = self.org_view.picture(kind)
        basis = picture.basis
        if basis is None or picture.frozen or any(op.kind in LIMIT_OPS for op in self.scenario.ops):
            return []
        found = []
        if picture.claims > basis.limit:
            shown = {n: (s.used, s.allowance) for n, s in sorted(picture.shards.items())}
            found.append(
                f"{kind} claims {picture.claims} > basis {basis.limit} (used, allowance by shard: {shown})"
            )
        if basis.limit != self.org_limit(kind):
            found.append(
                f"{kind} laid out for {basis.limit} ({basis.source}), its limit {self.org_limit(kind)}"
            )
        return found

    # ---- the end -----------------------------------------------------------------------------------
    def _drain(self) -> None:
        """Every stream delivered to a fixed point: the records the stream path's own writes make
        are delivered too, as the stream goes on delivering (an account's count that makes a
        member's item live writes the record that asks for its count at its organization; one
        pass left it undelivered, and the end saw an item never counted there: the long random
        run of seed 1, #913)."""
        for _ in range(DRAIN_PASSES):
            self.delivered = 0
            self.background("stream")
            if not self.delivered and not any(self.backlogs.values()):
                return

    def _finish(self) -> None:
        self._drain()
        if self._hand_off_unfinished():
            # the note its organization's release applied (on the org's partition, delivered
            # last) made it finishable: that write's own record, on its account's partition
            self._drain()
        self._check_visible_within_the_limit()
        self.now += self.world.settings.pending_grace_seconds + 60  # past what a "late" step wrote too
        resizing = [
            who for who in WHO if any(map(resource_items.resizing, self.views[who].resources.values()))
        ]
        if self.scenario.records_lost or resizing:
            # the retry path asks for an audit; and a resize whose request died is settled by one
            # (or a retried request) after the grace period: at its account's size, its
            # organization brought to that size (resize_settlement.py)
            for who in WHO if self.scenario.records_lost else resizing:
                self.background(f"audit-{who}")
            self.background("stream")
        changes = any(op.kind in LIMIT_OPS | ORG_ADMIN_OPS for op in self.scenario.ops)
        for _ in range(2):  # an undo finished by the first sweep may leave a count to the second
            if not (changes or self._left_to_sweeper()):
                break
            changes = False
            self.background("sweep")
            self._drain()
        drifted = any(
            view.state(kind).best_effort < view.state(kind).eventual
            for view in self.views.values()
            for kind in self.kinds
        )
        if drifted or any(
            self.org_view.total(k, BEST_EFFORT) < self.org_view.total(k, EVENTUAL) for k in self.kinds
        ):
            self.background("heal")
        for who in WHO:
            mark = len(self.violations)
            with self.viewing(who):
                for kind in self.kinds:
                    self._check_end(kind)
            self.violations[mark:] = [v.replace("end: ", f"end: {who}: ", 1) for v in self.violations[mark:]]
        for kind in self.kinds:
            self._check_org_end(kind)
        if any(op.kind in LIMIT_OPS for op in self.scenario.ops):
            self._check_history()
        self._check_deletion_end()
        self._check_answers(self._final())

    def _check_visible_within_the_limit(self) -> None:
        """Once the stream has drained, and before anything waits for the grace period, the
        members' visible resources (what a reader sees: items.visible) fit the organization's
        limit: a delete that freed its slot at its account is gone from it within the stream's
        lag, and one stopped before its organization's release leaves the slot held there
        (design.md §4.5 and §10.4), whatever became of its request. Not judged where the run lowers the limit (forced) or a create went past it
        without a known admission (P1's exception)."""
        if any(op.kind in LIMIT_OPS for op in self.scenario.ops) or any(
            d.past_org_limit_allowed for d in self.done.values()
        ):
            return
        for kind in self.kinds:
            visible = sum(
                resource_items.units_of(item)
                for _, _, item, _ in self.member_resources(kind)
                if resource_items.visible(item)
            )
            limit = self.org_limit(kind)
            if visible > limit:
                self.violations.append(
                    f"after the stream drained: org: {kind}: its members show {visible} units, "
                    f"over its limit {limit}"
                )

    def _hand_off_unfinished(self) -> bool:
        return any(
            "org_handoff" in item and resource_items.state_of(item) == resource_items.DELETING
            for view in self.views.values()
            for item in view.resources.values()
        )

    def _left_to_sweeper(self) -> bool:
        return (
            any(
                "pending_shard" in item or resource_items.state_of(item) == resource_items.PENDING
                for view in self.views.values()
                for item in view.resources.values()
            )
            or any(view.census_requests for view in self.views.values())
            # the census of one of its ranges a repair asked for (recount_requests.py)
            or any(key.startswith(REPAIR_PREFIX) for key in self.org_view.keys)
        )

    def _check_org_end(self, kind: str) -> None:
        truth = self.org_truth
        best_effort, eventual = self.org_view.total(kind, BEST_EFFORT), self.org_view.total(kind, EVENTUAL)
        visible = {
            (who, rid): resource_items.units_of(item)
            for who, rid, item, tok in self.member_resources(kind)
            if resource_items.state_of(item) == resource_items.LIVE
            or (resource_items.state_of(item) == resource_items.DELETING and not truth.released[tok])
        }
        units = sum(visible.values())
        if truth.undercounts:  # (a takeover's second release there: fixed by the census, §10.4)
            self.violations.append(f"end: org: {kind}: a release made twice there")
        if not best_effort == eventual == units:
            self.violations.append(
                f"end: org: {kind} best_effort {best_effort}, eventual {eventual}, "
                f"units of its members' live resources {units} {visible}"
            )
        picture = self.org_view.picture(kind)
        if picture.split:
            # each shard counts what was admitted on it (its releases and counts went to it too)
            for number, shard in sorted(picture.shards.items()):
                on_it = sum(
                    resource_items.units_of(item)
                    for who, rid, item, _ in self.member_resources(kind)
                    if (who, rid) in visible and resource_items.org_shard(item) == number
                )
                if (shard.state.best_effort, shard.state.eventual) != (on_it, on_it):
                    self.violations.append(
                        f"end: org: {kind} shard {number}: best_effort {shard.state.best_effort}, "
                        f"eventual {shard.state.eventual}, units of live resources admitted on it {on_it}"
                    )
        for who, rid, item, tok in self.member_resources(kind):
            state = resource_items.state_of(item)
            if state == resource_items.PENDING and truth.holds(tok):
                self.violations.append(
                    f"end: org: {who}'s {rid} is still pending, holding the organization's slot"
                )
            if resource_items.resizing(item):
                self.violations.append(f"end: org: {who}'s {rid} is still claimed by a resize")
            if state == resource_items.LIVE and not resource_items.org_counted(item):
                self.violations.append(f"end: org: {who}'s {rid} is live but was never counted there")

    def _check_deletion_end(self) -> None:
        """DELETE /orgs (design.md §10.2): once one answered 204, nothing is left in the
        organization's partition, whatever a rebase racing it did; while the organization stays
        (refused, or never deleted), it carries no deletion mark and, after the sweeper's run, no
        rebase under way and no frozen shard. (A deletion that died half way is finished by the
        next one: not judged.) Created again (recreate answered 201) after its deletions: it is
        there, as one that stays (its counter items the new creation's: checked at every step)."""
        deletions = [d for d in self.done.values() if d.kind == "org_delete"]
        recreates = [d for d in self.done.values() if d.kind == RECREATE]
        if not deletions or any(d.answer in MAYBE for d in (*deletions, *recreates)):
            return
        left = self.world.clients.dynamodb.query(
            TableName=self.world.settings.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": org_pk(self.org)}},
            ConsistentRead=True,
        )["Items"]
        keys = sorted(str(item["sk"]["S"]) for item in left)
        deleted = sum(d.answer == DELETED for d in deletions)
        created = sum(d.answer == CREATED for d in recreates)
        if deleted and created < deleted:
            if keys:
                self.violations.append(f"end: org: deleted (204), but its partition holds {keys}")
            return
        profile = next((item for item in left if item["sk"]["S"] == ORG_PROFILE_SK), None)
        if profile is None:
            self.violations.append(
                "end: org: no deletion answered 204, but the organization is gone"
                if not deleted
                else "end: org: created again (201) after its deletion, but it is gone"
            )
        elif "deleting" in profile:
            self.violations.append(
                "end: org: a deletion refused, yet the organization is still marked deleting"
            )
        frozen = [item["sk"]["S"] for item in left if REBASING in item]
        if frozen or any(key.startswith(REBASE_PREFIX) for key in keys):
            self.violations.append(f"end: org: a rebase left under way {keys}, frozen {frozen}")

    def _history(self) -> list[dict[str, Any]]:
        found = []
        for pk in (
            *(f"{HISTORY_PREFIX}ACCOUNT#{self.accounts[who]}" for who in WHO),
            f"{HISTORY_PREFIX}ORG#{self.org}",
        ):
            found += self.world.clients.dynamodb.query(
                TableName=self.world.settings.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": pk}},
                ConsistentRead=True,
            )["Items"]
        return found

    def _check_history(self) -> None:
        """Run's check, over both accounts' counter items and the organization's."""
        every = {f"{who}/{kind}": item for who in WHO for kind, item in self.views[who].counters.items()}
        every |= {f"org/{item['sk']['S']}": item for kind in self.kinds for item in self.org_view.items(kind)}
        saved, self.snapshot = self.snapshot, Snapshot(every, {})
        try:
            super()._check_history()
        finally:
            self.snapshot = saved

    def _final(self) -> frozenset[Held]:
        return frozenset(
            (f"{who}/{kind}", rid, resource_items.units_of(self.views[who].resources[(kind, rid)]))
            for who in WHO
            for of in self.kinds
            for kind, rid in self.views[who].of(of, resource_items.LIVE, resource_items.DELETING)
        )

    def _check_answers(self, final: frozenset[Held]) -> None:
        scenario = self.scenario
        live = frozenset(
            (f"{who}/{kind}", rid, units)
            for who, (kind, rid, units) in map(parse_member_res, (*scenario.counted, *scenario.uncounted))
        )
        initial = OrgModel(
            live,
            overrides=tuple(sorted((f"{who}/{kind}", n) for who, kind, n in scenario.account_limits)),
            org_limits=tuple(sorted({**dict(scenario.org_plan), **dict(scenario.org_overrides)}.items())),
            members=frozenset(scenario.members),
            org_overridden=frozenset(kind for kind, _ in scenario.org_overrides),
            held=frozenset(
                (f"{who}/{kind}", rid)
                for text in (*scenario.counted, *scenario.uncounted)
                if text in scenario.holds
                for who, (kind, rid, _) in [parse_member_res(text)]
            ),
        )
        done = [*self.dead, *(self.done[i] for i in sorted(self.done))]
        # A member resize whose process died is settled after the grace period (the audit, at the
        # end): it may take effect then (a shrink its account made is released at the
        # organization only by that settlement), so it may be placed after what began later.
        done = [
            replace(d, ended=NEVER_ENDED) if d.kind == "patch" and d.answer == "crash" else d for d in done
        ]
        # A create whose process died may have held a slot nobody saw, which the sweeper (or the
        # audit) gave back at the end: a repair undoing a dead create (spec.py); so may a member's
        # grow that died after its organization's move, undone there by its settlement.
        last = max((d.ended for d in self.done.values()), default=0)
        died = [d for d in done if d.answer == "crash" and d.kind in ("post", "put", "create0", "patch")]
        done += [Done(REPAIR, None, REPAIR, started=last + 1, ended=last + 1) for _ in died]
        held = frozenset(
            (f"{who}/{kind}", rid)
            for who in WHO
            for (kind, rid), item in self.views[who].resources.items()
            if resource_items.state_of(item) == resource_items.LIVE
            and resource_items.hold_until_of(item) is not None
        )
        if explain(initial, done, final, held) is None:
            shown = ", ".join(f"{self.ops[i].name}={d.answer}" for i, d in sorted(self.done.items()))
            self.violations.append(
                f"end: no sequential order explains the answers ({shown}) and {sorted(final)}"
            )


def _item_problems(item: dict[str, Any]) -> list[str]:
    found = []
    size = item_size(item)
    if size >= ITEM_LIMIT:
        found.append(f"counter item is {size} bytes")
    state = CounterState.from_item(item)
    shares = [state.share(r) for r in all_ranges()]
    if state.best_effort != sum(s.best_effort for s in shares):
        found.append(f"{BEST_EFFORT} {state.best_effort} != sum of its range shares")
    if state.eventual != sum(s.eventual for s in shares):
        found.append(f"{EVENTUAL} {state.eventual} != sum of its range shares")
    return found


def org_answer_of(op: Operation, kind: str) -> int | str:
    """A refusal names its level (409/account, 409/organization); a membership change answers
    changed, unchanged or not-empty."""
    error = op.error
    if isinstance(error, LimitExceeded):
        return f"409/{error.scope}"
    if kind in MEMBERSHIP_OPS:
        if error is None:
            return CHANGED if op.result else UNCHANGED
        if isinstance(error, MembershipConflict) and error.code == "AccountNotEmpty":
            return NOT_EMPTY
    if kind in (RECREATE, "org_delete"):
        return _org_admin_answer(op, kind)
    return answer_of(op, kind)


def _org_admin_answer(op: Operation, kind: str) -> int | str:
    """DELETE /orgs: 204, or not-empty; PUT /orgs/{id} (recreate): 201 created, 200 moved."""
    error = op.error
    if error is None:
        return DELETED if kind == "org_delete" else CREATED if op.result[1] else EXISTS
    if isinstance(error, MembershipConflict) and error.code == "OrganizationNotEmpty":
        return NOT_EMPTY
    return answer_of(op, kind)
