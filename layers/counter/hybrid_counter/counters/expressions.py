"""Every write to the counter item, as one UpdateItem expression each.

Each keeps the per-range shares summing to the totals and bumps the version of every range whose
shares it changes (state.py). Condition expressions cannot do arithmetic, which is why the
admission tests both totals directly and why the heal compares two attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hybrid_counter.counters.state import (
    BEST_EFFORT,
    COUNTER_SHARD,
    EVENTUAL,
    HEALS,
    LAST_ADMISSION,
    LAST_RELEASE,
    LIMIT,
    best_effort_share,
    eventual_share,
    range_version,
)
from hybrid_counter.keys import all_ranges, counter_key, counter_shard, range_of


@dataclass
class UpdateExpr:
    sets: list[str] = field(default_factory=list)
    adds: list[str] = field(default_factory=list)
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
        placeholder = self.name(attribute)
        return self.set(attribute, f"if_not_exists({placeholder}, {self.value({'S': text})})")

    def when(self, condition: str) -> UpdateExpr:
        self.conditions.append(f"({condition})")
        return self

    def expression(self) -> str:
        parts = []
        if self.sets:
            parts.append("SET " + ", ".join(self.sets))
        if self.adds:
            parts.append("ADD " + ", ".join(self.adds))
        return " ".join(parts)

    def update(self, table: str, account_id: str) -> dict[str, Any]:
        """The arguments of an UpdateItem (or a transaction's Update action) on the counter item."""
        args: dict[str, Any] = {
            "TableName": table,
            "Key": counter_key(account_id),
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


def admission(
    account_id: str, resource_id: str, admission_token: str, cap: int, limit_seen: int | None
) -> UpdateExpr:
    """best_effort + 1, if and only if both counters are below the limit we judged by."""
    expr = UpdateExpr().add(BEST_EFFORT, 1)
    _range_delta(expr, range_of(resource_id), 1, 0)
    expr.set_string(LAST_ADMISSION, admission_token).set_once(COUNTER_SHARD, counter_shard(account_id))
    be, ev, limit, bound = expr.name(BEST_EFFORT), expr.name(EVENTUAL), expr.name(LIMIT), expr.number(cap)
    expr.when(f"attribute_not_exists({be}) OR {be} < {bound}")
    expr.when(f"attribute_not_exists({ev}) OR {ev} < {bound}")
    # A limit changed since we read it is judged again (CounterStore.admit).
    expr.when(f"attribute_not_exists({limit})" if limit_seen is None else f"{limit} = {bound}")
    return expr


def release(
    resource_id: str, release_token: str, counted: bool, *, best_effort_at_zero: bool = False
) -> UpdateExpr:
    """A delete frees its slot: best_effort - 1, and eventual - 1 if the stream had counted it.

    best_effort only goes down while above 0: at 0 it already undercounts (after a failure), and
    the write made with ``best_effort_at_zero`` leaves it there, which makes the undercount one less.
    """
    be_delta, ev_delta = (0 if best_effort_at_zero else -1), (-1 if counted else 0)
    expr = UpdateExpr().add(BEST_EFFORT, be_delta).add(EVENTUAL, ev_delta)
    _range_delta(expr, range_of(resource_id), be_delta, ev_delta)
    expr.set_string(LAST_RELEASE, release_token)
    if not best_effort_at_zero:
        be = expr.name(BEST_EFFORT)
        expr.when(f"{be} > {expr.number(0)}")
    return expr


def counted(account_id: str, per_range: Mapping[str, int]) -> UpdateExpr:
    """The stream path's share of one transaction: eventual + n (n resources counted in it)."""
    expr = UpdateExpr().add(EVENTUAL, sum(per_range.values()))
    for range_id, n in sorted(per_range.items()):
        _range_delta(expr, range_id, 0, n)
    return expr.set_once(COUNTER_SHARD, counter_shard(account_id))


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


def correction(range_id: str, best_effort: int, eventual: int, version_seen: int) -> UpdateExpr:
    """A recount's fix of one range, applied only if nothing changed the range since its census."""
    expr = UpdateExpr().add(BEST_EFFORT, best_effort).add(EVENTUAL, eventual)
    version = expr.name(range_version(range_id))
    if version_seen:
        expr.when(f"{version} = {expr.number(version_seen)}")
    else:
        expr.when(f"attribute_not_exists({version})")
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
    expr = UpdateExpr()
    return expr.set(LIMIT, expr.number(limit)).set_once(COUNTER_SHARD, counter_shard(account_id))
