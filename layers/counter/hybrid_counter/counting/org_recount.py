"""Recount an organization's counter items from its members' resource items (design.md §10.5).

An organization's shard items keep, as an account's counter item does, each range's share of
``best_effort`` and ``eventual`` and a version that every write changing them bumps (keys.py: 16
ranges of resource ids). So the recount is the account's (counting/recount.py), one range at a
time, with the census taken across the members: every member's resources of the range and kind
that name this organization, grouped by the shard that admitted them (``org_shard``). The census
is read between two reads of every shard's range version (one Query of the kind's shard items);
if none moved and nothing in it was in flight, census and shares are of one instant, and each
shard's range is corrected on its own, conditional on the version seen.

What a member's resource holds at its organization, read off its item: live, its units
(``org_counted``: counted in ``eventual`` there too; one the stream path never counted there,
created longer ago than the grace period, is counted there by ``fix`` first). In flight, not judged: a pending create
(its admission there may or may not have applied), a delete's claim (its release there, likewise)
and a resize; except a member's claim released at its account whose request is over (stale,
``account_released``, no live hand-off: ``dead_at_org``), which holds nothing there once the
range is corrected, and is then removed: how the sweeper finishes a delete whose organization's
release nothing else can confirm (``settle_range``). ``fix`` finishes the ones stuck past the grace period first, with the repairs of
their accounts (a takeover, a rollback, a settlement: resources/repairs.py), as the account's
recount does; a create left pending whose organization's admission nothing can confirm is
removed then without a release there (D3), and this census is what finds the slot it may hold.

Membership cannot move units: an account joins and leaves only empty (orgs/store.py), and a new
member's first create bumps a version. Costs: per range, 2 Queries of the shard items, one Query
of the member list per 100 members, and one consistent Query per member (in ``workers`` threads):
16 x (members + 2) Queries for a whole kind, reading each member's resource items once. A range
that keeps moving (a busy organization) is reported unsettled; run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, error_code
from hybrid_counter.counters import expressions
from hybrid_counter.counters.corrections import correct_range, fix_totals
from hybrid_counter.counters.split import ShardSet
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.ops import CountOp, ops_for_item
from hybrid_counter.errors import DomainError
from hybrid_counter.keys import all_ranges, org_counter_key
from hybrid_counter.orgs.counters import Fence, creation_fence, creation_of, org_counters
from hybrid_counter.resources import items
from hybrid_counter.resources.census import CensusTaker

if TYPE_CHECKING:
    from hybrid_counter.orgs.store import OrgStore
    from hybrid_counter.resources.repairs import Repairs

Item = dict[str, Any]
MAX_ATTEMPTS = 20


@dataclass(frozen=True)
class Scope:
    """What one recount is of: an organization's counter items of one kind, and its members."""

    org_id: str
    kind: str
    members: tuple[str, ...] = ()
    also: tuple[str, ...] = ()  # accounts taken in the census whatever the member list says

    def key(self, shard: int) -> dict[str, Any]:
        return org_counter_key(self.org_id, kind=self.kind, shard=shard)


@dataclass
class ShardCensus:
    """One shard's part of a range's census: what its members' resources hold there."""

    slot_units: int = 0  # live resources admitted on it: what best_effort may hold at most
    counted_units: int = 0  # of those, counted there: what eventual must hold
    live: int = 0


@dataclass
class OrgRangeResult:
    range_id: str
    settled: bool = False
    attempts: int = 0
    in_flight: int = 0
    corrections: dict[int, tuple[int, int]] = field(default_factory=dict)  # shard -> (be, ev) deltas
    actions: list[str] = field(default_factory=list)  # settle_range's


@dataclass
class OrgRecountReport:
    org_id: str
    kind: str
    members: int = 0
    best_effort: int = 0
    eventual: int = 0
    best_effort_before: int = 0
    eventual_before: int = 0
    live_units: int = 0
    counted_units: int = 0
    ranges: list[OrgRangeResult] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "org_id": self.org_id,
            "kind": self.kind,
            "members": self.members,
            "best_effort_before": self.best_effort_before,
            "eventual_before": self.eventual_before,
            "best_effort": self.best_effort,
            "eventual": self.eventual,
            "live_units": self.live_units,
            "counted_live_units": self.counted_units,
            "ranges_unsettled": [r.range_id for r in self.ranges if not r.settled],
            "census_attempts": sum(r.attempts for r in self.ranges),
            "actions": self.actions,
        }


