"""Every write to a counter item, as one UpdateItem expression each.

Each keeps the per-range shares summing to the totals and bumps the version of every range whose
shares it changes (state.py). Condition expressions cannot do arithmetic, which is why the
admission of n units tests both totals against ``limit - n``, computed here, and why the heal
compares two attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid_counter.counters.state import (
    ALLOWANCE,
    BEST_EFFORT,
    COUNTER_SHARD,
    EVENTUAL,
    HEALS,
    HOLDS_USED,
    LAST_ADMISSION,
    LAST_ADMISSION_UNITS,
    LAST_RELEASE,
    LAST_RESIZE,
    LIMIT,
    NO_ORG,
    ORG,
    ORG_EPOCH,
    ORG_KIND,
    PLAN_MOVE,
    PLAN_OF,
    PLAN_VERSION,
    REBASING,
    PlanMark,
    best_effort_share,
    eventual_share,
    range_version,
)
from hybrid_counter.keys import DEFAULT_KIND, all_ranges, counter_key, counter_shard, org_usage_key, range_of


@dataclass
class UpdateExpr:
    sets: list[str] = field(default_factory=list)
    adds: list[str] = field(default_factory=list)
    removes: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def name(self, attribute: str) -> str:
        placeholder = f"#{attribute}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value
        return placeholder

    def number(self, n: int) -> str:
        return self.value({"N": str(n)})

    def add(self, attribute: str, amount: int) -> UpdateExpr:
        if amount:
            self.adds.append(f"{self.name(attribute)} {self.number(amount)}")
        return self

    def set(self, attribute: str, expression: str) -> UpdateExpr:
        self.sets.append(f"{self.name(attribute)} = {expression}")
        return self

    def set_string(self, attribute: str, text: str) -> UpdateExpr:
        return self.set(attribute, self.value({"S": text}))

    def set_once(self, attribute: str, text: str) -> UpdateExpr:
        return self._set_once(attribute, {"S": text})

    def set_number_once(self, attribute: str, n: int) -> UpdateExpr:
        return self._set_once(attribute, {"N": str(n)})

    def _set_once(self, attribute: str, value: dict[str, str]) -> UpdateExpr:
        placeholder = self.name(attribute)
        return self.set(attribute, f"if_not_exists({placeholder}, {self.value(value)})")

    def remove(self, attribute: str) -> UpdateExpr:
        self.removes.append(self.name(attribute))
        return self

    def when(self, condition: str) -> UpdateExpr:
        self.conditions.append(f"({condition})")
        return self

    def expression(self) -> str:
        parts = []
        if self.sets:
            parts.append("SET " + ", ".join(self.sets))
        if self.adds:
            parts.append("ADD " + ", ".join(self.adds))
        if self.removes:
            parts.append("REMOVE " + ", ".join(self.removes))
        return " ".join(parts)

    def update(self, table: str, account_id: str, kind: str = DEFAULT_KIND) -> dict[str, Any]:
        """The arguments of an UpdateItem (or a transaction's Update action) on a counter item."""
        return self.update_key(table, counter_key(account_id, kind=kind))

    def update_key(self, table: str, key: dict[str, Any]) -> dict[str, Any]:
        """The same on the counter item of ``key`` (an account's or an organization's)."""
        args: dict[str, Any] = {
            "TableName": table,
            "Key": key,
            "UpdateExpression": self.expression(),
            "ExpressionAttributeNames": self.names,
        }
        if self.values:
            args["ExpressionAttributeValues"] = self.values
        if self.conditions:
            args["ConditionExpression"] = " AND ".join(self.conditions)
        return args


def _range_delta(expr: UpdateExpr, range_id: str, best_effort: int, eventual: int) -> UpdateExpr:
    if best_effort or eventual:
        expr.add(best_effort_share(range_id), best_effort)
        expr.add(eventual_share(range_id), eventual)
        expr.add(range_version(range_id), 1)
    return expr


def _limit_judged(expr: UpdateExpr, cap: int, override: bool) -> None:
    """The limit judged by still holds: the override it read, or no override (then the plan's
    limit, which is not on this item, is the one judged by: plans/)."""
    limit = expr.name(LIMIT)
    expr.when(f"{limit} = {expr.number(cap)}" if override else f"attribute_not_exists({limit})")


def _plan_pinned(expr: UpdateExpr, pin: int | None) -> None:
    """(an account's plan) The item still holds the move mark judged by: a plan move marked since
    is judged again (0: no mark; None: nothing pinned)."""
    if pin is None:
        return
    move = expr.name(PLAN_MOVE)
    expr.when(f"attribute_not_exists({move})" if pin == 0 else f"{move} = {expr.number(pin)}")


def _room_for(expr: UpdateExpr, units: int, cap: int) -> None:
    """Both counters leave room for ``units`` more under ``cap``."""
    be, ev, room = expr.name(BEST_EFFORT), expr.name(EVENTUAL), expr.number(cap - units)
    expr.when(f"attribute_not_exists({be}) OR {be} <= {room}")
    expr.when(f"attribute_not_exists({ev}) OR {ev} <= {room}")


@dataclass(frozen=True)
class Membership:
    """The organization an admission on an account's counter item judged the account to belong
    to (None: none): the admission is conditional on it (orgs/membership.py). ``epoch``: which
    creation of it the account joined (its ``epoch_base``; None for an account that joined before
    members recorded it), what the organization's admission is conditional on (org_level.py)."""

    org: str | None
    epoch: int | None = None
    usage_keys: int = 1  # the OrgUsageIndex keys its members spread over (keys.org_usage_keys)


def _member_of(expr: UpdateExpr, membership: Membership | None) -> None:
    if membership is None:
        return  # an organization's own counter item: no membership of its own
    # An item that does not say yet was judged by the account's profile, after the kind was
    # registered there (a membership change since would have written the item: orgs/store.py).
    org = expr.name(ORG)
    expr.when(f"{org} = {expr.value({'S': membership.org or NO_ORG})} OR attribute_not_exists({org})")


def admission(
    account_id: str,
    resource_id: str,
    admission_token: str,
    cap: int,
    limit_seen: int | None,
    *,
    units: int = 1,
    plan_pin: int | None = None,
    plan_mark: PlanMark | None = None,
    membership: Membership | None = None,
    listed: bool = True,
    kind: str = DEFAULT_KIND,
    hold: bool = False,
    org_epoch: int | None = None,
) -> UpdateExpr:
    """best_effort + units, if and only if both counters leave room for them under the limit
    judged by (``limit_seen``: the override read, None: the plan's), and the account still
    belongs to the organization it was judged to (``membership``; an organization's counter
    item: None, and ``org_epoch``, the creation of the organization judged by, which opened it)."""
    expr = UpdateExpr().add(BEST_EFFORT, units)
    _range_delta(expr, range_of(resource_id), units, 0)
    expr.set_string(LAST_ADMISSION, admission_token).set(LAST_ADMISSION_UNITS, expr.number(units))
    if listed:  # an account's counter item, in CounterIndex (heal --all); not an organization's
        expr.set_once(COUNTER_SHARD, counter_shard(account_id))
    if membership is not None:  # an account's: it says from now on whether it is a member
        expr.set_once(ORG, membership.org or NO_ORG)
        if membership.org is not None:
            # (set, not set once: a member of an organization split since it was given its key
            # moves to one of the keys it now spreads over; the same key again writes no index)
            expr.set_string(ORG_KIND, org_usage_key(membership.org, kind, account_id, membership.usage_keys))
            if membership.epoch is not None:
                expr.set_number_once(ORG_EPOCH, membership.epoch)
    if hold:  # from now on a refusal for room on this item looks for expired holds (holds.py)
        expr.set(HOLDS_USED, expr.value({"BOOL": True}))
    _room_for(expr, units, cap)
    # A limit changed since we read it is judged again (CounterStore.admit).
    _limit_judged(expr, cap, override=limit_seen is not None)
    _plan_pinned(expr, plan_pin)
    if plan_mark is not None:  # (judged by a later move than the item's mark: left for others)
        expr.set_string(PLAN_OF, plan_mark.plan_id)
        expr.set(PLAN_MOVE, expr.number(plan_mark.move)).set(PLAN_VERSION, expr.number(plan_mark.version))
    _member_of(expr, membership)
    if not listed:  # an organization's single counter item: not being split, nor split (split.py)
        # and there, opened by the creation of the organization judged by (so not removed by
        # DELETE /orgs, nor opened by one created again under the id since): only a kind's
        # opening writes org_epoch, while that creation lives (org_level.py)
        expr.when(f"{expr.name(ORG_EPOCH)} = {expr.number(org_epoch or 0)}")
        expr.when(f"attribute_not_exists({expr.name(ALLOWANCE)})")
        expr.when(f"attribute_not_exists({expr.name(REBASING)})")
    return expr


def release(
    resource_id: str,
    release_token: str,
    counted: bool,
    *,
    best_effort_at_zero: bool = False,
    units: int = 1,
    best_effort_seen: int | None = None,
    must_exist: bool = False,
) -> UpdateExpr:
    """A delete frees its slot: best_effort - units, and eventual - units if the stream had
    counted it. ``must_exist``: an organization's counter item, which only a kind's opening
    creates (org_level.py): a release never puts one back after DELETE /orgs removed it.

    best_effort only goes down while it holds the units: below, it already undercounts (after a
    failure), and the write made with ``best_effort_seen`` (the value the first write was refused
    on) takes it to 0 instead, which makes the undercount less and never an overcount.
    ``best_effort_at_zero`` is that write for 0 (it leaves best_effort alone)."""
    if best_effort_at_zero:
        best_effort_seen = 0
    taken = units if best_effort_seen is None else min(units, best_effort_seen)
    be_delta, ev_delta = -taken, (-units if counted else 0)
    expr = UpdateExpr().add(BEST_EFFORT, be_delta).add(EVENTUAL, ev_delta)
    _range_delta(expr, range_of(resource_id), be_delta, ev_delta)
    expr.set_string(LAST_RELEASE, release_token)
    _floor_condition(expr, units, best_effort_seen)
    if must_exist:
        expr.when(f"attribute_exists({expr.name('pk')})")
    return expr


def _floor_condition(expr: UpdateExpr, units: int, best_effort_seen: int | None) -> None:
    """best_effort holds the units taken out (first write), or is still the value the first
    write was refused on (the write that takes it to 0: none needed at 0, where it is left)."""
    if best_effort_seen is None:
        expr.when(f"{expr.name(BEST_EFFORT)} >= {expr.number(units)}")
    elif best_effort_seen > 0:
        expr.when(f"{expr.name(BEST_EFFORT)} = {expr.number(best_effort_seen)}")


def resize(
    resource_id: str,
    resize_token: str,
    delta: int,
    counted: bool,
    *,
    cap: int = 0,
    limit_seen: int | None = None,
    plan_pin: int | None = None,
    best_effort_seen: int | None = None,
    single: bool = False,
) -> UpdateExpr:
    """A resize moves both counters by ``delta`` units (eventual only if the stream had counted
    the resource, which it cannot do while the resize is claimed). Growing is admitted like a
    create of ``delta`` units (room under the limit judged by; ``single``: an organization's
    single counter item, so not being split nor split, as its admissions); shrinking is released
    like a delete of ``-delta`` units (best_effort floored at 0, as ``release``)."""
    expr = UpdateExpr()
    if delta > 0:
        expr.add(BEST_EFFORT, delta).add(EVENTUAL, delta if counted else 0)
        _range_delta(expr, range_of(resource_id), delta, delta if counted else 0)
        _room_for(expr, delta, cap)
        _limit_judged(expr, cap, override=limit_seen is not None)
        _plan_pinned(expr, plan_pin)
        if single:
            expr.when(f"attribute_not_exists({expr.name(ALLOWANCE)})")
            expr.when(f"attribute_not_exists({expr.name(REBASING)})")
    else:
        units = -delta
        taken = units if best_effort_seen is None else min(units, best_effort_seen)
        expr.add(BEST_EFFORT, -taken).add(EVENTUAL, -units if counted else 0)
        _range_delta(expr, range_of(resource_id), -taken, -units if counted else 0)
        _floor_condition(expr, units, best_effort_seen)
    return expr.set_string(LAST_RESIZE, resize_token)


def counted(
    account_id: str, per_range: Mapping[str, int], *, listed: bool = True, hold: bool = False
) -> UpdateExpr:
    """The stream path's share of one transaction: eventual + the units counted in it (``hold``:
    a hold among them, perhaps never admitted here: the item is marked as its admission marks it)."""
    expr = UpdateExpr().add(EVENTUAL, sum(per_range.values()))
    for range_id, n in sorted(per_range.items()):
        _range_delta(expr, range_id, 0, n)
    if hold:
        expr.set(HOLDS_USED, expr.value({"BOOL": True}))
    return expr.set_once(COUNTER_SHARD, counter_shard(account_id)) if listed else expr


def heal() -> UpdateExpr:
    """best_effort := eventual when below it, each range's share with it (why it is safe: healing.py)."""
    expr = UpdateExpr()
    be, ev = expr.name(BEST_EFFORT), expr.name(EVENTUAL)
    expr.set(BEST_EFFORT, ev)
    zero = expr.number(0)
    for r in all_ranges():
        expr.set(best_effort_share(r), f"if_not_exists({expr.name(eventual_share(r))}, {zero})")
        expr.add(range_version(r), 1)
    # A heal carries best_effort's own difference from its shares over from eventual's, so the
    # recount's fix of the totals (totals_correction) must not cross one.
    expr.add(HEALS, 1)
    return expr.when(f"{be} < {ev} OR (attribute_not_exists({be}) AND {ev} > {zero})")


def correction(
    range_id: str,
    best_effort: int,
    eventual: int,
    version_seen: int,
    *,
    creation: Sequence[tuple[str, int | None]] = (),
) -> UpdateExpr:
    """A recount's fix of one range, applied only if nothing changed the range since its census.
    ``creation`` (an organization's shard item: orgs/counters.py ``creation_fence``, the
    attributes that say which creation of the organization it is of, each with its value as the
    census read it; None: absent): only on that creation's item, since one created again under
    the id starts its range versions anew (review 59: a stalled census's fix landed on the new
    one's, 2 seats live of 1; review 62: on a split one's, whose shards carry no ``org_epoch``;
    review 63: on a shard frozen by its first split, which carries no ``epoch`` yet)."""
    expr = UpdateExpr().add(BEST_EFFORT, best_effort).add(EVENTUAL, eventual)
    version = expr.name(range_version(range_id))
    if version_seen:
        expr.when(f"{version} = {expr.number(version_seen)}")
    else:
        expr.when(f"attribute_not_exists({version})")
    for attribute, value in creation:
        mark = expr.name(attribute)
        expr.when(f"attribute_not_exists({mark})" if value is None else f"{mark} = {expr.number(value)}")
    return _range_delta(expr, range_id, best_effort, eventual)


def totals_correction(best_effort: int, eventual: int, heals_seen: int) -> UpdateExpr:
    """Make the totals the sums of their shares again (only corruption or a bug can part them:
    every write changes a total and a share together), if neither a heal nor another totals fix
    landed since they were read. ``heals`` fences both: a fix bumps it too, so two recounts that
    computed the same correction apply it once (the second is refused and reads the totals again)."""
    expr = UpdateExpr().add(BEST_EFFORT, best_effort).add(EVENTUAL, eventual)
    heals = expr.name(HEALS)
    expr.when(f"{heals} = {expr.number(heals_seen)}" if heals_seen else f"attribute_not_exists({heals})")
    return expr.add(HEALS, 1)


def set_limit(account_id: str, limit: int) -> UpdateExpr:
    """The account's override for one kind (it wins over the plan's limit)."""
    expr = UpdateExpr()
    return expr.set(LIMIT, expr.number(limit)).set_once(COUNTER_SHARD, counter_shard(account_id))


def remove_limit() -> UpdateExpr:
    """Back to the plan's limit."""
    return UpdateExpr().remove(LIMIT)
