"""A census of one range of one kind of an account: its resource items, read and classified.

Ranges (keys.py) are what the counter item keeps shares and versions for, so a census of a range
read between two reads of that range's version, which did not move, is of the same instant as
the shares. Two repairs rely on it: the recount, which corrects a range's shares
(counting/recount.py), and the settlement of a resize whose request died, which reads off the
shares what the counters hold for the resource (resize_settlement.py).

What is *in flight* cannot be judged off the items: a delete (its release may or may not have
applied), a resize (its counter write, likewise), and a create still running (a pending item
younger than the grace period: its admission may or may not have applied). A pending item older
than the grace period belongs to a create that is over and that no caller was told of: it holds
no slot a caller could see, and the recount releases what the counter still holds for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hybrid_counter.keys import account_pk, epoch_of, range_prefix
from hybrid_counter.resources import items

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients

Item = dict[str, Any]


@dataclass
class RangeCensus:
    """One range's resources, counted in items and in units (a resource holds ``units``)."""

    pending: int = 0
    live: int = 0
    deleting: int = 0
    counted_live: int = 0  # units of the live resources the stream path counted: eventual's share
    slot_units: int = 0  # units that can hold a slot (see slot_bound)
    live_items: list[Item] = field(default_factory=list)
    deleting_items: list[Item] = field(default_factory=list)
    uncounted_items: list[Item] = field(default_factory=list)
    resizing_items: list[Item] = field(default_factory=list)
    # Pending and younger than the grace period: a create still running.
    creating_items: list[Item] = field(default_factory=list)
    # Pending longer than the grace period: their creates are over and no caller was told they
    # exist, so they hold no slot a caller could see; --fix releases what the counter still
    # holds for them and then removes them (never the other way round: no overcount between).
    stale_pending_items: list[Item] = field(default_factory=list)
    every: list[tuple[Item, bool]] = field(default_factory=list)  # each item, and whether stale
    # Claims (among deleting_items) that hold nothing at the account, as far as a census goes:
    # released there (a member's ``account_released``), or left to this census by a takeover
    # that could not tell (``left_to_census``: dead_claims.py, which a correction then finishes).
    released_items: list[Item] = field(default_factory=list)
    dead_items: list[Item] = field(default_factory=list)
    claims_in_flight: list[Item] = field(default_factory=list)  # the other deleting_items

    @property
    def slot_bound(self) -> int:
        """The units that can hold a slot: live and claimed resources, and creates still running
        (a resource being resized at the larger of its two sizes)."""
        return self.slot_units

    @property
    def in_flight(self) -> list[Item]:
        """Deletes, resizes and creates running: their counter writes are not readable off the items."""
        return self.claims_in_flight + self.resizing_items + self.creating_items

    def best_effort_excess(self, best_effort: int) -> int:
        """How far a best-effort share read at this census's instant is above what can hold a
        slot (a recount lowers it by that; it never raises it)."""
        return max(0, best_effort - self.slot_bound)

    def eventual_drift(self, eventual: int) -> int:
        """How far an eventual share read at this census's instant is from the counted units."""
        return eventual - self.counted_live

    def without(self, resource_id: str) -> RangeCensus:
        """The same census with one resource left out (the one a settlement is about)."""
        rest = RangeCensus()
        for item, stale in self.every:
            if str(item["resource_id"]["S"]) != resource_id:
                rest.take(item, stale=stale)
        return rest

    def find(self, resource_id: str) -> Item | None:
        return next((i for i, _ in self.every if str(i["resource_id"]["S"]) == resource_id), None)

    def take(self, item: Item, *, stale: bool) -> None:
        """Count one resource item in; ``stale``: a pending one older than the grace period."""
        self.every.append((item, stale))
        state = items.state_of(item)
        if state == items.PENDING:
            self.pending += 1
            if stale:
                self.stale_pending_items.append(item)
                return
            self.creating_items.append(item)
        elif state == items.LIVE:
            self.live += 1
            self.live_items.append(item)
            if items.is_counted(item):
                self.counted_live += items.units_of(item)
            else:
                self.uncounted_items.append(item)
            if items.resizing(item):
                self.resizing_items.append(item)
        elif state == items.DELETING:
            self.deleting += 1
            self.deleting_items.append(item)
            if items.account_released(item):
                self.released_items.append(item)
                return
            if items.left_to_census(item):
                self.dead_items.append(item)
                return
            self.claims_in_flight.append(item)
        self.slot_units += items.slot_units(item)


class CensusTaker:
    """Reads ranges (consistent Queries), judging what is stale by ``clock`` and the grace period."""

    def __init__(
        self, table_name: str, clients: Clients, *, grace_seconds: float, clock: Callable[[], float]
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._grace = grace_seconds
        self._clock = clock

    def stale(self, item: Item, attribute: str, older_than: float | None = None) -> bool:
        """Written longer ago than the grace period (or ``older_than`` seconds), by this clock."""
        since = items.since(item, attribute)
        grace = self._grace if older_than is None else older_than
        return bool(since) and epoch_of(since) < self._clock() - grace

    def census(self, account_id: str, range_id: str, *, kind: str) -> RangeCensus:
        census = RangeCensus()
        paginator = self._clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": range_prefix(range_id, kind=kind)},
            },
            ConsistentRead=True,
        ):
            for raw in page.get("Items", []):
                item = dict(raw)
                pending = items.state_of(item) == items.PENDING
                census.take(item, stale=pending and self.stale(item, "created_at"))
        return census