class OrgRecounter:
    def __init__(
        self,
        table_name: str,
        clients: Clients,
        orgs: OrgStore,
        repairs: Repairs,
        counter: EventualCounter,
        *,
        grace_seconds: float = 300,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = MAX_ATTEMPTS,
        workers: int = 8,
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._orgs = orgs
        self._repairs = repairs
        self._counter = counter
        self._censuses = CensusTaker(table_name, clients, grace_seconds=grace_seconds, clock=clock)
        self._sleep = sleep
        self._attempts = attempts
        self._workers = workers

    def kinds_of(self, org_id: str) -> list[str]:
        return sorted(org_counters(self._clients, self._table, org_id))

    def recount(self, org_id: str, *, kind: str, fix: bool) -> OrgRecountReport:
        report = OrgRecountReport(org_id, kind)
        first = self._shards(org_id, kind)
        report.best_effort_before = sum(s.state.best_effort for s in first.shards.values())
        report.eventual_before = sum(s.state.eventual for s in first.shards.values())
        if fix:
            self._fix_totals(org_id, kind, first, report.actions)
        scope = Scope(org_id, kind, tuple(self._members(org_id)))
        report.members = len(scope.members)
        for range_id in all_ranges():
            report.ranges.append(self._recount_range(scope, range_id, fix=fix, report=report))
        if fix:
            self._heal(org_id, kind, report.actions)
        last = self._shards(org_id, kind)
        report.best_effort = sum(s.state.best_effort for s in last.shards.values())
        report.eventual = sum(s.state.eventual for s in last.shards.values())
        return report

    def _recount_range(
        self, scope: Scope, range_id: str, *, fix: bool, report: OrgRecountReport
    ) -> OrgRangeResult:
        result = OrgRangeResult(range_id)
        for attempt in range(1, self._attempts + 1):
            result.attempts = attempt
            before = self._versions(scope, range_id)
            # Its members read after the versions, each attempt: one that joined since the last
            # read bumps a version with its first create after that read, never before it (read
            # once per recount, a newcomer's seat was missed and taken back: review 37)
            scope = replace(scope, members=tuple(sorted({*self._members(scope.org_id), *scope.also})))
            found = self._census(scope, range_id)
            by_shard, in_flight, uncounted, dead = _by_shard(found, self.dead_at_org)
            result.in_flight = len(in_flight)
            if fix and (self._finish(in_flight, report.actions) or self._count(uncounted, report.actions)):
                continue  # a repair changed the range: take its census again
            after = self._shards(scope.org_id, scope.kind)
            if in_flight or _fences(after, range_id) != before:
                self._sleep(min(0.02 * attempt, 0.2))
                continue
            result.settled = True
            report.live_units += sum(c.slot_units for c in by_shard.values())
            report.counted_units += sum(c.counted_units for c in by_shard.values())
            for number, shard in sorted(after.shards.items()):
                share, census = shard.state.share(range_id), by_shard.get(number, ShardCensus())
                excess = max(0, share.best_effort - census.slot_units)
                drift = share.eventual - census.counted_units
                if not (excess or drift):
                    continue
                result.corrections[number] = (-excess, -drift)
                if not fix:
                    report.actions.append(
                        f"range {range_id}, shard {number}: best_effort {-excess:+d}, eventual {-drift:+d} (dry run)"
                    )
                elif self._correct(
                    scope.key(number), range_id, (-excess, -drift), share.version, creation_fence(shard.state)
                ):
                    report.actions.append(
                        f"range {range_id}, shard {number}: best_effort {-excess:+d}, eventual {-drift:+d}"
                    )
                else:
                    result.settled = False  # a write landed since: the next attempt sees it
            if result.settled:
                if fix:
                    self._remove_dead(dead, report.actions)
                return result
        return result

    def settle_range(
        self,
        org_id: str,
        kind: str,
        range_id: str,
        *,
        accounts: tuple[str, ...] = (),
    ) -> OrgRangeResult:
        """One range recounted and fixed: how the sweeper finishes a member's delete whose request
        died after its account's release, or an undone create, when nothing else can tell whether
        its organization's release applied (resources/delete.py, resources/repairs.py), and takes
        a census a repair asked for (recount_requests.py): the census of the range decides,
        exactly. ``accounts``: the items' accounts, in the census even if no longer listed (they
        left, or the organization was deleted since)."""
        report = OrgRecountReport(org_id, kind)
        also = tuple(sorted(set(accounts)))
        scope = Scope(org_id, kind, tuple(sorted({*self._members(org_id), *also})), also)
        result = self._recount_range(scope, range_id, fix=True, report=report)
        result.actions = report.actions
        return result

    def dead_at_org(self, item: Item) -> bool:
        """A member's claim released at its account (``account_released``), claimed longer ago
        than the grace period, with no hand-off for the stream path to make (none, or one a
        takeover made void): its request is over, so whatever its organization's counter holds
        for it is held for nothing. (A hand-off is the stream path's: in flight until made.) The
        same for a create its account refused, marked ``undoing`` longer ago than the grace
        period (``pending_since``, set by the mark): whoever marked it is over, and its release
        there, made or not, is the census's to settle (resources/repairs.py)."""
        if items.state_of(item) == items.PENDING and "undoing" in item:
            return self._censuses.stale(item, "pending_since")
        return (
            items.state_of(item) == items.DELETING
            and items.account_released(item)
            and item.get("org_handoff") != item.get("delete_request")
            and self._censuses.stale(item, "deleting_since")
        )

    def _remove_dead(self, dead: list[Item], actions: list[str]) -> None:
        """After the range was corrected (its counter no longer holds them): the claims removed,
        each only as it was read (a takeover since, or the stream path's removal, wins)."""
        for item in dead:
            undone = items.state_of(item) == items.PENDING
            condition, values = (
                (
                    "incarnation = :inc AND #state = :pending AND undoing = :true",
                    {":pending": {"S": items.PENDING}},
                )
                if undone
                else (
                    "incarnation = :inc AND #state = :deleting AND delete_request = :req AND account_released = :true",
                    {":deleting": {"S": items.DELETING}, ":req": item["delete_request"]},
                )
            )
            if undone:
                self._repairs.ask_census_of_its_account(
                    item["account_id"]["S"], item["resource_id"]["S"], kind=items.kind_of(item)
                )
            try:
                self._clients.dynamodb.delete_item(
                    TableName=self._table,
                    Key={"pk": item["pk"], "sk": item["sk"]},
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={
                        ":inc": item["incarnation"],
                        ":true": {"BOOL": True},
                        **values,
                    },
                )
            except ClientError as error:
                if error_code(error) != CONDITION_FAILED:
                    raise
                continue
            what = "finished the undone create of" if undone else "finished the delete of"
            actions.append(f"{what} {item['account_id']['S']}/{item['resource_id']['S']}")

    # ---- reads ------------------------------------------------------------------------------------
    def _shards(self, org_id: str, kind: str) -> ShardSet:
        return org_counters(self._clients, self._table, org_id).get(kind) or ShardSet({})

    def _versions(self, scope: Scope, range_id: str) -> dict[int, tuple[int, int | None]]:
        return _fences(self._shards(scope.org_id, scope.kind), range_id)

    def _members(self, org_id: str) -> list[str]:
        """Its members, and the accounts that left it within a day: a create of one judged a
        member before it left may still hold units there until its undo (review 37: taken back by
        a census that did not see it, then released again by that undo). Their census counts only
        items that name this organization."""
        found: list[str] = []
        start: str | None = None
        while True:
            page, start = self._orgs.members(org_id, start=start)
            found += page
            if start is None:
                return sorted({*found, *self._orgs.former_members(org_id)})

    def _census(self, scope: Scope, range_id: str) -> list[Item]:
        """Every member's resources of the range and kind that name this organization."""

        def of(account_id: str) -> list[Item]:
            census = self._censuses.census(account_id, range_id, kind=scope.kind)
            return [item for item, _ in census.every if items.org_of(item) == scope.org_id]

        with ThreadPoolExecutor(max_workers=max(1, min(self._workers, len(scope.members)))) as pool:
            return [item for found in pool.map(of, scope.members) for item in found]

    # ---- writes -----------------------------------------------------------------------------------
    def _count(self, uncounted: list[Item], actions: list[str]) -> bool:
        """Count at the organization the live resources created longer ago than the grace period
        that the stream path never counted there (their records lost: what it would have done,
        once, conditional on ``org_counted``). True when it counted any."""
        ops = [
            op
            for item in uncounted
            if self._censuses.stale(item, "created_at")
            for op in ops_for_item(item)
            if isinstance(op, CountOp) and op.org is not None
        ]
        if not ops:
            return False
        applied = self._counter.apply(ops)
        if applied.counted:
            actions.append(f"counted {applied.counted} resource(s) there that the stream path had not")
        return applied.counted > 0

    def _finish(self, in_flight: list[Item], actions: list[str]) -> bool:
        """The account-level repairs of what is stuck past the grace period (each acts only on the
        incarnation read, and only if it is stale). True when one changed something."""
        changed = False
        for item in in_flight:
            account_id, resource_id = str(item["account_id"]["S"]), str(item["resource_id"]["S"])
            state = items.state_of(item)
            try:
                if state == items.DELETING:
                    done = self._repairs.finish_stale_delete(account_id, resource_id, item)
                    what = "finished the delete of"
                elif state == items.PENDING:
                    done = self._repairs.roll_back_stale_pending(account_id, resource_id, item)
                    what = "rolled back the create left pending of"
                else:
                    done = self._repairs.settle_stale_resize(account_id, resource_id, item)
                    what = "ended the resize of"
            except (DomainError, ClientError, BotoCoreError) as error:
                actions.append(f"could not repair {account_id}/{resource_id}: {error!r}")
                continue
            if done:
                actions.append(f"{what} {account_id}/{resource_id}")
                changed = True
        return changed

    def _correct(
        self,
        key: dict[str, Any],
        range_id: str,
        deltas: tuple[int, int],
        version: int,
        creation: Fence,
    ) -> bool:
        """One shard's range corrected by (best_effort, eventual), if its version is still the one
        seen, on the creation of the organization the census read (reviews 59, 62)."""
        return correct_range(
            self._clients, self._table, key, range_id, deltas, version=version, creation=creation
        )

    def _heal(self, org_id: str, kind: str, actions: list[str]) -> None:
        """best_effort raised to eventual on a shard left below it (healing.py: always safe)."""
        for number, shard in sorted(self._shards(org_id, kind).shards.items()):
            if shard.state.best_effort >= shard.state.eventual:
                continue
            args = expressions.heal().update_key(
                self._table, org_counter_key(org_id, kind=kind, shard=number)
            )
            try:
                self._clients.dynamodb.update_item(**args)
            except ClientError as error:
                if error_code(error) != CONDITION_FAILED:
                    raise
                continue
            actions.append(f"shard {number}: best_effort {shard.state.best_effort} -> eventual (healed)")

    def _fix_totals(self, org_id: str, kind: str, shards: ShardSet, actions: list[str]) -> None:
        """Each shard's totals back to the sums of its shares (a heal raises a total alone)."""
        for number, shard in sorted(shards.shards.items()):
            fixed = fix_totals(
                self._clients,
                self._table,
                org_counter_key(org_id, kind=kind, shard=number),
                lambda n=number: self._shards(org_id, kind).shards[n].state,  # type: ignore[misc]
                attempts=self._attempts,
                first=shard.state,
            )
            if fixed is not None and fixed != (0, 0):
                actions.append(
                    f"shard {number}: totals back to the sums of their shares: "
                    f"best_effort {fixed[0]:+d}, eventual {fixed[1]:+d}"
                )


def _fences(shards: ShardSet, range_id: str) -> dict[int, tuple[int, int | None]]:
    """Each shard's range version, with the creation of the organization its item is of (a
    creation again under the id starts its versions anew: review 59)."""
    return {n: (s.state.share(range_id).version, creation_of(s.state)) for n, s in shards.shards.items()}


def _by_shard(
    found: list[Item], dead_at_org: Callable[[Item], bool]
) -> tuple[dict[int, ShardCensus], list[Item], list[Item], list[Item]]:
    """Per shard, what its members' live resources hold there; what is in flight; the live
    resources the stream path has not counted there; and the deletes whose request died after
    their account's release (``dead_at_org``), which hold nothing there once corrected."""
    by_shard: dict[int, ShardCensus] = {}
    in_flight: list[Item] = []
    uncounted: list[Item] = []
    dead: list[Item] = []
    for item in found:
        if dead_at_org(item):
            dead.append(item)
            continue
        if items.state_of(item) != items.LIVE or items.resizing(item):
            in_flight.append(item)
            continue
        census = by_shard.setdefault(items.org_shard(item), ShardCensus())
        units = items.units_of(item)
        census.live += 1
        census.slot_units += units
        if items.org_counted(item):
            census.counted_units += units
        else:
            uncounted.append(item)
    return by_shard, in_flight, uncounted, dead
