"""Ending a resize whose request died, at the size its counters hold.

A resize claims its resource (resize.py, Z2), moves the kind's counters by the difference in one
single-attempt write (Z3, which names it in ``last_resize``), then gives the resource its new
size (Z4). A request that dies, cannot tell whether Z3 applied, or cannot revert its claim after
Z3 was refused leaves the claim behind. Whoever finds it older than the grace period (a later
PATCH or DELETE, the sweeper, the audit, a recount) ends it here, and must end it at the size
the counters hold for it: a larger one would let creates past the limit, a smaller one would
leave the counters holding units nobody holds.

What the counters hold for it is read, never assumed:

1. ``last_resize`` names the claim: Z3 applied, they hold the target.
2. Otherwise a census of the resource's range, taken between two reads of the range's share
   and version that did not move (census.py), bounds it. A counter's share is what it holds for
   every resource of the range, less any undercount (counters only ever undercount, except
   while a census of the range is owed). So eventual's share less what the counted others can
   hold, and best_effort's share less what every other can hold, are each at most what the
   counters hold for this resource: either above the smaller size means they hold the larger
   one (a Z3 that applied). Otherwise it is settled at the smaller size, and the counters then
   hold no more than the others and that size. A grow refused for sure (409) or never sent
   holds the smaller size, so it is never settled grown; a shrink that applied is never put
   back to the larger size.
3. Where the others' share is only bounded (a delete, resize or create of the range that died
   is left in it, or a census of the range is owed, so best_effort's share may count slots of
   items since removed), settling at the smaller size may leave the counters holding more than
   is held: safe (creates are refused, never admitted past the limit) but not exact. So a census
   of the range is asked for first (recount_requests.py); the sweeper takes it and brings the
   counters down. API requests do not settle such a resize themselves: they answer 503 and leave
   it to the sweeper, which takes that census right after.

While anything else in the range is in flight (a delete, a resize, a create still running)
nothing can be read off it: the settlement waits a little (the waiter), then gives up for now.
Every write is conditional on the dead request's claim, so of two settlements (or a settlement
and the stream path finishing a Z3 that applied) one applies and the other is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from hybrid_counter.counters import AdmissionOutcome
from hybrid_counter.keys import range_of, resize_token
from hybrid_counter.recount_requests import RecountRequests
from hybrid_counter.resources import items
from hybrid_counter.resources.census import CensusTaker, RangeCensus
from hybrid_counter.resources.table import Item

if TYPE_CHECKING:
    from hybrid_counter.counters import CounterStore, RangeShare
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability
    from hybrid_counter.resources.org_level import OrgLevel
    from hybrid_counter.resources.table import ResourceTable


@dataclass(frozen=True)
class Held:
    """What the counters hold for a dead resize's resource."""

    units: int
    exact: bool = True  # False: they may hold more (the larger size); a census brings them down
    ended: bool = False  # the claim was ended meanwhile (by another settlement or the stream path)


ENDED = Held(0, ended=True)


@dataclass(frozen=True)
class Bounds:
    """What the other resources of the range can hold at most, on each counter."""

    eventual: int
    best_effort: int
    loose: bool  # some other's holding is only bounded (it died in flight)


def bounds_of(others: RangeCensus, stale: set[str]) -> Bounds | None:
    """The others' most, or None while one of them is in flight and not dead (``stale`` names
    those whose request died: their holding is bounded by the larger of what it can be)."""
    eventual = best_effort = 0
    loose = False
    for item, stale_pending in others.every:
        state, units = items.state_of(item), items.slot_units(item)
        dead = stale_pending or str(item["resource_id"]["S"]) in stale
        in_flight = state in (items.PENDING, items.DELETING) or items.resizing(item)
        if in_flight and not dead:
            return None
        loose = loose or in_flight
        best_effort += units
        if items.is_counted(item):
            eventual += units
    return Bounds(eventual, best_effort, loose)


