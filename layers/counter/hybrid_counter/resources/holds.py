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
that organization's members' (a Query of each key of the sparse ``OrgHoldIndex``, by
``hold_org``, which a member's hold carries beside ``hold_account`` and loses with it: one key for
an organization never split, 4 S for one split over S), and is judged again, so an
expired hold blocks a create for no longer than that request. Each expiry is the same
conditional claim of that member's item, so whoever expires a hold (its account's request,
another member's, the sweeper) decides nothing new: of it and a confirm, a DELETE, a resize or
another expiry, the one item's conditions let exactly one apply. An expiry leaves a small tombstone
(``EXPIRED#<kind>#<id>``, removed by TTL after a week), so a confirm that comes after the item
is gone still answers HoldExpired rather than 404.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
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
from hybrid_counter.keys import (
    EXPIRED_PREFIX,
    account_pk,
    all_org_hold_keys,
    epoch_of,
    iso_utc,
    org_usage_keys,
    parse_account_pk,
)
from hybrid_counter.orgs.counters import org_counter_items
from hybrid_counter.resources import items
from hybrid_counter.resources.delete import Claim
from hybrid_counter.resources.hold_levels import HoldKey, HoldLevels
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
# Other requests' releases (claims, resizes) of expired holds a refusal waits for, at most
CLAIMS_WAITED_FOR = 10
# A claim (or a resize) of an expired hold younger than this is waited for (its release lands
# within milliseconds); an older one is given up at once (its process likely dead: the takeover
# or the resize's settlement after the grace period)
CLAIM_FRESH_SECONDS = 5.0
GONE, WAIT, GIVE_UP, NOTHING = "gone", "wait", "give up", "nothing"
RECLAIM_PAGES = 10


@dataclass(frozen=True)
class Reclaimed:
    """What a refused admission's reclaim did: holds released (expired by it, or by another
    request's expiry it waited for), and the units of those it gave up, by holder (an expiry
    reverted, left, or another's still standing after the wait: those may still hold the room;
    ``unknown``: the search itself failed)."""

    expired: int
    # (holder, kind, id) -> the units it may still hold at its organization (its account's, for
    # an account in none): hold_levels.py
    given_up: Mapping[HoldKey, int] = field(default_factory=dict)
    unknown: bool = False
    # of the refusing account's own given up, the units they may still hold at the account (a
    # claim whose release there applied: none; a resize moved there: its new size)
    at_account: Mapping[HoldKey, int] = field(default_factory=dict)

    @property
    def gave_up(self) -> bool:
        return self.unknown or bool(self.given_up)

    def and_then(self, more: Reclaimed) -> Reclaimed:
        """Both reclaims' outcomes: a hold given up by both counted once (review 67: the second
        reclaim, at the organization, meets the account's own holds again; summed, a certain
        409 became 503)."""
        return Reclaimed(
            self.expired + more.expired,
            {**self.given_up, **more.given_up},
            self.unknown or more.unknown,
            {**self.at_account, **more.at_account},
        )

    def refused_again(self, refused: LimitExceeded, account_id: str) -> Exception:
        """The answer to the admission refused again: 503 if the expired holds it gave up may be
        what holds the room (review 57: 409), that is, if releasing them could let it in (at its
        account: its own; at its organization: any member's; review 66: before, any hold given
        up made a certain 409 a 503, for up to the grace period); else the refusal."""
        if self.unknown:
            return _retry()
        at_org = refused.scope == "organization"
        units = sum(
            n if at_org else self.at_account.get(key, n)
            for key, n in self.given_up.items()
            if at_org or key[0] == account_id
        )
        if units and refused.used - units + refused.units <= refused.limit:
            return _retry()
        return refused


def _live_first(found: list[Item]) -> list[Item]:
    return [i for i in found if items.state_of(i) == items.LIVE] + [
        i for i in found if items.state_of(i) != items.LIVE
    ]


def _retry() -> StoreUnavailable:
    return StoreUnavailable("an expired hold could not be released in time; retry the request")


def holder_of(entry: Item) -> str:
    """The account whose hold an index entry (HoldIndex's or OrgHoldIndex's) is: its table key."""
    return parse_account_pk(str(entry["pk"]["S"]))


def _hold_key(entry: Item) -> HoldKey:
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

    def released_by_an_expiry(self, account_id: str, kind: str, rid: str, *, since: float) -> bool:
        """An expiry left its tombstone for ``rid`` after ``since`` (by its clock)."""
        found = self._tombstone(account_id, kind, rid)
        return found is not None and found.get("expired_at", {}).get("S", "") > iso_utc(since)

    def _expired_here(self, account_id: str, kind: str, rid: str) -> bool:
        return self._tombstone(account_id, kind, rid) is not None

    def _tombstone(self, account_id: str, kind: str, rid: str) -> Item | None:
        found: Item | None = self._table.clients.dynamodb.get_item(
            TableName=self._table.name, Key=tombstone_key(account_id, kind, rid), ConsistentRead=True
        ).get("Item")
        return found

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

    def reclaim(
        self,
        account_id: str,
        kind: str,
        *,
        org: str | None = None,
        own: bool = True,
        org_keys: int | None = None,
    ) -> Reclaimed:
        """Expire the expired holds of ``kind`` that may block an admission refused for room,
        before it is judged again (``reclaimable``): each through ``_expire``, the conditional
        claim of that hold's own item, whichever member's it is; and those another request is
        already releasing (an expiry, its owner's delete, a takeover) or resizing, waited for
        (``_released_by_others``)."""
        try:
            found = self.reclaimable(account_id, kind, org=org, own=own, org_keys=org_keys)
        except (ClientError, BotoCoreError):  # (throttled, say) nothing released: judged again
            return Reclaimed(0, unknown=True)
        released, given_up, others = 0, dict[HoldKey, int](), []
        for entry in found:
            holder = holder_of(entry)
            if items.state_of(entry) != items.LIVE:
                others.append(entry)
                continue
            outcome = self._try_to_expire(holder, str(entry["resource_id"]["S"]), entry)
            if outcome is True:
                self._obs.count("HoldsReclaimed")
                released += 1
            elif outcome is None:
                given_up[_hold_key(entry)] = items.units_of(entry)
            else:  # refused: confirmed, resized, or claimed by another meanwhile
                others.append(entry)
        read: dict[HoldKey, Item | None] = {}
        by_others = self._released_by_others(others, read)
        given = {**given_up, **by_others.given_up}
        if not given:
            return Reclaimed(released + by_others.expired)
        # what each still holds at each level, as its counters say (hold_levels.py): at the
        # organization, any member's; at the account, only the refusing account's own (review 70
        # F4: another member's account counter cannot change the answer)
        levels = HoldLevels(self._table, self._deletes.counters)
        at_org: dict[HoldKey, int] = {}
        at_account: dict[HoldKey, int] = {}
        for key, units in given.items():
            try:
                item = read[key] if key in read else self._table.get(key[0], key[2], kind=key[1])
            except (ClientError, BotoCoreError):
                at_org[key] = units  # (not read: held, at the units its entry shows)
                continue
            at_org[key] = levels.at_org(key, item, cautious=True)
            if key[0] == account_id:
                at_account[key] = levels.at_account(key, item, cautious=True)
        return Reclaimed(released + by_others.expired, at_org, at_account=at_account)

    def _released_by_others(self, entries: list[Item], read: dict[HoldKey, Item | None]) -> Reclaimed:
        """Expired holds this reclaim could not claim: each read once (``_let_go``), and those
        another request's expiry claimed within CLAIM_FRESH_SECONDS (a concurrent refusal's, the
        sweeper's: its release lands within milliseconds) waited for together, up to
        CLAIMS_WAITED_FOR of them, within the Waiter's bound. Gone: released. An expiry's claim
        older than that, one beyond those waited for, or one still standing after the wait:
        given up, its units may still hold the room (perhaps dead: its takeover after the grace
        period finishes it). A claim (an expiry's, its owner's delete, a takeover) and a resize
        under way are waited for alike (``_let_go``); anything else (confirmed): nothing. Each
        item's last read is left in ``read``. Review 64: before,
        409 to every concurrent create but the one whose expiry released the hold, though the
        room was there milliseconds later; review 66: an expiry's claim beyond the waits was
        dropped."""
        released, given_up = 0, dict[HoldKey, int]()
        waiting = list(entries)

        def settled() -> bool | None:
            """One read of each still waited for: those no longer WAIT are settled."""
            nonlocal released
            for entry in list(waiting):
                seen = self._let_go(entry, read=read)
                if seen != WAIT:
                    waiting.remove(entry)
                    if seen == GONE:
                        released += 1
                    elif seen == GIVE_UP:
                        given_up[_hold_key(entry)] = items.units_of(entry)
            return True if not waiting else None

        settled()  # each read once (a store error here is the caller's)
        beyond = waiting[CLAIMS_WAITED_FOR:]
        del waiting[CLAIMS_WAITED_FOR:]
        if waiting:
            with contextlib.suppress(ClientError, BotoCoreError):  # (those unread: given up)
                self._fx.waiter.until(settled)
        for entry in waiting + beyond:
            given_up[_hold_key(entry)] = items.units_of(entry)
        return Reclaimed(released, given_up)

    def _let_go(
        self, entry: Item, *, expire: bool = True, read: dict[HoldKey, Item | None] | None = None
    ) -> str:
        """What became of the hold ``entry`` names, as its item reads now: GONE (its units
        released); WAIT (claimed within CLAIM_FRESH_SECONDS by another request's release: an
        expiry's, its owner's delete, a takeover; its release still to land); GIVE_UP (a claim
        older than that, or an expiry this read could not finish); NOTHING (it holds its units
        as a resource: confirmed, or resized). A hold live again past its deadline (another's
        expiry reverted: review 66) is expired here (``expire``; a dry run only counts it).
        Every claim of an expired hold is a release under way: a create linearized before its
        owner's delete would have expired the hold and taken the room, and one after it finds the
        room free, so a 409 while the owner's delete is in flight fits no order (the explorer's
        member holds, 2026-11-27; before, since review 66, only an expiry's claim was waited
        for and an owner's delete answered 409 at once)."""
        holder, rid = holder_of(entry), str(entry["resource_id"]["S"])
        item = self._table.get(holder, rid, kind=items.kind_of(entry))
        if read is not None:
            read[_hold_key(entry)] = item
        if item is None or items.incarnation_of(item) != items.incarnation_of(entry):
            return GONE
        state, until = items.state_of(item), items.hold_until_of(item)
        if state == items.DELETING:
            return self._fresh(item, "deleting_since")
        if not (state == items.LIVE and until is not None and until <= self._fx.clock()):
            return NOTHING
        if items.resizing(item):
            # H2 passes over a hold under a resize: its resize, under way, is waited for as a
            # claim is, then the hold expired (review 69 F1: before, 409 at once, for a dead
            # resize until its settlement; no order explains it)
            return self._fresh(item, "resizing_since")
        return self._expired_here_now(holder, rid, item) if expire else WAIT

    def _expired_here_now(self, holder: str, rid: str, item: Item) -> str:
        """A hold live again past its deadline, expired by this reclaim: GONE, or GIVE_UP (a store
        error), or WAIT (claimed by yet another meanwhile: read again)."""
        outcome = self._try_to_expire(holder, rid, item)
        if outcome is True:
            self._obs.count("HoldsReclaimed")
            return GONE
        return GIVE_UP if outcome is None else WAIT

    def _fresh(self, item: Item, since: str) -> str:
        """WAIT for a claim (or a resize) made within CLAIM_FRESH_SECONDS, else GIVE_UP."""
        age = self._fx.clock() - epoch_of(items.since(item, since) or iso_utc(0))
        return WAIT if age <= CLAIM_FRESH_SECONDS else GIVE_UP

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
        self,
        account_id: str,
        kind: str,
        *,
        org: str | None = None,
        own: bool = True,
        org_keys: int | None = None,
    ) -> list[Item]:
        """Expired holds of ``kind`` (index entries), each once, up to RECLAIM_PAGE: ``own``, the
        account's (one Query of the HoldIndex); ``org`` (a refusal at that organization), its
        members' too, the account's among them (one Query of the OrgHoldIndex)."""
        found = self.expired(account_id, kind) if own else []
        if org is not None:
            found += self._in_org_besides(org, kind, found, keys=org_keys)
        # the live ones first, whichever index: claims (their release under way, or dead) never
        # push a live expired hold out of the page (review 66: the account's claims did, the
        # organization's live holds after them)
        return _live_first(found)[:RECLAIM_PAGE]

    def _in_org_besides(
        self, org: str, kind: str, found: list[Item], *, more: bool = False, keys: int | None = None
    ) -> list[Item]:
        """The organization's expired holds of ``kind`` but those in ``found`` (``more``: read
        as many more as ``found`` holds, so a page of others is left once they are taken out)."""
        seen = {_hold_key(i) for i in found}
        besides = len(seen) if more else 0
        in_org = self.expired_in_org(org, kind, besides=besides, keys=keys)
        return [i for i in in_org if _hold_key(i) not in seen]

    def expired_units(
        self,
        account_id: str,
        kind: str,
        *,
        org: str | None = None,
        own: bool = True,
        in_turn: bool = False,
        org_keys: int | None = None,
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
            found = (
                first
                + _live_first(self._in_org_besides(org, kind, first, more=True, keys=org_keys))[:RECLAIM_PAGE]
            )
        else:
            found = self.reclaimable(account_id, kind, org=org, own=own, org_keys=org_keys)
        live = [i for i in found if items.state_of(i) == items.LIVE and self._expirable(i)]
        # and those another request is releasing, or resizing (a request would wait for them;
        # one already gone is no longer counted anywhere: its read says so)
        read: dict[HoldKey, Item | None] = {}
        waited = [i for i in found if i not in live and self._let_go(i, expire=False, read=read) == WAIT]
        # (what each holds at each level now, as the counters say: a claim whose release applied
        # there, nothing; a resize moved there, its new size: hold_levels.py; reviews 69 F2 and 70)
        levels = HoldLevels(self._table, self._deletes.counters)
        mine = sum(items.units_of(i) for i in live if holder_of(i) == account_id)
        everyone = sum(items.units_of(i) for i in live)
        for i in waited[:CLAIMS_WAITED_FOR]:
            key = _hold_key(i)
            everyone += levels.at_org(key, read.get(key), cautious=False)
            if key[0] == account_id:
                mine += levels.at_account(key, read.get(key), cautious=False)
        return mine, everyone

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

    def expired_in_org(self, org: str, kind: str, *, besides: int = 0, keys: int | None = None) -> list[Item]:
        """The organization's members' holds of ``kind`` past their deadline (OrgHoldIndex
        entries), up to RECLAIM_PAGE (and ``besides`` more: those a dry run leaves out, as
        already counted), paged as ``expired`` under each of its ``keys`` (as the refusal's
        picture of its counter items says, org_level.hold_keys; None: ``org_hold_keys``), the
        live ones of every key first; it stops once it has a page of live ones."""
        want = RECLAIM_PAGE + besides
        live: list[Item] = []
        claimed: list[Item] = []
        for key in all_org_hold_keys(org, self.org_hold_keys(org, kind) if keys is None else keys):
            found = self._expired_in(ORG_HOLD_INDEX, "hold_org", key, kind, want=want - len(live))
            live += [i for i in found if items.state_of(i) == items.LIVE]
            claimed += [i for i in found if items.state_of(i) != items.LIVE]
            if len(live) >= want:
                break
        return (live + claimed)[:want]

    def org_hold_keys(self, org: str, kind: str) -> int:
        """How many OrgHoldIndex keys the organization's members' holds of ``kind`` may be under,
        where the refusal did not say (a reclaim asked for without a picture): 4 per counter item
        of the kind it has now, one consistent Query (org_level.hold_keys; the profile's
        ``usage_keys`` would not do: an organization lowered before it was recorded has more
        items than it counts, review 68)."""
        found = org_counter_items(self._table.clients, self._table.name, org).get(kind, {})
        return org_usage_keys(len(found))

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
