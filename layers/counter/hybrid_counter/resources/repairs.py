"""Repairs: finishing what a request that died left behind, on exactly the item a repair judged.

The audit and the recount find work by reading items; between their read and their write the
client may retry, finish, and create the same id again. So a repair never acts on an id: every
write it makes is conditional on the incarnation (and, for a delete, the claim) it read, and a
refusal means someone else already acted, which is the end of the repair.

- A delete claimed longer ago than the grace period: take that claim over (conditional on its
  incarnation and its delete request), then finish it as the delete would have: release the
  slot unless ``last_release`` shows it was released, and remove the item (delete.py).
- A pending item older than the grace period: its create is over (the grace period exceeds the
  API function's timeout) and no caller was told it exists (a create answers 201 only once its
  item is live). Whether its admission applied cannot be read off the item; a census of its
  range can tell what the counter holds for it (counting/recount.py). The recount first lowers
  the range's best-effort share to the resources that can still hold a slot, then removes the
  item here, conditional on its incarnation and on its still being pending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hybrid_counter.keys import epoch_of, range_of
from hybrid_counter.observability import default_observability
from hybrid_counter.recount_requests import RecountRequests
from hybrid_counter.resources import items
from hybrid_counter.resources.dead_claims import DeadClaims
from hybrid_counter.resources.delete import DeleteFlow
from hybrid_counter.resources.holds import HoldFlow
from hybrid_counter.resources.resize import ResizeFlow
from hybrid_counter.resources.table import Item, ResourceTable

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability


class Repairs:
    def __init__(
        self,
        table: ResourceTable,
        deletes: DeleteFlow,
        grace_seconds: float,
        effects: Effects,
        *,
        resizes: ResizeFlow | None = None,
    ) -> None:
        self._table = table
        self._deletes = deletes
        self._grace = grace_seconds
        self._fx = effects
        self._resizes = resizes or ResizeFlow(table, deletes.counters, grace_seconds, effects, deletes.obs)
        self._requests = RecountRequests(table.name, table.clients, effects.clock)

    @classmethod
    def on(
        cls,
        table_name: str,
        clients: Clients,
        counters: CounterStore,
        grace_seconds: float,
        effects: Effects,
        *,
        obs: Observability | None = None,
    ) -> Repairs:
        """Repairs of one table, for tools that are not given the API path's (its clock decides
        what is stale)."""
        table = ResourceTable(table_name, clients, effects)
        deletes = DeleteFlow(table, counters, grace_seconds, effects, obs or default_observability())
        resizes = ResizeFlow(table, counters, grace_seconds, effects, obs or default_observability())
        deletes.resizes = resizes
        return cls(table, deletes, grace_seconds, effects, resizes=resizes)

    @property
    def dead_claims(self) -> DeadClaims:
        """Claims left to the census of their range (dead_claims.py): the recount finishes them."""
        return self._deletes.dead_claims

    def holds(self) -> HoldFlow:
        """Expiring holds (the sweeper's): released as deletes, by these repairs' delete flow."""
        return HoldFlow(self._table, self._deletes, self._fx, self._deletes.obs)

    def stale(self, item: Item, attribute: str) -> bool:
        """Older than the grace period by this repair's clock (ops tools: the server's, clock.py)."""
        since = items.since(item, attribute)
        return bool(since) and epoch_of(since) < self._fx.clock() - self._grace

    def finish_stale_delete(self, account_id: str, rid: str, seen: Item) -> bool:
        """Finish the delete of ``seen`` if its claim is stale and still the same; True if this
        repair finished it. Raises the domain's retryable errors when the store refuses."""
        if items.state_of(seen) != items.DELETING or not self.stale(seen, "deleting_since"):
            return False
        if items.left_to_census(seen):  # never taken over: its census finishes it
            return self._deletes.finish_left(account_id, items.kind_of(seen), rid, items.incarnation_of(seen))
        claim = self._deletes.take_over(account_id, rid, seen)
        if claim is None:
            return False  # the claim or the incarnation changed since the read: not ours to touch
        self._deletes.finish(account_id, rid, claim)
        return True

    def roll_back_stale_pending(self, account_id: str, rid: str, seen: Item) -> bool:
        """Remove the pending item of a create that is over (its slot, if it held one, already
        released by the census that found it); True if this repair removed it. A create whose
        organization's admission applied (counted there) is released there first: as it holds
        there what the stream path counted (org_level.py), the release is exact."""
        if items.state_of(seen) != items.PENDING or not self.stale(seen, "created_at"):
            return False
        if "undoing" in seen:
            return self.finish_stale_undo(account_id, rid, seen)
        if items.org_of(seen) is not None and (
            items.org_counted(seen) or self._admitted_at_org(account_id, rid, seen)
        ):
            # Marked first (as an undo is), so the stream path notes the release there and a
            # repair that dies after it never releases it twice.
            marked_at = self._fx.clock()
            marked = self._table.mark_undoing(
                account_id, rid, items.incarnation_of(seen), kind=items.kind_of(seen)
            )
            return marked.item is not None and self.finish_stale_undo(
                account_id, rid, marked.item, marked_at=marked_at
            )
        if (org := items.org_of(seen)) is not None:
            # Whether its admission there applied nothing can tell (another admission since, its
            # records late or lost): the census of its organization's range decides, asked for
            # before the item goes so a crash between loses nothing (review 58: before, a seat
            # held there until an operator's org-recount).
            self.ask_census_of_its_org(org, account_id, rid, kind=items.kind_of(seen))
        return self._table.roll_back(
            account_id, rid, items.incarnation_of(seen), kind=items.kind_of(seen)
        ).applied

    def ask_census_of_its_org(self, org: str, account_id: str, rid: str, *, kind: str) -> None:
        """A durable request for the census of the resource's range at its organization (the
        sweeper's, at its next run: recount_requests.py)."""
        self._requests.put_org(
            org,
            range_of(rid),
            "a member's resource its organization may hold",
            kind=kind,
            account_id=account_id,
        )

    def _admitted_at_org(self, account_id: str, rid: str, seen: Item) -> bool:
        """Whether the organization's admission of a create nobody counted there applied, as far
        as its counter item can still tell (its stream records lost). Where another admission
        came since, it cannot tell: the census of its organization's range decides (asked for by
        the roll back)."""
        org = items.org_of(seen)
        assert org is not None
        return self._deletes.orgs.last_admitted(
            org,
            account_id,
            rid,
            items.incarnation_of(seen),
            kind=items.kind_of(seen),
            shard=items.org_shard(seen),
        )

    def finish_stale_undo(
        self, account_id: str, rid: str, seen: Item, *, marked_at: float | None = None
    ) -> bool:
        """Finish undoing a create its account refused whose request could not (org_level.py),
        then remove it. True if this repair removed it. Its release at its organization is made
        here only by the repair that marked it (``marked_at``: the mark is conditional on none,
        so no release of it was tried before), while that mark is fresh. One found marked was
        perhaps released by whoever marked it: the stream path's note (``org_released``) or the
        shard's ``last_release`` says it was; where neither can (the stream late past the grace
        period, another release since), releasing again could release it twice (review 38), so
        only the census of its organization's range decides (the sweeper's,
        counting/org_recount.py): False."""
        if "undoing" not in seen or not self.stale(seen, "created_at"):
            return False
        kind, incarnation = items.kind_of(seen), items.incarnation_of(seen)
        if not seen.get("org_released", {}).get("BOOL"):
            if marked_at is not None and items.in_time(marked_at, self._fx.clock(), self._grace):
                if not self._release_at_org(account_id, rid, seen):
                    return False
            elif not self._released_at_org(account_id, rid, seen):
                return False
        self.ask_census_of_its_account(account_id, rid, kind=kind)
        return self._table.drop_undone(account_id, rid, incarnation, kind=kind).applied

    def ask_census_of_its_account(self, account_id: str, rid: str, *, kind: str) -> None:
        """Before an undone create of a member is removed: whether its account's admission
        applied (its process died after it) nothing can say once its account's count is refused
        (``undoing``) or finds it gone, so the census of its range at its account is asked for
        (the sweeper's, after the grace period), which gives back the unit if it holds one.
        Before (review 44), only a full audit asked for it: the account's unit held for good."""
        self._requests.put(account_id, range_of(rid), "a member's create undone by a repair", kind=kind)

    def _released_at_org(self, account_id: str, rid: str, seen: Item) -> bool:
        org = items.org_of(seen)
        assert org is not None
        return self._deletes.orgs.released_after_all(
            org,
            account_id,
            rid,
            items.incarnation_of(seen),
            kind=items.kind_of(seen),
            shard=items.org_shard(seen),
        )

    def _release_at_org(self, account_id: str, rid: str, seen: Item) -> bool:
        org = items.org_of(seen)
        assert org is not None
        effect = self._deletes.orgs.release_resolved(
            org,
            account_id,
            rid,
            items.incarnation_of(seen),
            kind=items.kind_of(seen),
            units=items.units_of(seen),
            counted=items.org_counted(seen),
            shard=items.org_shard(seen),
        )
        return effect is None

    def settle_stale_resize(self, account_id: str, rid: str, seen: Item) -> bool:
        """End the resize of ``seen`` whose request died, at the size its counters hold; where
        only a census can tell, at the smaller size, after asking for that census
        (resize_settlement.py). True if this repair ended it."""
        return self._resizes.settle_stale(account_id, items.kind_of(seen), rid, seen, must=True)
