"""Create a resource: put it pending, admit its units with one conditional increment, make it live.

1. PUT only: an existing live id answers 200 if the body is the one that created it (else 409
   IdempotencyConflict); a pending one, or one being deleted, is waited for (it settles in
   milliseconds); a stale pending one is adopted; one whose delete released it is created anew.
2. Read the kind's counter item; no room for the units under the limit: 409 without writing.
3. Put the item ``pending`` (invisible; holds no slot), conditional on the id being free.
4. Admission: ``best_effort + units`` only if both counters leave room for them under the limit
   (counters/store.py), judged by the override on the counter item or the account's plan
   (plans/). Refused: roll the item back, 409. Throttled on every attempt: roll back, 429.
   Outcome unknown: resolved by reading the counter item back or by the stream path counting
   the resource; if still unknown, the resource is made live and indexed for the sweeper.
5. Make it ``live``. Only now can anyone see or delete it.

Why the order (call by call, against every other flow): docs/design.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import store_error
from hybrid_counter.counters import Admission, AdmissionOutcome, Judge
from hybrid_counter.errors import (
    DomainError,
    IdempotencyConflict,
    InProgress,
    LimitExceeded,
    StoreUnavailable,
    Throttled,
)
from hybrid_counter.keys import epoch_of, token
from hybrid_counter.resources import items
from hybrid_counter.resources.items import Resource
from hybrid_counter.resources.table import Item, ResourceTable, guarded

if TYPE_CHECKING:
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability
    from hybrid_counter.resources.org_level import OrgLevel, OrgSeen


def same_request(existing: Resource, name: str, extra: dict[str, Any], units: int) -> Resource:
    """A PUT of an existing id is a retry only if it repeats the request that created it; a
    different body under the same id is the caller's mistake, refused as payment APIs refuse a
    reused idempotency key with other parameters. A PATCH since does not make the creating
    request a different one: its repeat answers 200 with the resource as it is now."""
    created = existing.units if existing.requested_units is None else existing.requested_units
    if existing.name != name or existing.extra != extra or created != units:
        raise IdempotencyConflict(
            f"resource {existing.resource_id} exists with a different body; "
            "a PUT of an existing id must repeat the request that created it"
        )
    return existing


class AtLimit(Exception):
    """The limit pre-check refused the create before anything was written."""

    def __init__(self, error: LimitExceeded) -> None:
        super().__init__(str(error))
        self.error = error


class OrgGone(Exception):
    """The organization's counter was not there to admit at: DELETE /orgs came after the
    create read the account's membership (which the member's leave before it changed)."""


@dataclass(frozen=True)
class Found:
    resource: Resource | None  # None: the id is free


@dataclass(frozen=True)
class Request:
    """One create: where, what, and how it is judged."""

    account_id: str
    kind: str
    name: str
    extra: dict[str, Any]
    units: int
    judge: Judge
    hold_until: float | None = None  # a hold (holds.py): its deadline


class LeftClaims(Protocol):
    """What a PUT needs of deletes: the census that finishes a claim left to it (delete.py)."""

    def gone_by_census(self, account_id: str, kind: str, rid: str, incarnation: str) -> bool: ...


class CreateFlow:
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
        self._grace = grace_seconds
        self._fx = effects
        self._obs = obs
        self._orgs = orgs
        self.left_claims: LeftClaims | None = None  # set by the service (delete.py)

    def create(
        self,
        account_id: str,
        name: str,
        extra: dict[str, Any],
        resource_id: str | None = None,
        *,
        kind: str | None = None,
        units: int = 1,
        judge: Judge | None = None,
        hold_seconds: float | None = None,
    ) -> tuple[Resource, bool]:
        """Returns (resource, created); ``created`` is False when a PUT finds its id taken.
        ``hold_seconds``: a hold, released unless confirmed by then (holds.py)."""
        kind = kind or self._counters.default_kind
        hold_until = None if hold_seconds is None else self._fx.clock() + hold_seconds
        request = Request(
            account_id, kind, name, extra, units, judge or self._counters.default_judge, hold_until
        )
        rid = resource_id or self._fx.new_id()
        stored: Item | None = None
        for _ in range(3):
            if resource_id is not None:
                existing = self.existing(account_id, kind, rid, stored)
                if existing is not None:
                    return same_request(existing, name, extra, units), False
            try:
                outcome = self._try_create(request, rid)
            except AtLimit as refused:
                # A PUT refused before writing anything: if the id was created meanwhile (say by
                # the first attempt of this very request), the answer is that it exists.
                existing = None if resource_id is None else self.existing(account_id, kind, rid, None)
                if existing is not None:
                    return same_request(existing, name, extra, units), False
                raise refused.error from None
            if isinstance(outcome, items.Resource):
                return outcome, True
            # another create took the id between our read and our put (its item), or the
            # account's organization changed (None): judge again
            stored = outcome
        raise InProgress("this resource id is being created by another request; retry shortly")

    def _try_create(self, request: Request, rid: str) -> Resource | Item | None:
        """One attempt: the created resource; the item of another create that took the id; or
        None when the account's organization changed meanwhile (judge it all again)."""
        account_id, kind, units = request.account_id, request.kind, request.units
        state = guarded(lambda: self._counters.read(account_id, kind=kind), "the create")
        membership = guarded(lambda: self._orgs.membership(account_id, kind, state), "the create")
        judged = request.judge(state)
        if not state.admits(judged.limit, units):
            self._obs.count("LimitExceeded")
            raise AtLimit(LimitExceeded(judged.limit, state.used, kind, units, holds=state.holds_used))
        org = membership.org
        org_seen: OrgSeen | None = None
        if org is not None:
            try:
                org_seen = guarded(
                    lambda: self._orgs.precheck(org, kind, units, rid, epoch=membership.epoch), "the create"
                )
            except LimitExceeded as full:
                full.holds = state.holds_used  # the account's own holds are what it would reclaim
                raise AtLimit(full) from None
            membership = replace(membership, usage_keys=org_seen.usage_keys)
        if not state.org_known and not guarded(
            lambda: self._orgs.register(account_id, kind, membership), "the create"
        ):
            return None  # the account's organization changed since it was read: judge again
        incarnation, created_at = self._fx.incarnation(), self._fx.clock()
        item = items.pending_item(
            account_id,
            rid,
            request.name,
            request.extra,
            incarnation,
            now=created_at,
            kind=kind,
            units=units,
            org=org,
            org_shard=0 if org_seen is None else org_seen.shard,
            hold_until=request.hold_until,
            hold_keys=1 if org_seen is None else org_seen.hold_keys,
        )
        put = guarded(lambda: self._table.put_pending(item), "the create")
        if not put.applied and put.item is not None and items.incarnation_of(put.item) != incarnation:
            return put.item
        # Refused with our own incarnation: botocore retried our put after a lost response; go on.

        org_certain = True
        if org is not None and org_seen is not None:  # the organization's level first (org_level.py)
            try:
                org_certain = self._admit_at_org(
                    request, rid, incarnation, org, org_seen, created_at=created_at
                )
            except OrgGone:
                return None  # DELETE /orgs came since the membership was read: judge it all again
            except LimitExceeded as full:
                full.holds = state.holds_used  # (as at the precheck: its account was read)
                raise
        if not self._in_time(created_at):
            self._too_late_for_the_account(request, rid, incarnation, org, org_certain=org_certain)

        admission_token = token(rid, incarnation)
        admission = self._counters.admit(
            account_id,
            rid,
            admission_token,
            state,
            kind=kind,
            units=units,
            judge=request.judge,
            membership=membership,
            hold=request.hold_until is not None,
        )
        if (
            admission.outcome is not AdmissionOutcome.ADMITTED
            and admission.outcome is not AdmissionOutcome.UNKNOWN
        ):
            self._refused_at_account(request, rid, incarnation, org, admission, org_certain=org_certain)
            if admission.outcome is AdmissionOutcome.MOVED:
                return None
        certain = org_certain and (
            admission.outcome is AdmissionOutcome.ADMITTED
            or self._admitted_after_all(account_id, kind, rid, incarnation, admission_token)
        )
        self._make_live(account_id, kind, rid, incarnation, created_at=created_at, certain=certain)
        self._obs.count("ResourcesCreated")
        return items.resource_from_item(item)

    def _make_live(
        self, account_id: str, kind: str, rid: str, incarnation: str, *, created_at: float, certain: bool
    ) -> None:
        """C5: pending -> live (``certain``: both admissions known to have applied, else also
        indexed); raises StoreUnavailable where nobody may be told it exists."""
        if not self._in_time(created_at):
            # Past half the grace period since its pending item was put: the sweeper may roll it
            # back (or undo it at its organization) once it is older than the grace period, so
            # making it live now could tell 201 of a create it removes. Left as it is: the
            # sweeper rolls it back (the stream path makes a pending item live only within half
            # the grace period of its put too: counting/eventual.py).
            raise StoreUnavailable(
                "the create took too long to finish; it may not have finished, retry the request"
            )
        try:
            # Refused if the stream path made it live first (and a delete may have followed):
            # either way the create happened; or if a repair is undoing it (``undoing``): it did not.
            made = self._table.make_live(account_id, rid, incarnation, index=not certain, kind=kind)
        except (ClientError, BotoCoreError) as error:
            # Still pending, so nobody may be told it exists: a 201 for an item that stays pending
            # would be lost if its admission's stream record were too (the audit rolls back every
            # create left pending, repairs.py). Admitted, the stream path usually finishes it; the
            # 503 says exactly that: done or not, and a retried PUT gets the final answer.
            if certain:
                self._obs.logger.warning(
                    "could not make an admitted resource live", extra={"error": repr(error)}
                )
            # Never 429 (which promises nothing was done): the admission may have applied.
            raise StoreUnavailable(
                "the data store is unavailable; the create may not have finished, retry the request"
            ) from error
        if not made.applied and made.item is not None and "undoing" in made.item:
            raise StoreUnavailable("the create was not done; retry the request")

    def _too_late_for_the_account(
        self, request: Request, rid: str, incarnation: str, org: str | None, *, org_certain: bool
    ) -> NoReturn:
        """Past half the grace period since its pending item was put, before its account's
        admission (C4): the sweeper may take the item as a dead create's once it is older than
        the grace period (a retried PUT may adopt it), so an admission made now could count it a
        second time. Undone as a create its account refused (a member's at its organization:
        org_level.py), and answered 503 (review 46: the stalled admissions overcounted an item
        adopted meanwhile, at both levels, for good)."""
        account_id, kind, units = request.account_id, request.kind, request.units
        if org is not None:
            self._orgs.undo(
                account_id, rid, incarnation, kind=kind, org=org, units=units, certain=org_certain
            )
        else:
            self._roll_back(account_id, kind, rid, incarnation)
        raise StoreUnavailable("the create took too long to be made; it was not done, retry the request")

    def _admit_at_org(
        self, request: Request, rid: str, incarnation: str, org: str, seen: OrgSeen, *, created_at: float
    ) -> bool:
        """The organization's admission of the create; raises (after rolling the pending item
        back) when it is refused or not applied, or cannot be made: a read before its write
        failed, or the create is past half the grace period since its put (as before C4). False
        when its outcome stayed unknown: the create goes on as if it applied (P1's exception, at
        the organization's level), indexed so the sweeper counts it there."""
        account_id, kind, units = request.account_id, request.kind, request.units
        try:
            admitted, seen = self._admitted_at_org(
                request, rid, incarnation, org, seen, created_at=created_at
            )
        except DomainError:
            # Nothing was admitted there (what raises comes before the admission's write): rolled
            # back as any create not admitted, so a retried PUT never adopts it unadmitted
            # (review 46: a throttled read here answered 429 and left the item, which a retry
            # adopted past the organization's limit).
            self._roll_back(account_id, kind, rid, incarnation)
            raise
        if admitted.outcome is AdmissionOutcome.ADMITTED:
            return True
        if admitted.outcome is AdmissionOutcome.UNKNOWN:
            return self._orgs.admitted_after_all(
                org, account_id, rid, incarnation, kind=kind, shard=seen.shard
            )
        self._roll_back(account_id, kind, rid, incarnation)
        if admitted.outcome is AdmissionOutcome.MOVED:
            raise OrgGone(org)
        if admitted.outcome is AdmissionOutcome.REJECTED:
            self._obs.count("LimitExceeded")
            raise self._orgs.refused(org, admitted, kind, units)
        if admitted.throttled:
            self._obs.count("CreateThrottled")
            raise Throttled(
                "too many requests for this organization; the create was not done, retry the request"
            )
        raise StoreUnavailable("the data store is unavailable; the create was not done, retry the request")

    def _admitted_at_org(
        self, request: Request, rid: str, incarnation: str, org: str, seen: OrgSeen, *, created_at: float
    ) -> tuple[Admission, OrgSeen]:
        account_id, kind, units = request.account_id, request.kind, request.units
        hold = request.hold_until is not None
        self._in_time_to_admit(created_at)
        admitted = self._orgs.admit(
            org, account_id, rid, incarnation, kind=kind, units=units, seen=seen, hold=hold
        )
        tried = {seen.shard}
        while admitted.outcome is AdmissionOutcome.NOT_APPLIED and admitted.throttled:
            # a split counter's shard throttled: another shard, named on the item first
            other = self._orgs.elsewhere(org, kind, tried, units, seen.epoch)
            if other is None or not self._named(request, rid, incarnation, was=seen.shard, to=other.shard):
                break
            self._obs.count("OrgShardFallback")
            seen = other
            tried.add(seen.shard)
            self._in_time_to_admit(created_at)
            admitted = self._orgs.admit(
                org, account_id, rid, incarnation, kind=kind, units=units, seen=seen, hold=hold
            )
        return admitted, seen

    def _in_time(self, created_at: float) -> bool:
        """A create's writes after its put (O2, C4, C5) are made only within half the grace
        period of it, by this process's clock (items.in_time): the sweeper, and a retried PUT's
        adoption, take a pending item older than the grace period as a dead create's."""
        return items.in_time(created_at, self._fx.clock(), self._grace)

    def _in_time_to_admit(self, created_at: float) -> None:
        if not self._in_time(created_at):
            raise StoreUnavailable("the create took too long to be made; it was not done, retry the request")

    def _named(self, request: Request, rid: str, incarnation: str, *, was: int, to: int) -> bool:
        """The pending item names shard ``to`` instead of ``was`` (False: it could not be made to;
        the create is then answered as the throttled admission says, its item rolled back)."""
        try:
            return self._table.move_org_shard(
                request.account_id, rid, incarnation, kind=request.kind, was=was, to=to
            )
        except (ClientError, BotoCoreError):
            return False

    def _refused_at_account(
        self,
        request: Request,
        rid: str,
        incarnation: str,
        org: str | None,
        admission: Admission,
        *,
        org_certain: bool = True,
    ) -> None:
        """The account's admission did not apply: undo the organization's (if any), roll the
        pending item back, and raise; returns only when the account's organization changed (the
        caller judges the create again). An organization's admission whose outcome is unknown
        is not released blind: it may not have applied (review 41), and a release of what
        nobody holds there would let another create past the limit."""
        account_id, kind, units = request.account_id, request.kind, request.units
        if org is not None:
            # An undo that cannot finish leaves the item pending (invisible, holding no slot of
            # its account) for the sweeper; the answer is the same: the create was not done.
            self._orgs.undo(
                account_id, rid, incarnation, kind=kind, org=org, units=units, certain=org_certain
            )
        else:
            self._roll_back(account_id, kind, rid, incarnation)
        if admission.outcome is AdmissionOutcome.MOVED:
            return
        if admission.outcome is AdmissionOutcome.REJECTED:
            self._obs.count("LimitExceeded")
            limit = admission.judged.limit if admission.judged else 0
            raise LimitExceeded(limit, admission.state.used, kind, units, holds=admission.state.holds_used)
        if admission.throttled:
            self._obs.count("CreateThrottled")
            raise Throttled("too many requests for this account; the create was not done, retry the request")
        raise StoreUnavailable("the data store is unavailable; the create was not done, retry the request")

    def _admitted_after_all(
        self, account_id: str, kind: str, rid: str, incarnation: str, admission_token: str
    ) -> bool:
        """After an admission whose outcome is unknown: did it apply? The counter item's
        last_admission answers unless another admission came since; then the stream path,
        which counts the resource only if its admission applied, usually answers within a second."""

        def counted() -> bool | None:
            found = self._table.get(account_id, rid, kind=kind)
            if found is not None and items.incarnation_of(found) == incarnation and items.is_counted(found):
                return True
            return None

        try:
            if self._counters.read(account_id, kind=kind).last_admission == admission_token:
                return True
            return self._fx.waiter.until(counted) is not None
        except (ClientError, BotoCoreError):
            return False

    def _roll_back(self, account_id: str, kind: str, rid: str, incarnation: str) -> None:
        """Remove the refused create's item. If that fails it stays pending (invisible, holding no
        slot) until its TTL, or until a PUT of the same id adopts it after the grace period."""
        try:
            self._table.roll_back(account_id, rid, incarnation, kind=kind)
        except Exception as error:  # a failed rollback must not change the caller's answer
            self._obs.count("RollbackFailed")
            self._obs.logger.warning(
                "could not roll back a refused create",
                extra={"account_id": account_id, "resource_id": rid, "error": repr(error)},
            )

    def existing(self, account_id: str, kind: str, rid: str, seen: Item | None) -> Resource | None:
        """What a PUT finds under its id: a live resource (200), nothing (create it), or a create
        or a delete still running, waited for. A resource whose delete has released its slot no
        longer exists, even while its item is still there (its delete could not remove it):
        the PUT creates it again, or answers InProgress (503) until it can."""
        last: list[Item | None] = [seen]

        def probe(item: Item | None) -> Found | None:
            state = items.state_of(item)
            if item is None or state is None:
                return Found(None)  # free
            if state == items.LIVE:
                return Found(items.resource_from_item(item))
            if state == items.PENDING and self._stale(item):
                adopted = self._table.adopt(account_id, rid, items.incarnation_of(item), kind=kind)
                if adopted.applied:
                    self._obs.count("PendingAdopted")
                    return Found(items.resource_from_item(item))
            # a create or a delete in flight: wait for it (a create being undone is never adopted:
            # it was refused, and neither level holds it; its undo, the sweeper's past the grace
            # period, frees the id)
            return None

        def settled() -> Found | None:
            last[0] = self._table.get(account_id, rid, kind=kind)
            return probe(last[0])

        try:
            found = probe(seen) if seen is not None else None
            if found is None:
                found = self._fx.waiter.until(settled)
            if found is None and items.state_of(last[0]) == items.DELETING:
                found = self._after_release(account_id, kind, rid, last[0])
        except (ClientError, BotoCoreError) as error:
            raise store_error(error, "the create") from error
        if found is None:
            raise InProgress("this resource id is being created or deleted by another request; retry shortly")
        return found.resource

    def _after_release(self, account_id: str, kind: str, rid: str, item: Item | None) -> Found | None:
        """A delete that outlasted the wait: if its release applied (``last_release`` names it),
        it has happened, so its item is removed here, as the stream path would, and the id is
        free; otherwise it may still be running, and nothing can be said yet."""
        assert item is not None
        if items.left_to_census(item):
            # Never taken over, never removed on last_release alone: the census of its range
            # finishes it (delete.py), here as for a retried DELETE. A member's finished at its
            # account only still waits for its organization's census.
            incarnation = items.incarnation_of(item)
            gone = self.left_claims is not None and self.left_claims.gone_by_census(
                account_id, kind, rid, incarnation
            )
            return Found(None) if gone else None
        if items.org_of(item) is not None:
            # A member's: its organization's release comes after its account's; the stream path
            # removes it once that too applied (or the sweeper finishes it: delete.py).
            return None
        release = token(rid, items.incarnation_of(item))
        if self._counters.read(account_id, kind=kind).last_release != release:
            return None
        self._table.remove(account_id, rid, items.since(item, "delete_request"), kind=kind)
        return Found(None)

    def _stale(self, item: Item) -> bool:
        return epoch_of(items.since(item, "created_at")) < self._fx.clock() - self._grace
