"""Delete a resource: claim it, release its slot, remove it.

1. Claim: ``live -> deleting`` owned by this request (still visible, still holding its slot).
   Only one request can claim an incarnation, so only one releases it. A resource that is not
   live is 404 (pending: its create has not finished; gone: already deleted); one claimed by a
   delete still in flight is waited for; a claim older than the grace period (its delete died
   or was cut off) is taken over.
2. Release (counters/store.py): ``best_effort - 1`` and, if the stream path had counted it,
   ``eventual - 1``. From here on its slot is free. Throttled on every attempt: the claim is
   reverted and the caller gets 429. Outcome unknown: read back, or wait for the stream path,
   which removes the item only if the release applied; still unknown: 503, and a retry (or the
   grace period) finishes it.
3. Remove the item. If that fails, the stream path removes it when it sees the release.

A member's delete releases at its account first, then at its organization (org_level.py): a
delete stopped between the two leaves its organization holding a slot nobody sees (refusing
creates it could admit until the sweeper finishes it), never one given away while the resource
is still visible. If the organization's release is refused without effect, the request hands it
to the stream path (``org_handoff`` on its claim), which makes it and removes the item in one
transaction; if its outcome stays unknown, the stream path removes the item once it sees it
apply.

Why the order (call by call, against every other flow): docs/design.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, NoReturn, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import Attempted, Effect
from hybrid_counter.errors import InProgress, NotFound, StoreUnavailable, Throttled
from hybrid_counter.keys import DEFAULT_KIND, epoch_of, member_token, range_of, token
from hybrid_counter.resources import items
from hybrid_counter.resources.census import CensusTaker
from hybrid_counter.resources.dead_claims import DeadClaims
from hybrid_counter.resources.org_level import OrgLevel, releases_only
from hybrid_counter.resources.table import Item, ResourceTable, guarded

if TYPE_CHECKING:
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability
    from hybrid_counter.resources.org_level import OrgLevel

GONE = "gone"
LIVE_AGAIN = "live"
RELEASED = "released"


@dataclass(frozen=True)
class Claim:
    request_id: str  # the delete request that owns the claim now
    incarnation: str
    counted: bool  # as of the claim; the stream path does not count a claimed resource
    taken_over: bool = False
    kind: str = DEFAULT_KIND
    units: int = 1  # what the release frees (no resize can change it while the claim stands)
    org: str | None = None  # the organization whose counter holds its units too (org_level.py)
    org_counted: bool = False  # as of the claim: whether the organization's eventual holds it
    org_released: bool = (
        False  # the stream path saw its organization's release apply (claims before 2026-11-26)
    )
    org_shard: int = 0  # which of the organization's counter items holds its units
    account_released: bool = False  # the stream path saw its account's release apply (a member's)
    account_first: bool = False  # released at its account first (claims made since 2026-11-26)
    # Taken over from a request that had handed its organization's release off: that release
    # never applied (the stream path makes it with the removal, atomically, and the item is here)
    org_refused: bool = False
    claimed_since: str = ""  # when this claim was made (its deleting_since, by its own clock)

    @classmethod
    def of(
        cls, request_id: str, item: Item, *, taken_over: bool = False, previous: str | None = None
    ) -> Claim:
        """The claim as written (``previous``: the request whose claim was taken over)."""
        return cls(
            request_id,
            items.incarnation_of(item),
            items.is_counted(item),
            taken_over,
            items.kind_of(item),
            items.units_of(item),
            items.org_of(item),
            items.org_counted(item),
            bool(item.get("org_released", {}).get("BOOL", False)),
            items.org_shard(item),
            items.account_released(item),
            bool(item.get("account_first", {}).get("BOOL", False)),
            previous is not None and items.since(item, "org_handoff") == previous,
            items.since(item, "deleting_since"),
        )


class ResizeSettler(Protocol):
    """What a delete needs of resizes: to end one whose request died (resize.py)."""

    def settle_stale(self, account_id: str, kind: str, rid: str, seen: Item) -> bool: ...


class DeleteFlow:
    def __init__(
        self,
        table: ResourceTable,
        counters: CounterStore,
        grace_seconds: float,
        effects: Effects,
        obs: Observability,
    ) -> None:
        self._table = table
        self.counters = counters
        self._grace = grace_seconds
        self._fx = effects
        self.obs = obs
        self.resizes: ResizeSettler | None = None  # set by the service (resize.py)
        # The organizations' level (org_level.py): releases only, so no limit is judged here.
        self.orgs = OrgLevel(table, counters, releases_only, effects, obs, grace_seconds=grace_seconds)
        censuses = CensusTaker(table.name, table.clients, grace_seconds=grace_seconds, clock=effects.clock)
        self.dead_claims = DeadClaims(table, counters, censuses, sleep=effects.waiter.sleep)

    def delete(self, account_id: str, rid: str, *, kind: str | None = None) -> None:
        claim = self._claim(account_id, kind or self.counters.default_kind, rid, self._fx.new_id())
        if not self.finish(account_id, rid, claim):
            # An earlier delete released it: it was deleted then, and this one finds nothing
            # (it only removed the item that delete could not).
            raise NotFound(f"resource {rid} not found")

    def take_over(self, account_id: str, rid: str, seen: Item) -> Claim | None:
        """Take over the claim of ``seen`` (the item as a repair read it), on that incarnation and
        that claim only; None if anything changed since (the delete went on, the id was created
        again): then there is nothing for the repair to do."""
        request_id = self._fx.new_id()
        taken = self._table.claim(
            account_id,
            rid,
            request_id,
            taking_over=items.since(seen, "delete_request"),
            incarnation=items.incarnation_of(seen),
            kind=items.kind_of(seen),
        )
        item = taken.item
        if not taken.applied and items.since(item or {}, "delete_request") != request_id:
            return None  # (refused on our own request: the takeover's resend after a lost response)
        if item is None:
            return None
        self.obs.count("DeleteTakenOver")
        return Claim.of(request_id, item, taken_over=True, previous=items.since(seen, "delete_request"))

    def finish(self, account_id: str, rid: str, claim: Claim) -> bool:
        """Release the claimed incarnation's slot at each level that holds it (at most once
        each: its account's, then its organization's) and remove the item. True if this call
        released it anywhere; False if a taken-over claim's own releases had all applied."""
        request_id, kind = claim.request_id, claim.kind
        release_token = token(rid, claim.incarnation)
        # (a hand-off is written only after the account's release applied)
        at_account = (
            claim.account_released
            or claim.org_refused
            or (claim.taken_over and self._last_release(account_id, kind) == release_token)
        )
        at_org = (
            claim.org is None
            or claim.org_released
            or (claim.taken_over and self._org_released(account_id, rid, claim))
        )
        if at_account and at_org:
            self._remove(account_id, kind, rid, request_id)  # the earlier delete's releases did apply
            return False
        if not at_account and claim.taken_over:
            # Whether the dead request's release applied, nothing here can tell (its record may
            # be late, last_release overwritten): never a second release on a guess. The census
            # of the range decides (dead_claims.py); a busy range leaves it to the sweeper's.
            self._settle_by_census(account_id, rid, claim)
            if claim.org is None:
                self.obs.count("ResourcesDeleted")
                return True  # removed by the census
            claim = replace(claim, account_released=True)
            at_account = True
        if not at_account:
            if self._too_slow(claim):
                # D2 past half the grace period of its claim: a retried DELETE (or the sweeper) takes
                # a claim older than the grace period over and leaves it to the census, which gives
                # its units back; a release now could be a second (review 47: 3 live of 2).
                # Nothing was released yet: the claim reverted, "not done".
                self._revert(account_id, kind, rid, request_id, claim)
                self.obs.count("DeleteTooSlow")
                raise StoreUnavailable(
                    "the delete took too long to be made; it was not done, retry the request"
                )
            attempt = self.counters.release(
                account_id, rid, release_token, claim.counted, kind=kind, units=claim.units
            )
            seen = (
                None if attempt.applied else self._released_after_all(account_id, rid, claim, attempt.effect)
            )
            if seen == GONE:
                self.obs.count("ResourcesDeleted")
                return True  # finished meanwhile by the stream path (its release applied)
            if not attempt.applied and seen is None:
                self._not_released(account_id, rid, claim, attempt)
        if not at_org and claim.taken_over and claim.account_first and not claim.org_refused:
            # Its request died after its account's release: whether its organization's applied,
            # nothing here can tell (the stream path may be late, last_release overwritten).
            # The sweeper's census of the range decides (counting/org_recount.py): never a
            # second release on a guess.
            self._leave_to_census(account_id, rid, claim)
        if not at_org and self._too_slow(claim):
            # Its claim older than half the grace period: another may take it over, or the census
            # find it dead, once it is older than the grace period; a release there now could be
            # that census's too (review 37: a takeover stalled past the grace period released
            # twice). The census decides.
            self._leave_to_census(account_id, rid, claim)
        if not at_org and self._release_at_org(account_id, rid, claim):
            return True  # handed off, or left to the stream path, and finished by it
        self._remove(account_id, kind, rid, request_id)
        self.obs.count("ResourcesDeleted")
        return True

    def _settle_by_census(self, account_id: str, rid: str, claim: Claim) -> None:
        """Leave the taken-over claim's account level to the census of its range, and take that
        census: returns once it finished the claim there (removed it, or a member's: marked it
        ``account_released``). Its range busy: 503, and the sweeper takes the census."""
        guarded(
            lambda: self._table.leave_to_census(
                account_id,
                rid,
                claim.request_id,
                incarnation=claim.incarnation,
                kind=claim.kind,
                sweep_from=self._fx.clock() - self._grace - 1,  # the next sweep takes it
            ),
            "the delete",
        )
        self.obs.count("DeleteLeftToCensus")
        if not guarded(
            lambda: self.finish_left(account_id, claim.kind, rid, claim.incarnation), "the delete"
        ):
            raise InProgress("the delete is being finished; a retry answers 404 once it is")

    def finish_left(self, account_id: str, kind: str, rid: str, incarnation: str) -> bool:
        """A claim left to the census (hidden: its slot may be free already) is never taken over:
        the census of its range finishes it, whoever asks. True if it is finished at its account
        (gone, or a member's marked ``account_released``)."""
        return self._census_of_left(account_id, kind, rid, incarnation) is not None

    def gone_by_census(self, account_id: str, kind: str, rid: str, incarnation: str) -> bool:
        """The census of a claim left to it taken (finish_left): True once it removed the claim
        (a member's finished at its account only is not gone: its organization's census is owed)."""
        return self._census_of_left(account_id, kind, rid, incarnation) == GONE

    def _census_of_left(self, account_id: str, kind: str, rid: str, incarnation: str) -> str | None:
        """GONE once the census finished the claim, RELEASED if it finished a member's at its
        account only (its organization's level is owed still), None if the range was busy."""
        if not self.dead_claims.settle(account_id, kind, range_of(rid)):
            return None
        item = self._table.get(account_id, rid, kind=kind)
        if item is None or items.incarnation_of(item) != incarnation:
            return GONE
        return RELEASED if items.account_released(item) else None

    def _finished_by_census(self, account_id: str, kind: str, rid: str, item: Item) -> NoReturn:
        """A DELETE that finds the claim left to the census of its range (an earlier attempt's
        takeover): that census finishes it; 404 once it is gone, else 503. A member's finished at
        its account only is 503 too: its organization may hold its slot until that
        organization's census (a 404 then would leave a refusal there no order explains)."""
        incarnation = items.incarnation_of(item)
        if guarded(lambda: self.gone_by_census(account_id, kind, rid, incarnation), "the delete"):
            raise NotFound(f"resource {rid} not found")
        raise InProgress("the delete is being finished; a retry answers 404 once it is")

    def _leave_to_census(self, account_id: str, rid: str, claim: Claim) -> NoReturn:
        """Mark the claim released at its account (hidden, indexed: the sweeper finishes it by a
        census of its organization's range), then 503."""
        if not claim.account_released:
            guarded(
                lambda: self._table.mark_account_released(
                    account_id, rid, claim.request_id, incarnation=claim.incarnation, kind=claim.kind
                ),
                "the delete",
            )
        self.obs.count("DeleteLeftToCensus")
        raise InProgress("the delete is being finished; a retry answers 404 once it is")

    def _not_released(self, account_id: str, rid: str, claim: Claim, attempt: Attempted) -> NoReturn:
        """The account's release did not apply (nothing was released): the claim reverted, 429
        or 503; or its outcome is still unknown: the claim stays, and a retry after the grace
        period (or the sweeper, for a member) takes it over."""
        if attempt.effect is not Effect.NOT_APPLIED:
            raise InProgress("the delete could not be confirmed; retry the request")
        self._revert(account_id, claim.kind, rid, claim.request_id, claim)
        if attempt.throttled:
            self.obs.count("DeleteThrottled")
            raise Throttled("too many requests for this account; the delete was not done, retry the request")
        raise StoreUnavailable("the data store is unavailable; the delete was not done, retry the request")

    def _release_at_org(self, account_id: str, rid: str, claim: Claim) -> bool:
        """The organization's release, after the account's applied (design.md §10.4): False
        once it applied. Refused without effect: handed to the stream path, which makes it with
        the removal. Outcome unknown: the stream path removes the item if it sees it apply, and
        the sweeper finishes it past the grace period if it did not. True if the stream path
        finished the delete within the wait; else 503, and it will be. (Refused by its floor on
        every attempt, it is handed off too: the stream path's release has the same floor.)"""
        assert claim.org is not None
        effect = self.orgs.release_resolved(
            claim.org,
            account_id,
            rid,
            claim.incarnation,
            kind=claim.kind,
            units=claim.units,
            counted=claim.org_counted,
            shard=claim.org_shard,
        )
        if effect is None:
            return False
        # The account's slot is free: no revert. Its release's record makes the stream path note
        # it on the claim (account_released: no longer visible) and index it for the sweeper.
        # Unknown: release_resolved has waited for the stream path already.
        if effect in (Effect.NOT_APPLIED, Effect.CONDITION_FAILED):
            self._hand_off(account_id, rid, claim)
            if self._finished_by_stream(account_id, rid, claim):
                self.obs.count("ResourcesDeleted")
                return True
        raise InProgress("the delete is being finished; a retry answers 404 once it is")

    def _hand_off(self, account_id: str, rid: str, claim: Claim) -> None:
        """A member's delete whose organization's release was refused without effect, after its
        account's applied: ``org_handoff`` on its own claim, conditional on still owning it; the
        stream path then releases at the organization and removes the item in one transaction
        on this claim (design.md §10.4). Not written: the claim stays, for the sweeper."""
        try:
            handed = self._table.hand_off(
                account_id, rid, claim.request_id, incarnation=claim.incarnation, kind=claim.kind
            )
        except (ClientError, BotoCoreError) as error:
            self.obs.logger.warning("could not hand a delete off", extra={"error": repr(error)})
            raise InProgress("the delete could not be finished; retry the request") from error
        if not handed.applied and handed.item is not None:
            raise InProgress("the resource changed while it was being deleted; retry the request")
        # (refused on no item: finished already, the hand-off's response lost and retried)
        self.obs.count("DeleteHandedOff")

    def _finished_by_stream(self, account_id: str, rid: str, claim: Claim) -> bool:
        def removed() -> bool | None:
            item = self._table.get(account_id, rid, kind=claim.kind)
            return True if item is None or items.incarnation_of(item) != claim.incarnation else None

        try:
            return self._fx.waiter.until(removed) is not None
        except (ClientError, BotoCoreError):
            return False

    def _claim(self, account_id: str, kind: str, rid: str, request_id: str) -> Claim:
        for _ in range(3):
            claimed = guarded(lambda: self._table.claim(account_id, rid, request_id, kind=kind), "the delete")
            if claimed.applied and claimed.item is not None:
                return Claim.of(request_id, claimed.item)
            item = claimed.item
            state = items.state_of(item)
            if item is None or state == items.PENDING:
                raise NotFound(f"resource {rid} not found")
            if state == items.LIVE and items.resizing(item):
                self._after_resize(account_id, kind, rid, item)
                continue
            if state != items.DELETING:
                continue  # it became live again between the claim and its refusal
            if items.left_to_census(item):
                self._finished_by_census(account_id, kind, rid, item)
            owner = items.since(item, "delete_request")
            if owner == request_id:
                # our own claim, resent by botocore after a lost response: a takeover's says so
                previous = items.since(item, "took_over") or None
                return Claim.of(request_id, item, taken_over=previous is not None, previous=previous)
            if self._stale(item, "deleting_since"):
                taken = guarded(
                    partial(
                        self._table.claim,
                        account_id,
                        rid,
                        request_id,
                        taking_over=owner,
                        incarnation=items.incarnation_of(item),
                        kind=kind,
                    ),
                    "the delete",
                )
                if taken.applied and taken.item is not None:
                    self.obs.count("DeleteTakenOver")
                    return Claim.of(request_id, taken.item, taken_over=True, previous=owner)
                continue
            settled = guarded(
                partial(self._fx.waiter.until, partial(self._settled, account_id, kind, rid, owner)),
                "the delete",
            )
            if settled == GONE:
                raise NotFound(f"resource {rid} not found")
            if settled is None:
                raise InProgress("another delete of this resource is still running; retry shortly")
        raise InProgress("the resource changed while it was being deleted; retry the request")

    def _after_resize(self, account_id: str, kind: str, rid: str, item: Item) -> None:
        """A resize of the resource is in flight: it owns the counters until it ends. Wait for it;
        one whose request died (claimed longer ago than the grace period) is ended here."""
        if self._stale(item, "resizing_since") and self.resizes is not None:
            guarded(lambda: self.resizes.settle_stale(account_id, kind, rid, item), "the delete")  # type: ignore[union-attr]
            return

        def ended() -> bool | None:
            return None if items.resizing(self._table.get(account_id, rid, kind=kind)) else True

        if guarded(partial(self._fx.waiter.until, ended), "the delete") is None:
            raise InProgress("a resize of this resource is still running; retry shortly")

    def _settled(self, account_id: str, kind: str, rid: str, owner: str) -> str | None:
        """How another delete of this resource ended, or None while it is still running."""
        item = self._table.get(account_id, rid, kind=kind)
        state = items.state_of(item)
        if item is None or state == items.PENDING:
            return GONE
        if state == items.LIVE:
            return LIVE_AGAIN
        return None if items.since(item, "delete_request") == owner else LIVE_AGAIN

    def _released_after_all(
        self, account_id: str, rid: str, claim: Claim, effect: Effect | None
    ) -> str | None:
        """After an account's release whose outcome is unknown: RELEASED if it applied, GONE if
        the stream path finished the whole delete meanwhile, None if still unknown.
        last_release answers unless another release came since; then the stream path, which
        removes the item (or, a member's, notes ``account_released`` on it) only once it has
        seen the release, answers within its lag."""
        if effect is not Effect.UNKNOWN:
            return None
        try:
            if self._last_release(account_id, claim.kind) == token(rid, claim.incarnation):
                return RELEASED
        except (ClientError, BotoCoreError):
            return None

        def seen() -> str | None:
            item = self._table.get(account_id, rid, kind=claim.kind)
            if item is None or items.incarnation_of(item) != claim.incarnation:
                return GONE
            return RELEASED if items.account_released(item) else None

        try:
            return self._fx.waiter.until(seen)
        except (ClientError, BotoCoreError):
            return None

    def _too_slow(self, claim: Claim) -> bool:
        """Made longer ago than half the grace period, by this process's clock (items.in_time)."""
        return bool(claim.claimed_since) and not items.in_time(
            epoch_of(claim.claimed_since), self._fx.clock(), self._grace
        )

    def _org_released(self, account_id: str, rid: str, claim: Claim) -> bool:
        """A taken-over member's claim: did the earlier delete's release at its organization
        apply, as far as that shard's ``last_release`` can tell (the stream path, which removes
        the item once it sees it, tells otherwise within its lag)."""
        assert claim.org is not None
        seen = self.orgs.read(claim.org, claim.kind, claim.org_shard).last_release
        return seen == member_token(account_id, rid, claim.incarnation)

    def _last_release(self, account_id: str, kind: str) -> str | None:
        return self.counters.read(account_id, kind=kind).last_release

    def _remove(self, account_id: str, kind: str, rid: str, request_id: str) -> None:
        try:
            self._table.remove(account_id, rid, request_id, kind=kind)
        except (ClientError, BotoCoreError) as error:
            # The release applied, so the delete happened: the stream path removes the item.
            self.obs.logger.warning("could not remove a released resource", extra={"error": repr(error)})

    def _revert(self, account_id: str, kind: str, rid: str, request_id: str, claim: Claim) -> None:
        try:
            self._table.revert(account_id, rid, request_id, index=not claim.counted, kind=kind)
        except (ClientError, BotoCoreError) as error:
            # Left claimed (visible, holding its slot): a delete after the grace period takes it over.
            self.obs.count("RevertFailed")
            self.obs.logger.warning("could not revert a delete's claim", extra={"error": repr(error)})

    def _stale(self, item: Item, attribute: str) -> bool:
        since = items.since(item, attribute)
        return bool(since) and epoch_of(since) < self._fx.clock() - self._grace
