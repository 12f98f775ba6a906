"""Holds (issue 25): units reserved now, confirmed or released later, never leaked by a caller
that dies.

A hold is a create with a deadline (``?hold_seconds=``): admitted like any create (at its
account, and at its organization first if it has one; released at its account first), live, holding its units, with
``hold_until`` (epoch seconds) and ``hold_account`` on its item, which put it in the sparse
``HoldIndex`` (by account, by deadline). Then exactly one of:

- **confirm**: one conditional write removes the deadline (the item leaves the index); conditional
  on the same incarnation, still live, still that deadline, and the deadline still ahead by the
  confirming process's clock. Confirming a confirmed resource is a no-op (200).
- **expiry**: a delete (delete.py) whose claim is conditional on the same incarnation, that
  deadline, and the deadline past by the expiring process's clock (``expired`` marks the claim);
  the claim is then finished as any delete's: released at each level once, the item removed.
- **the caller's DELETE**: the ordinary delete.

The confirm and the expiry's claim are conditional writes on the one item, on opposite sides of
the one deadline, so of a confirm and an expiry that race exactly one applies: a confirm that
loses answers 409 HoldExpired and counts nothing; an expiry that loses leaves a permanent
resource. Expiry is judged by the logic, never by DynamoDB's TTL (which deletes "typically
within a few days" and would release nothing).

Who expires: the sweeper, each run (a Scan of the sparse HoldIndex, filtered to past deadlines:
it reads the holds, not the table), and an admission refused for room, which first expires that
account's expired holds of the kind (one Query of the index) and, refused at its organization,
that organization's members' (one Query of the sparse ``OrgHoldIndex``, by ``hold_org``, which a
member's hold carries beside ``hold_account`` and loses with it), and is judged again, so an
expired hold blocks a create for no longer than that request. Each expiry is the same
conditional claim of that member's item, so whoever expires a hold (its account's request,
another member's, the sweeper) decides nothing new: of it and a confirm, a DELETE, a resize or
another expiry, the one item's conditions let exactly one apply. An expiry leaves a small tombstone
(``EXPIRED#<kind>#<id>``, removed by TTL after a week), so a confirm that comes after the item
is gone still answers HoldExpired rather than 404.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.errors import (
    DomainError,
    HoldExpired,
    InProgress,
    LimitExceeded,
    NotFound,
    StoreUnavailable,
)
from hybrid_counter.keys import EXPIRED_PREFIX, account_pk, iso_utc, parse_account_pk
from hybrid_counter.resources import items
from hybrid_counter.resources.delete import Claim
from hybrid_counter.resources.items import Resource
from hybrid_counter.resources.table import Item, ResourceTable, guarded

if TYPE_CHECKING:
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability
    from hybrid_counter.resources.delete import DeleteFlow

HOLD_INDEX = "HoldIndex"
ORG_HOLD_INDEX = "OrgHoldIndex"  # members' holds by organization (hold_org), by deadline
TOMBSTONE_SECONDS = 7 * 24 * 3600
RECLAIM_PAGE = 100  # expired holds one refused admission releases at most before judging again
# Pages of RECLAIM_PAGE of the account's (or the organization's) expired holds (every kind: the
# indexes are by account, by organization) one refusal reads at most, in each index it reads, to
# find those of its kind: the sweeper expires the rest within its run
CLAIMS_WAITED_FOR = 10  # another request's expiries a refusal waits for, at most
RECLAIM_PAGES = 10


@dataclass(frozen=True)
class Reclaimed:
    """What a refused admission's reclaim did: holds expired, and whether it gave one up (its
    claim reverted, or unknown: that hold may still hold the room)."""

    expired: int
    gave_up: bool

    def worth_judging_again(self) -> bool:
        return self.expired > 0 or self.gave_up

    def and_then(self, more: Reclaimed) -> Reclaimed:
        return Reclaimed(self.expired + more.expired, self.gave_up or more.gave_up)

    def refused_again(self, refused: LimitExceeded) -> Exception:
        """The answer to the admission refused again: 503 if an expired hold it gave up may be
        what holds the room (review 57: 409), else the refusal."""
        if self.gave_up:
            return StoreUnavailable("an expired hold could not be released in time; retry the request")
        return refused


def holder_of(entry: Item) -> str:
    """The account whose hold an index entry (HoldIndex's or OrgHoldIndex's) is: its table key."""
    return parse_account_pk(str(entry["pk"]["S"]))


def _hold_key(entry: Item) -> tuple[str, str, str]:
    return holder_of(entry), items.kind_of(entry), str(entry["resource_id"]["S"])


def tombstone_key(account_id: str, kind: str, resource_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": f"{EXPIRED_PREFIX}{kind}#{resource_id}"}}


class HoldFlow:
    def __init__(
        self, table: ResourceTable, deletes: DeleteFlow, effects: Effects, obs: Observability
    ) -> None:
        self._table = table
        self._deletes = deletes
        self._fx = effects
        self._obs = obs

    # ---- confirm ------------------------------------------------------------------------------------
    def confirm(self, account_id: str, kind: str, rid: str) -> Resource:
        """The hold made permanent (200 with the resource; again: the same). HoldExpired once its
        deadline passed (its units are released, nothing is counted for it); NotFound if there is
        no such resource."""
        for _ in range(3):
            item = guarded(lambda: self._table.get(account_id, rid, kind=kind), "the confirm")
            state = items.state_of(item)
            if item is None or state == items.PENDING:
                if self._expired_here(account_id, kind, rid):
                    raise HoldExpired(f"the hold on {rid} expired; its units were released")
                raise NotFound(f"resource {rid} not found")
            if state == items.DELETING:
                if item.get("expired", {}).get("BOOL"):
                    raise HoldExpired(f"the hold on {rid} expired; its units are being released")
                # A DELETE's claim: it may still be reverted (its release throttled, or too late),
                # the hold then unconfirmed and live. Wait for it as a second DELETE does: gone,
                # 404; live again, confirmed (before, review 51: 404 at once, for a hold whose
                # DELETE then did nothing).
                self._wait_for_the_delete(account_id, kind, rid, items.since(item, "delete_request"))
                continue
            until = items.hold_until_of(item)
            if until is None:
                return items.resource_from_item(item)  # confirmed already
            if item.get("expired", {}).get("BOOL"):
                # an expiry claimed it and its release was reverted (too late, throttled): a
                # confirm may have been told HoldExpired by that claim; the next sweep expires it
                raise HoldExpired(f"the hold on {rid} expired; its units are being released")
            if until <= self._fx.clock():
                raise HoldExpired(f"the hold on {rid} expired at {iso_utc(until)}")
            incarnation = items.incarnation_of(item)
            confirm = partial(
                self._table.confirm_hold, account_id, rid, kind=kind, incarnation=incarnation, until=until
            )
            done = guarded(confirm, "the confirm")
            if done.applied and done.item is not None:
                self._obs.count("HoldsConfirmed")
                return items.resource_from_item(done.item)
            # changed meanwhile (confirmed by a retry of this request, expired, deleted): again
        raise InProgress("the resource kept changing while it was being confirmed; retry the request")

    def _still_claimed(self, account_id: str, kind: str, rid: str, request_id: str) -> bool | None:
        """Its claim stands (for the takeover past the grace period), or it finished anyway;
        None if that cannot be read (a reclaim then takes it as given up: review 57)."""
        try:
            item = self._table.get(account_id, rid, kind=kind)
        except (ClientError, BotoCoreError):
            return None
        return items.state_of(item) != items.LIVE or items.since(item or {}, "delete_request") == request_id

    def _wait_for_the_delete(self, account_id: str, kind: str, rid: str, owner: str) -> None:
        def settled() -> bool | None:
            item = self._table.get(account_id, rid, kind=kind)
            ended = (
                items.state_of(item) != items.DELETING or items.since(item or {}, "delete_request") != owner
            )
            return True if ended else None

        if guarded(partial(self._fx.waiter.until, settled), "the confirm") is None:
            raise InProgress(f"resource {rid} is being deleted; retry shortly")

    def _expired_here(self, account_id: str, kind: str, rid: str) -> bool:
        found = self._table.clients.dynamodb.get_item(
            TableName=self._table.name, Key=tombstone_key(account_id, kind, rid), ConsistentRead=True
        )
        return "Item" in found

    # ---- expiry -------------------------------------------------------------------------------------
    def expire(self, account_id: str, rid: str, seen: Item) -> bool:
        return self._expire(account_id, rid, seen) is True

    def _expire(self, account_id: str, rid: str, seen: Item) -> bool | None:
        """Release ``seen``'s hold if its deadline has passed (by this process's clock): its
        delete's claim conditional on that hold, then the delete finished as any. True if this
        call claimed it and released it; None if it could not finish: its claim reverted (the
        hold live again past its deadline, for the next sweep), or left standing (its release
        handed to the stream path, or to the takeover of dead deletes after the grace period:
        delete.py), its units perhaps still held either way."""
        until = items.hold_until_of(seen)
        if until is None or until > self._fx.clock() or items.state_of(seen) != items.LIVE:
            return False
        kind, request_id = items.kind_of(seen), self._fx.new_id()
        claimed = self._table.claim(
            account_id, rid, request_id, kind=kind, incarnation=items.incarnation_of(seen), expiring=until
        )
        claim = claimed.item
        if claim is None or (not claimed.applied and items.since(claim, "delete_request") != request_id):
            return False  # confirmed, deleted, resized or expired by another meanwhile
        # (refused on our own claim: botocore's resend after a lost response; before, review 51:
        # taken for another's, the claim was left to the takeover after the grace period, the
        # hold's units held until then)
        self._leave_tombstone(account_id, kind, rid, items.incarnation_of(seen))
        try:
            self._deletes.finish(account_id, rid, Claim.of(request_id, claim))
        except DomainError as error:
            if self._still_claimed(account_id, kind, rid, request_id):
                # Its claim stands, its release left to the stream path or the takeover: expired,
                # but its units perhaps still held, so not released as far as a refused admission
                # can tell (review 61: taken as released, 409 while it held the room)
                self._obs.logger.warning("an expired hold's release was left", extra={"error": repr(error)})
            return None  # (else its claim reverted: delete.py, a throttled or a late release; or unknown)
        self._obs.count("HoldsExpired")
        return True

    def _leave_tombstone(self, account_id: str, kind: str, rid: str, incarnation: str) -> None:
        now = self._fx.clock()
        try:
            self._table.clients.dynamodb.put_item(
                TableName=self._table.name,
                Item={
                    **tombstone_key(account_id, kind, rid),
                    "incarnation": {"S": incarnation},
                    "expired_at": {"S": iso_utc(now)},
                    "expires_at": {"N": str(int(now) + TOMBSTONE_SECONDS)},
                },
            )
        except (ClientError, BotoCoreError) as error:  # a later confirm answers 404: still nothing counted
            self._obs.logger.warning(
                "could not leave an expired hold's tombstone", extra={"error": repr(error)}
            )

    def reclaim(self, account_id: str, kind: str, *, org: str | None = None, own: bool = True) -> Reclaimed:
        """Expire the expired holds of ``kind`` that may block an admission refused for room,
        before it is judged again (``reclaimable``): each through ``_expire``, the conditional
        claim of that hold's own item, whichever member's it is."""
        try:
            found = self.reclaimable(account_id, kind, org=org, own=own)
        except (ClientError, BotoCoreError):  # (throttled, say) nothing released: judged again
            return Reclaimed(0, gave_up=True)
        outcomes: list[bool | None] = []
        in_flight: list[Item] = []  # claimed by another request's expiry (or found so)
        for entry in found:
            if items.state_of(entry) != items.LIVE:
                in_flight.append(entry)
                continue
            outcome = self._try_to_expire(holder_of(entry), str(entry["resource_id"]["S"]), entry)
            if outcome is True:
                self._obs.count("HoldsReclaimed")
            elif outcome is False:  # refused: confirmed, resized, or claimed by another
                in_flight.append(entry)
                continue
            outcomes.append(outcome)
        outcomes += self._released_by_others(in_flight[:CLAIMS_WAITED_FOR])
        return Reclaimed(outcomes.count(True), gave_up=None in outcomes)

    def _released_by_others(self, entries: list[Item]) -> list[bool | None]:
        """For expired holds this reclaim could not claim: whether each was let go by another
        request's expiry (a concurrent refusal's, the sweeper's), waited for together while
        those claims stand (the Waiter's bound). True: gone, its units released; False: not an
        expiry's after all (confirmed, resized, or its owner's delete: nothing to judge again
        for); None: another's expiry still releasing it after the wait (perhaps dead: its
        takeover after the grace period finishes it), or unread: its units may still hold the
        room, so given up, and the refusal answers 503 (review 64: before, 409 to every
        concurrent create but the one whose expiry released the hold, though the room was
        there a few milliseconds later)."""
        known: dict[int, bool] = {}

        def settled() -> bool | None:
            for n, entry in enumerate(entries):
                if n not in known:
                    answer = self._let_go(entry)
                    if answer is not None:
                        known[n] = answer
            return True if len(known) == len(entries) else None

        if entries:
            with contextlib.suppress(ClientError, BotoCoreError):  # (those unread: None, given up)
                self._fx.waiter.until(settled)
        return [known.get(n) for n in range(len(entries))]

    def _let_go(self, entry: Item) -> bool | None:
        """True: the hold ``entry`` names is gone; None: an expiry's claim of it stands; False:
        anything else (it holds its units as a resource, or its owner's delete does)."""
        item = self._table.get(holder_of(entry), str(entry["resource_id"]["S"]), kind=items.kind_of(entry))
        if item is None or items.incarnation_of(item) != items.incarnation_of(entry):
            return True
        if items.state_of(item) == items.DELETING and "expired" in item:
            return None
        return False

    def _try_to_expire(self, account_id: str, rid: str, seen: Item) -> bool | None:
        """``_expire`` for a reclaim: a store error on one hold (its claim throttled, say: nothing
        applied, or a resend botocore makes and ``_expire`` recognises) gives that hold up, and the
        admission is judged again with what the others released (review 60: before, the error
        ended the request as 429 though the holds released before it made room)."""
        try:
            return self._expire(account_id, rid, seen)
        except (ClientError, BotoCoreError, DomainError):
            return None

    def reclaimable(
        self, account_id: str, kind: str, *, org: str | None = None, own: bool = True
    ) -> list[Item]:
        """Expired holds of ``kind`` (index entries), each once, up to RECLAIM_PAGE: ``own``, the
        account's (one Query of the HoldIndex); ``org`` (a refusal at that organization), its
        members' too, the account's among them (one Query of the OrgHoldIndex)."""
        found = self.expired(account_id, kind) if own else []
        if org is not None:
            found += self._in_org_besides(org, kind, found)
        return found[:RECLAIM_PAGE]

    def _in_org_besides(self, org: str, kind: str, found: list[Item], *, more: bool = False) -> list[Item]:
        """The organization's expired holds of ``kind`` but those in ``found`` (``more``: read
        as many more as ``found`` holds, so a page of others is left once they are taken out)."""
        seen = {_hold_key(i) for i in found}
        besides = len(seen) if more else 0
        return [i for i in self.expired_in_org(org, kind, besides=besides) if _hold_key(i) not in seen]

    def expired_units(
        self, account_id: str, kind: str, *, org: str | None = None, own: bool = True, in_turn: bool = False
    ) -> tuple[int, int]:
        """Units a reclaim would release now (a dry run refused for room judges without them):
        the account's, and (``org``) its organization's, the account's among them (``in_turn``:
        as a create refused at its account, then at its organization, reclaims them: a page of
        the account's, then a page of the organization's apart). Each entry is
        read back (a GetItem per expired hold, on a dry run refused for room only): the index
        does not show a resize in flight, which the expiry's claim (H2) passes over (review 60:
        counted, the dry run answered would_admit where the request was refused)."""
        if in_turn and org is not None:
            # the account's page, then a page of the organization's apart: the request's second
            # reclaim no longer finds the first's in the index (expired), so neither is counted twice
            first = self.reclaimable(account_id, kind)
            found = first + self._in_org_besides(org, kind, first, more=True)[:RECLAIM_PAGE]
        else:
            found = self.reclaimable(account_id, kind, org=org, own=own)
        live = [i for i in found if items.state_of(i) == items.LIVE and self._expirable(i)]
        # and those another request's expiry is releasing (a request would wait for them; one
        # already gone is no longer counted anywhere: its read says so)
        claimed = [i for i in found if items.state_of(i) != items.LIVE][:CLAIMS_WAITED_FOR]
        releasing = live + [i for i in claimed if self._let_go(i) is None]
        mine = sum(items.units_of(i) for i in releasing if holder_of(i) == account_id)
        return mine, sum(items.units_of(i) for i in releasing)

    def _expirable(self, entry: Item) -> bool:
        """What H2 would claim: the entry's incarnation, live, its deadline, no resize in flight."""
        item = self._table.get(holder_of(entry), str(entry["resource_id"]["S"]), kind=items.kind_of(entry))
        return (
            item is not None
            and items.incarnation_of(item) == items.incarnation_of(entry)
            and items.state_of(item) == items.LIVE
            and items.hold_until_of(item) == items.hold_until_of(entry)
            and not items.resizing(item)
        )

    def expired(self, account_id: str, kind: str) -> list[Item]:
        """The account's holds of ``kind`` past their deadline (HoldIndex entries), up to
        RECLAIM_PAGE. The index holds every kind of the account and a Query's limit applies
        before its filter, so a page can be all other kinds' expired holds: it pages on, up to
        RECLAIM_PAGES (before, 100 expired holds of another kind hid this kind's from every
        refusal until the sweeper's run: hostile pass of review 35)."""
        return self._expired_in(HOLD_INDEX, "hold_account", account_id, kind)

    def expired_in_org(self, org: str, kind: str, *, besides: int = 0) -> list[Item]:
        """The organization's members' holds of ``kind`` past their deadline (OrgHoldIndex
        entries), up to RECLAIM_PAGE (and ``besides`` more: those a dry run leaves out, as
        already counted), paged as ``expired``."""
        return self._expired_in(ORG_HOLD_INDEX, "hold_org", org, kind, want=RECLAIM_PAGE + besides)

    def _expired_in(self, index: str, key: str, owner: str, kind: str, *, want: int = 0) -> list[Item]:
        want = want or RECLAIM_PAGE
        query: dict[str, Any] = {
            "TableName": self._table.name,
            "IndexName": index,
            "KeyConditionExpression": f"{key} = :owner AND hold_until <= :now",
            # live, and claims (an expiry's in flight, whose release a refusal waits for: review
            # 64), the live first: a dead expiry's claim keeps its entry until its takeover, and
            # a page of those hid a live expired hold behind them (review 60's suspicion, tested)
            "FilterExpression": "kind = :kind AND #state IN (:live, :deleting)",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {
                ":owner": {"S": owner},
                ":now": items.epoch_number(self._fx.clock()),
                ":kind": {"S": kind},
                ":live": {"S": items.LIVE},
                ":deleting": {"S": items.DELETING},
            },
            "Limit": RECLAIM_PAGE,
        }
        live: list[Item] = []
        claimed: list[Item] = []
        for _ in range(RECLAIM_PAGES):
            page = self._table.clients.dynamodb.query(**query)
            for item in page.get("Items", []):
                (live if items.state_of(item) == items.LIVE else claimed).append(dict(item))
            if len(live) >= want or "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return (live + claimed)[:want]

    def sweep(self) -> int:
        """Expire every hold whose deadline passed (the sweeper, each run): a Scan of the sparse
        HoldIndex, so it reads the holds there are, not the table."""
        expired, start = 0, None
        while True:
            scan: dict[str, Any] = {
                "TableName": self._table.name,
                "IndexName": HOLD_INDEX,
                "FilterExpression": "hold_until <= :now",
                "ExpressionAttributeValues": {":now": items.epoch_number(self._fx.clock())},
            }
            if start:
                scan["ExclusiveStartKey"] = start
            page = self._table.clients.dynamodb.scan(**scan)
            for item in page.get("Items", []):
                expired += self.expire(str(item["hold_account"]["S"]), str(item["resource_id"]["S"]), item)
            start = page.get("LastEvaluatedKey")
            if not start:
                return expired

    # ---- reads --------------------------------------------------------------------------------------
    def held_units(self, account_id: str) -> dict[str, int]:
        """Units of the account's holds not confirmed yet, by kind (one Query of the HoldIndex)."""
        held: dict[str, int] = {}
        start = None
        while True:
            query: dict[str, Any] = {
                "TableName": self._table.name,
                "IndexName": HOLD_INDEX,
                "KeyConditionExpression": "hold_account = :account",
                "ExpressionAttributeValues": {":account": {"S": account_id}},
            }
            if start:
                query["ExclusiveStartKey"] = start
            page = self._table.clients.dynamodb.query(**query)
            for item in page.get("Items", []):
                if items.visible(item):
                    kind = items.kind_of(item)
                    held[kind] = held.get(kind, 0) + items.units_of(item)
            start = page.get("LastEvaluatedKey")
            if not start:
                return held