class ResizeSettlement:
    def __init__(
        self,
        table: ResourceTable,
        counters: CounterStore,
        grace_seconds: float,
        effects: Effects,
        obs: Observability,
        *,
        orgs: OrgLevel,
    ) -> None:
        self._table = table
        self._counters = counters
        self._orgs = orgs
        self._grace = grace_seconds
        self._fx = effects
        self._obs = obs
        self._censuses = CensusTaker(
            table.name, table.clients, grace_seconds=grace_seconds, clock=effects.clock
        )
        self._requests = RecountRequests(table.name, table.clients, effects.clock)

    def stale(self, item: Item) -> bool:
        return items.resizing(item) and self._censuses.stale(item, "resizing_since")

    def settle(self, account_id: str, kind: str, rid: str, seen: Item, *, must: bool) -> bool:
        """End the resize of ``seen`` (claimed longer ago than the grace period) at the size its
        counters hold; True if this call ended it. Where that size is only bounded, a census of
        the range is asked for, and only ``must`` (the repairs) settles it at the smaller size."""
        if not self.stale(seen):
            return False
        held = self._fx.waiter.until(partial(self.held, account_id, kind, rid, seen))
        if held is None or held.ended:
            return False  # busy: whoever retries (the request's caller, the sweeper) settles it
        if not held.exact:
            # Asked for before the claim ends, so a crash in between loses nothing.
            self._requests.put(account_id, range_of(rid), "a resize whose request died", kind=kind)
            if not must:
                return False
        request = items.since(seen, "resize_request")
        grown = held.units == int(seen["resize_to"]["N"])
        if not self._org_follows(account_id, kind, rid, seen, grown=grown):
            return False
        end = self._table.finish_resize if grown else self._table.revert_resize
        if not end(account_id, rid, request, kind=kind).applied:
            return False
        self._obs.count("ResizesSettled" if held.exact else "ResizesSettledSafe")
        return True

    def _org_follows(self, account_id: str, kind: str, rid: str, seen: Item, *, grown: bool) -> bool:
        """A member's resize ends at its account's size at its organization too, before the claim
        ends (org_level.py): a grow that its account does not hold is undone there if it was
        admitted there; a shrink that its account made is released there if it was not. One
        settler at a time (a lease on the claim, taken over only once older than the grace period,
        by when the stream path has marked what the last one's write did): that write is not
        idempotent, so two settlers must not both make it. Where nothing tells whether the
        organization's move applied (``holds_target`` None), no write is made there: the census
        of the range at the organization, asked for first, brings it to what the members hold
        (review 54); until then it holds the larger size, refusing creates it has room for, never
        admitting past its limit. False if the lease or that write could not be had or confirmed
        (the claim stays for the next settlement)."""
        if items.org_of(seen) is None:
            return True
        request = items.since(seen, "resize_request")
        leased_at = self._fx.clock()
        leased = self._table.lease_settlement(
            account_id,
            rid,
            request,
            kind=kind,
            settler=self._fx.new_id(),
            stale_before=self._fx.clock() - self._grace,
        )
        if leased is None:
            return False
        grow = int(leased["resize_to"]["N"]) > int(leased["resize_from"]["N"])
        if not self._org_moves(account_id, kind, rid, leased, grow=grow, grown=grown):
            return True
        if not items.in_time(leased_at, self._fx.clock(), self._grace):
            # Too slow to be sure it is still the one settler: another takes the lease over once
            # it is older than the grace period (this process's reads retried under throttling,
            # a sweeper's run as long as the grace period). Its one write (a single attempt, a
            # few seconds at most) is left to the next settlement (review 35)
            return False
        moved = self._orgs.resize(account_id, kind, rid, leased, undo=grow)
        settled = moved.outcome is AdmissionOutcome.ADMITTED or (
            moved.outcome is AdmissionOutcome.UNKNOWN
            and self._orgs.resized_after_all(account_id, kind, rid, leased, undo=grow)
        )
        if settled:
            self._obs.count("OrgResizeSettled")
        return settled

    def _org_moves(
        self, account_id: str, kind: str, rid: str, leased: Item, *, grow: bool, grown: bool
    ) -> bool:
        """Whether the organization must move for the resize to end at its account's size: a
        grow its account does not hold, confirmed admitted there (undone there); a shrink its
        account made, confirmed not yet released there (released there). A grow its account holds
        is held there too (the organization moves first), a shrink its account did not make was
        not made there (the account moves first). Where nothing can confirm the move there, its
        census is asked for, and nothing moves."""
        if grown if grow else not grown:
            return False
        target_at_org = self._orgs.holds_target(account_id, kind, rid, leased)
        if target_at_org is None:
            org = items.org_of(leased)
            assert org is not None
            self._requests.put_org(
                org,
                range_of(rid),
                "a member's resize whose move there nothing confirms",
                kind=kind,
                account_id=account_id,
            )
            self._obs.count("OrgResizeLeftToCensus")
            return False
        return target_at_org is grow

    def held(self, account_id: str, kind: str, rid: str, seen: Item) -> Held | None:
        """What the counters hold for ``seen``'s resize (module docstring), or None while its range
        is busy."""
        request = items.since(seen, "resize_request")
        target = int(seen["resize_to"]["N"])
        applied = resize_token(rid, items.incarnation_of(seen), request)
        before = self._counters.read(account_id, kind=kind)
        census = self._censuses.census(account_id, range_of(rid), kind=kind)
        after = self._counters.read(account_id, kind=kind)
        if applied in (before.last_resize, after.last_resize):
            return Held(target)
        current = census.find(rid)
        if current is None or items.since(current, "resize_request") != request:
            return ENDED
        share = after.share(range_of(rid))
        if share.version != before.share(range_of(rid)).version:
            return None
        others = census.without(rid)
        dead = {
            str(i["resource_id"]["S"])
            for i in others.deleting_items + others.resizing_items
            if self._censuses.stale(
                i, "deleting_since" if items.state_of(i) == items.DELETING else "resizing_since"
            )
        }
        bounds = bounds_of(others, dead)
        if bounds is None:
            return None
        return self._judged(account_id, kind, rid, current, share=share, bounds=bounds)

    def _judged(
        self, account_id: str, kind: str, rid: str, current: Item, *, share: RangeShare, bounds: Bounds
    ) -> Held:
        sizes = int(current["resize_from"]["N"]), int(current["resize_to"]["N"])
        smaller, larger = min(sizes), max(sizes)
        if items.is_counted(current) and share.eventual - bounds.eventual > smaller:
            return Held(larger)
        owed = self._requests.count(account_id, range_of(rid), kind=kind) > 0
        if not owed and share.best_effort - bounds.best_effort > smaller:
            return Held(larger)
        return Held(smaller, exact=not (owed or bounds.loose))
