"""Resize a resource (PATCH): set its units to a target, moving its counters by the difference.

1. Read the resource. Absent or pending: 404. Being deleted: wait for the delete (404 if it went,
   go on if it was reverted). Its units already the target: 200, nothing written (a retried PATCH
   is a no-op: resizes are by target, not by delta).
2. Claim the resize: the live incarnation's item names this request (``resize_request``, with
   ``resize_from``/``resize_to``), conditional on the units read and on no other resize in
   flight. While it stands no delete claims the resource and the stream path does not count it,
   so whether it was counted, as read here, stays true until the resize ends.
3. Move the counters by ``delta = target - units``: one single-attempt write on the kind's
   counter item (counters/store.py): growing is admitted like a create of ``delta`` units (409
   LimitExceeded if there is no room: the claim is reverted, nothing changed), shrinking is
   released like a delete of ``-delta``; ``eventual`` moves too if the resource was counted.
   ``last_resize`` names the resize, so the stream path can finish it if this request cannot.
4. Finish: the item takes ``resize_to`` as its units and drops the claim. 200, or, refused by an
   item not at the target (a settlement ended the claim meanwhile), 503.

A resize whose request died (or could not revert its claim) leaves its claim; a PATCH or a DELETE
of the resource, the sweeper, the audit or a recount that finds it older than the grace period
ends it at the size its counters hold, read off ``last_resize`` or a census of its range
(resize_settlement.py), never at a size they were not moved to.

Why the order (call by call, against every other flow): docs/design.md.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.counters import Admission, AdmissionOutcome, CounterState, Judge
from hybrid_counter.errors import (
    HoldExpired,
    InProgress,
    LimitExceeded,
    NotFound,
    StoreUnavailable,
    Throttled,
)
from hybrid_counter.keys import epoch_of, iso_utc, resize_token
from hybrid_counter.resources import items
from hybrid_counter.resources.items import Resource
from hybrid_counter.resources.org_level import OrgLevel, releases_only
from hybrid_counter.resources.resize_settlement import ResizeSettlement
from hybrid_counter.resources.table import Item, ResourceTable, guarded

if TYPE_CHECKING:
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability


class ResizeFlow:
    def __init__(
        self,
        table: ResourceTable,
        counters: CounterStore,
        grace_seconds: float,
        effects: Effects,
        obs: Observability,
        *,
        orgs: OrgLevel | None = None,
    ) -> None:
        self._table = table
        self._counters = counters
        self._grace = grace_seconds
        self._fx = effects
        self._obs = obs
        # The organizations' level: the API path's judges grows there; repairs only release.
        self._orgs = orgs or OrgLevel(
            table, counters, releases_only, effects, obs, grace_seconds=grace_seconds
        )
        self.settlement = ResizeSettlement(table, counters, grace_seconds, effects, obs, orgs=self._orgs)

    def resize(
        self, account_id: str, kind: str, rid: str, target: int, *, judge: Judge | None = None
    ) -> Resource:
        request_id = self._fx.new_id()
        for _ in range(3):
            item = self.current(account_id, kind, rid)
            if items.units_of(item) == target and not items.resizing(item):
                return items.resource_from_item(item)  # already that size: nothing to do
            until, now = items.hold_until_of(item), self._fx.clock()
            if until is not None and (until <= now or "expired" in item) and target > items.units_of(item):
                # A hold past its deadline is being released (holds.py): it holds nothing more.
                # Marked ``expired``: an expiry claimed it (its claim reverted since), whatever
                # this clock says (review 57: grown, 200, after a confirm was told HoldExpired).
                # Its claim's condition says the same, on the other side of H2's (review 45: a
                # grow of an expired hold was made, and answered 200, until the sweeper's run).
                raise HoldExpired(f"the hold on {rid} expired at {iso_utc(until)}")
            claim = partial(
                self._table.claim_resize,
                account_id,
                rid,
                request_id,
                kind=kind,
                incarnation=items.incarnation_of(item),
                units=items.units_of(item),
                target=target,
                not_expired_at=now if until is not None and target > items.units_of(item) else None,
            )
            claimed = guarded(claim, "the resize")
            if claimed.applied and claimed.item is not None:
                return self._move(account_id, kind, rid, request_id, claimed=claimed.item, judge=judge)
            if claimed.item is not None and items.since(claimed.item, "resize_request") == request_id:
                # botocore retried our claim after a lost response
                return self._move(account_id, kind, rid, request_id, claimed=claimed.item, judge=judge)
        raise InProgress("the resource changed while it was being resized; retry the request")

    def current(self, account_id: str, kind: str, rid: str) -> Item:
        """The live item to resize, once no delete or other resize of it is in flight."""
        for _ in range(3):
            item = guarded(lambda: self._table.get(account_id, rid, kind=kind), "the resize")
            state = items.state_of(item)
            if item is None or state == items.PENDING:
                raise NotFound(f"resource {rid} not found")
            if state == items.LIVE and not items.resizing(item):
                return item
            if state == items.LIVE and self._stale(item, "resizing_since"):
                # A resize whose request died: ended at the size its counters hold, or, where
                # only a census can tell, left to the sweeper (503 after three tries).
                guarded(partial(self.settle_stale, account_id, kind, rid, item), "the resize")
                continue
            since = items.since(item, "delete_request" if state == items.DELETING else "resize_request")
            if (
                guarded(
                    partial(self._fx.waiter.until, partial(self._ended, account_id, kind, rid, since)),
                    "the resize",
                )
                is None
            ):
                raise InProgress("another request on this resource is still running; retry shortly")
        raise InProgress("the resource changed while it was being resized; retry the request")

    def _ended(self, account_id: str, kind: str, rid: str, owner: str) -> bool | None:
        """True once the delete or resize named ``owner`` no longer holds the resource."""
        item = self._table.get(account_id, rid, kind=kind)
        if item is None or items.state_of(item) == items.PENDING:
            return True
        held_by = {items.since(item, "delete_request"), items.since(item, "resize_request")}
        return None if owner in held_by else True

    def _move(
        self, account_id: str, kind: str, rid: str, request_id: str, *, claimed: Item, judge: Judge | None
    ) -> Resource:
        units, target = int(claimed["resize_from"]["N"]), int(claimed["resize_to"]["N"])
        org = items.org_of(claimed)
        if org is not None and target > units:
            # A member's grow: admitted by its organization first (org_level.py), undone there
            # if its account refuses it.
            self._in_time(claimed)
            self._at_org(account_id, kind, rid, request_id, claimed=claimed)
        moved = self._move_account(account_id, kind, rid, request_id, claimed=claimed, judge=judge)
        if moved.outcome is AdmissionOutcome.ADMITTED or (
            moved.outcome is AdmissionOutcome.UNKNOWN
            and self._moved_after_all(account_id, kind, rid, request_id, claimed=claimed)
        ):
            if org is not None and target < units:
                # A member's shrink: released at its account first, then its organization.
                self._in_time(claimed)
                self._at_org(account_id, kind, rid, request_id, claimed=claimed)
            return self._finish(account_id, kind, rid, request_id, claimed=claimed, target=target)
        if moved.outcome is AdmissionOutcome.UNKNOWN:
            # The claim stays: a retry after the grace period ends it (settle_stale).
            raise InProgress("the resize could not be confirmed; retry the request")
        undone = org is None or target < units or self._undo_at_org(account_id, kind, rid, claimed=claimed)
        if undone:
            self._revert(account_id, kind, rid, request_id)
        # else the organization's admission stands: the claim stays, and whoever settles it after
        # the grace period releases it there (resize_settlement.py)
        if moved.outcome is AdmissionOutcome.REJECTED:
            self._obs.count("LimitExceeded")
            limit = moved.judged.limit if moved.judged else 0
            raise LimitExceeded(limit, moved.state.used, kind, target - units, holds=moved.state.holds_used)
        if moved.throttled:
            self._obs.count("ResizeThrottled")
            raise Throttled("too many requests for this account; the resize was not done, retry the request")
        raise StoreUnavailable("the data store is unavailable; the resize was not done, retry the request")

    def _move_account(
        self, account_id: str, kind: str, rid: str, request_id: str, *, claimed: Item, judge: Judge | None
    ) -> Admission:
        units, target = int(claimed["resize_from"]["N"]), int(claimed["resize_to"]["N"])
        incarnation, counted = items.incarnation_of(claimed), items.is_counted(claimed)
        resize = resize_token(rid, incarnation, request_id)
        try:
            state = guarded(lambda: self._counters.read(account_id, kind=kind), "the resize")
        except (Throttled, StoreUnavailable) as error:  # nothing moved here: reverted (_move)
            return Admission(
                AdmissionOutcome.NOT_APPLIED, CounterState(), throttled=isinstance(error, Throttled)
            )
        self._in_time(claimed)  # as late as it can be: just before the write
        return self._counters.resize(
            account_id, rid, resize, target - units, counted=counted, seen=state, kind=kind, judge=judge
        )

    def _at_org(self, account_id: str, kind: str, rid: str, request_id: str, *, claimed: Item) -> None:
        """The member resize's move at its organization: returns once it applied (or, outcome
        unknown, is confirmed). A grow refused there is reverted and answered 409 (scope
        organization), one not made 429 or 503; a shrink whose release there is not made leaves
        its claim, which a retry after the grace period settles (its account has moved)."""
        units, target = int(claimed["resize_from"]["N"]), int(claimed["resize_to"]["N"])
        moved = self._orgs.resize(account_id, kind, rid, claimed)
        if moved.outcome is AdmissionOutcome.ADMITTED:
            return
        if moved.outcome is AdmissionOutcome.UNKNOWN:
            if self._orgs.resized_after_all(account_id, kind, rid, claimed):
                return
            raise InProgress("the resize could not be confirmed; retry the request")
        if target < units:
            self._obs.count("OrgShrinkLeftToSettlement")
            raise StoreUnavailable(
                "the data store is unavailable; the resize may not have finished, retry the request"
            )
        self._revert(account_id, kind, rid, request_id)
        if moved.outcome is AdmissionOutcome.REJECTED:
            self._obs.count("LimitExceeded")
            raise self._orgs.refused(str(items.org_of(claimed)), moved, kind, target - units)
        if moved.throttled:
            self._obs.count("ResizeThrottled")
            raise Throttled(
                "too many requests for this organization; the resize was not done, retry the request"
            )
        raise StoreUnavailable("the data store is unavailable; the resize was not done, retry the request")

    def _in_time(self, claimed: Item) -> None:
        """A counter write of this resize is made only within half the grace period of its claim,
        by this process's clock (items.in_time): a claim older than the grace period is ended by
        whoever settles it (resize_settlement.py), at the sizes the counters hold, so a write this
        process made later could be made after that settlement, for a resize that no longer
        stands (a shrink's release twice: the account below its use). Too late, the claim is
        left to the settlement (503), as a request that died there."""
        since = items.since(claimed, "resizing_since")
        if since and not items.in_time(epoch_of(since), self._fx.clock(), self._grace):
            self._obs.count("ResizeLeftToSettlement")
            raise InProgress("the resize took too long to be made; retry the request")

    def _undo_at_org(self, account_id: str, kind: str, rid: str, *, claimed: Item) -> bool:
        """Release what the organization admitted for a grow its account did not make; True once
        released (or, outcome unknown, confirmed); not once the claim is older than half the grace
        period (``_in_time``: the settlement's)."""
        try:
            self._in_time(claimed)
            undone = self._orgs.resize(account_id, kind, rid, claimed, undo=True)
            if undone.outcome is AdmissionOutcome.ADMITTED or (
                undone.outcome is AdmissionOutcome.UNKNOWN
                and self._orgs.resized_after_all(account_id, kind, rid, claimed, undo=True)
            ):
                return True
        except (ClientError, BotoCoreError, InProgress):
            pass
        self._obs.count("OrgUndoLeftToSettlement")
        return False

    def _moved_after_all(
        self, account_id: str, kind: str, rid: str, request_id: str, *, claimed: Item
    ) -> bool:
        """After a counter write whose outcome is unknown: ``last_resize`` answers unless another
        resize of the kind came since; then the stream path, which finishes the resize only if
        the write applied, usually answers within a second (not a member's shrink: its
        organization's release is still to come, so only ``last_resize`` answers)."""
        resize = resize_token(rid, items.incarnation_of(claimed), request_id)

        def finished() -> bool | None:
            item = self._table.get(account_id, rid, kind=kind)
            if item is not None and items.since(item, "resize_request") == request_id:
                return None
            # Ended, but only at the target is it the stream path's finish: a settlement past the
            # grace period may have reverted it (review 51: answered 200 at a size never taken).
            return self._holds_target(item, request_id, claimed=claimed)

        member_shrink = items.org_of(claimed) is not None and int(claimed["resize_to"]["N"]) < int(
            claimed["resize_from"]["N"]
        )
        try:
            if self._counters.read(account_id, kind=kind).last_resize == resize:
                return True
            return not member_shrink and self._fx.waiter.until(finished) is True
        except (ClientError, BotoCoreError):
            return False

    def _finish(
        self, account_id: str, kind: str, rid: str, request_id: str, *, claimed: Item, target: int
    ) -> Resource:
        try:
            written = self._table.finish_resize(account_id, rid, request_id, kind=kind)
        except (ClientError, BotoCoreError) as error:
            # The counters moved; the stream path finishes the item when it sees last_resize.
            raise StoreUnavailable(
                "the data store is unavailable; the resize may not have finished, retry the request"
            ) from error
        if not written.applied and not self._holds_target(written.item, request_id, claimed=claimed):
            # Refused, and the item (as it refused, ALL_OLD) does not hold the target: a settlement
            # past the grace period ended the claim at another size (review 51: answered 200).
            # Refused but at the target: ours resent after a lost response, or the stream path's.
            raise InProgress("the resize was ended at another size while it ran; retry the request")
        self._obs.count("ResourcesResized")
        resource = items.resource_from_item(claimed)
        return Resource(**{**resource.__dict__, "units": target})

    @staticmethod
    def _holds_target(item: Item | None, request_id: str, *, claimed: Item) -> bool:
        """Whether the claimed incarnation, no longer claimed by this request, holds the target."""
        return (
            item is not None
            and items.since(item, "incarnation") == items.incarnation_of(claimed)
            and items.since(item, "resize_request") != request_id
            and items.units_of(item) == int(claimed["resize_to"]["N"])
        )

    def _revert(self, account_id: str, kind: str, rid: str, request_id: str) -> None:
        try:
            self._table.revert_resize(account_id, rid, request_id, kind=kind)
        except (ClientError, BotoCoreError) as error:
            # Left claimed: whoever finds it after the grace period ends it at the size the
            # counters hold, which is the one it had (nothing moved them): resize_settlement.py.
            self._obs.count("RevertFailed")
            self._obs.logger.warning("could not revert a resize's claim", extra={"error": repr(error)})

    def settle_stale(self, account_id: str, kind: str, rid: str, seen: Item, *, must: bool = False) -> bool:
        """End the resize of ``seen`` whose request died (claimed longer ago than the grace
        period), on that claim only. True if this call ended it (resize_settlement.py)."""
        return self.settlement.settle(account_id, kind, rid, seen, must=must)

    def _stale(self, item: Item, attribute: str) -> bool:
        since = items.since(item, attribute)
        return bool(since) and epoch_of(since) < self._fx.clock() - self._grace
