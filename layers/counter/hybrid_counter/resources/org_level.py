"""The organization's level of an account's creates, deletes and resizes (design.md §10).

An account that belongs to an organization has its units held twice: by its own counter item and
by its organization's (``ORG#<org>`` / ``COUNTER#<kind>#0``). Each level is admitted, released and
moved with its own conditional single-item write, in a fixed order, so no transaction is ever on
the API path:

- a create is admitted by the **organization first, then the account**: the account's admission
  is the commit point (the stream path counts and makes live a resource on its account's
  admission, as for any account); an account that refuses (at its limit, or no longer in the
  organization) has the organization's admission undone;
- a delete releases the **account first, then the organization** (resources/delete.py): a
  delete stopped between the two leaves the organization holding a slot nobody sees (the stream
  path notes the account's release, ``account_released``, and the sweeper finishes the claim past
  the grace period), never a slot given away while the resource is still visible;
- a grow is admitted by the organization first, then the account (undone at the organization if
  the account refuses); a shrink is released by the account first, then the organization.

The resource records the organization (``org``, written with the pending item: the levels that
hold its units), and the stream path marks what it saw apply at the organization's level: it
counts the resource there exactly once (``org_counted``), removes a member's claimed resource
once its release there applied, and notes a resize there (``org_resized``), or the release of an
undone create (``org_released``), on the item. A repair that finds a request dead
(older than the grace period) trusts those marks: the stream path would have made them within
its lag (the same assumption the takeover of a dead delete makes, design.md §4).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import THROTTLING_ERRORS, Attempted, Effect, error_code, transact_conditionally
from hybrid_counter.counters import Admission, AdmissionOutcome, CounterState, CounterStore, Judge, Judged
from hybrid_counter.counters.expressions import Membership
from hybrid_counter.counters.split import OVERRIDE, Basis, OwnerGone, Shard, ShardSet, shard_of_resource
from hybrid_counter.counters.state import ALLOWANCE, BASIS, ORG_EPOCH, REBASING
from hybrid_counter.errors import InProgress, LimitBelowUsage, LimitExceeded, StoreUnavailable, Throttled
from hybrid_counter.keys import member_token, org_counter_key, org_resize_token, org_usage_keys, profile_key
from hybrid_counter.orgs.counters import creation_in, of_creation, org_is, org_lives, org_split_counter
from hybrid_counter.resources import items
from hybrid_counter.resources.table import Item, ResourceTable
from hybrid_counter.usage import OrgAnswer

if TYPE_CHECKING:
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability

ATTEMPTS = 8  # of a split counter's admission: reads, moves, rebases, writes
LOWERING_SECONDS = 30.0  # how long a lowering's basis stands before its change is written

Guard = tuple[str, dict[str, str], dict[str, Any]]  # a condition on shard 0, its names and values
SINGLE_GUARD: Guard = (
    "attribute_not_exists(#g_allowance) AND attribute_not_exists(#g_rebasing)",
    {"#g_allowance": ALLOWANCE, "#g_rebasing": REBASING},
    {},
)


def split_guard(limit: int) -> Guard:
    return (
        "#g_basis <= :g_limit AND attribute_not_exists(#g_rebasing)",
        {"#g_basis": BASIS, "#g_rebasing": REBASING},
        {":g_limit": {"N": str(limit)}},
    )


def hold_keys(picture: ShardSet) -> int:
    """The OrgHoldIndex keys a member's hold of the kind is put under, and a refusal whose
    picture this is reads: 1 for a counter of one item, 4 per shard item for a split one
    (keys.org_hold_key). Shard items are never removed while the organization stands (fewer
    shards keep them; a split counter never goes back to one item), so a picture read later
    counts at least as many as the one any hold already put was keyed by."""
    return org_usage_keys(len(picture.shards))


def held(picture: ShardSet) -> bool:
    """Whether a hold was ever admitted (or counted) on any of the organization's counter items
    of the kind: a refusal there looks for its members' expired holds only then."""
    return any(shard.state.holds_used for shard in picture.shards.values())


ShardWrite = Callable[[Shard], Attempted]  # one conditional write of units on a shard, as read


class OrgView(Protocol):
    """What admissions at organizations read through caches (plans/limits.py)."""

    def org_judge(self, org_id: str, kind: str) -> Judge: ...
    def org_epoch(self, org_id: str) -> int | None: ...
    def know_creation(self, org_id: str, creation: int) -> None: ...
    def org_shards(self, org_id: str) -> int: ...
    def org_plan_basis(self, org_id: str, kind: str) -> Basis: ...
    def forget(
        self, account_id: str | None = None, plan_id: str | None = None, org_id: str | None = None
    ) -> None: ...
    def seen_profile(self, account_id: str, item: dict[str, Any]) -> None: ...


class ReleasesOnly:
    """For flows that only release at an organization (deletes, repairs): never asked to judge."""

    def org_judge(self, org_id: str, kind: str) -> Judge:
        def judged(_: CounterState) -> Judged:
            raise AssertionError(
                f"an admission at organization {org_id} ({kind}) in a flow that only releases"
            )

        return judged

    def org_epoch(self, org_id: str) -> int | None:
        raise AssertionError("a flow that only releases never opens a counter item")

    def know_creation(self, org_id: str, creation: int) -> None:
        raise AssertionError("a flow that only releases never judges by an organization's plan")

    def org_shards(self, org_id: str) -> int:
        raise AssertionError("a flow that only releases never chooses a shard")

    def org_plan_basis(self, org_id: str, kind: str) -> Basis:
        raise AssertionError("a flow that only releases never lays allowances out")

    def forget(
        self, account_id: str | None = None, plan_id: str | None = None, org_id: str | None = None
    ) -> None:
        return None

    def seen_profile(self, account_id: str, item: dict[str, Any]) -> None:
        return None


releases_only = ReleasesOnly()


@dataclass(frozen=True)
class OrgSeen:
    """The organization's counter as a create read it before writing: the shard its admission
    goes to (recorded on the pending item), every shard item of the kind, and which creation of
    the organization it was judged by (its ``epoch_base``; None: none, by the cache's account)."""

    shard: int
    picture: ShardSet
    epoch: int | None = None
    usage_keys: int = 1  # the OrgUsageIndex keys its members spread over now (keys.org_usage_keys)

    @property
    def state(self) -> CounterState:
        return self.picture.get(self.shard).state

    @property
    def hold_keys(self) -> int:
        return hold_keys(self.picture)


class OrgLevel:
    def __init__(
        self,
        table: ResourceTable,
        account_counters: CounterStore,
        view: OrgView,
        effects: Effects,
        obs: Observability,
        *,
        grace_seconds: float,
    ) -> None:
        self._table = table
        self._account_counters = account_counters
        self._view = view
        self._fx = effects
        self._obs = obs
        self._grace = grace_seconds
        self._by_shard: dict[int, CounterStore] = {}
        self.counters = self.shard(0)
        self.splits = org_split_counter(table.name, table.clients, obs, effects)

    def shard(self, n: int) -> CounterStore:
        """Single-item writes on shard ``n`` of an organization's counter (releases, the single
        item's admission, reads)."""
        if n not in self._by_shard:
            self._by_shard[n] = CounterStore(
                self._table.name,
                0,
                self._table.clients,
                self._obs,
                self._fx,
                default_kind=self._account_counters.default_kind,
                key_of=lambda org, kind: org_counter_key(org, kind=kind, shard=n),
            )
        return self._by_shard[n]

    # ---- membership --------------------------------------------------------------------------------
    def membership(self, account_id: str, kind: str, state: CounterState) -> Membership:
        """The organization the account belongs to for this kind, as the create judges it: its
        counter item says (every admission on it is conditional on that); where it does not say
        yet (a kind's first create), its profile (a consistent read: paid once a kind)."""
        if state.org_known:
            return Membership(state.org, state.org_epoch if state.org else None)
        profile = (
            self._table.clients.dynamodb.get_item(
                TableName=self._table.name, Key=profile_key(account_id), ConsistentRead=True
            ).get("Item")
            or {}
        )
        self._view.seen_profile(account_id, profile)  # (the plan it is on: judged by it too)
        org = profile.get("org_id", {}).get("S")
        epoch = profile.get(ORG_EPOCH, {}).get("N")
        return Membership(org, None if org is None or epoch is None else int(epoch))

    def register(self, account_id: str, kind: str, judged: Membership) -> bool:
        """Before a kind's first create writes anything: the kind registered on the account's
        profile, which returns the membership in the same write (a membership change is
        conditional on the registered kinds, orgs/store.py). False if the membership is no
        longer the one the create was judged by (judge it again)."""
        response = self._table.clients.dynamodb.update_item(
            TableName=self._table.name,
            Key=profile_key(account_id),
            UpdateExpression="ADD kinds :kind",
            ExpressionAttributeValues={":kind": {"SS": [kind]}},
            ReturnValues="ALL_NEW",
        )
        return response.get("Attributes", {}).get("org_id", {}).get("S") == judged.org

    # ---- admissions --------------------------------------------------------------------------------
    def read(self, org: str, kind: str, shard: int = 0) -> CounterState:
        return self.shard(shard).read(org, kind=kind)

    def precheck(self, org: str, kind: str, units: int, resource_id: str, *, epoch: int | None) -> OrgSeen:
        """The organization's counter as read before anything is written, and the shard the
        create's admission goes to; LimitExceeded (scope organization) if the units do not fit.
        ``epoch``: the creation of the organization its membership names (None: not named, the
        account joined before members recorded it; then as the cache has it)."""
        if epoch is None:
            epoch = self._view.org_epoch(org)
            if epoch is None:  # cached as not there, and named by a membership: read it again
                self._view.forget(org_id=org)
                epoch = self._view.org_epoch(org)
        else:  # judged by that creation's plan and shards, whatever this process cached
            self._view.know_creation(org, epoch)
        picture = self.splits.read(org, kind)
        if self._single(org, picture):
            state = picture.get(0).state
            judged = self._view.org_judge(org, kind)(state)
            if not state.admits(judged.limit, units):
                self._obs.count("LimitExceeded")
                raise LimitExceeded(
                    judged.limit,
                    state.used,
                    kind,
                    units,
                    scope="organization",
                    org=org,
                    org_holds=state.holds_used,
                    org_hold_keys=hold_keys(picture),
                )
            return OrgSeen(0, picture, epoch)
        shards = self._view.org_shards(org)
        seen = OrgSeen(shard_of_resource(resource_id, shards), picture, epoch, org_usage_keys(shards))
        basis = picture.basis
        if basis is not None and not picture.frozen and self._wanted(org, kind, picture) is None:
            room = sum(max(0, s.room) for s in picture.shards.values()) + max(0, basis.limit - picture.claims)
            if room < units:
                self._obs.count("LimitExceeded")
                raise LimitExceeded(
                    basis.limit,
                    picture.used,
                    kind,
                    units,
                    scope="organization",
                    org=org,
                    org_holds=held(picture),
                    org_hold_keys=hold_keys(picture),
                )
        return seen

    def elsewhere(
        self, org: str, kind: str, tried: set[int], units: int, epoch: int | None
    ) -> OrgSeen | None:
        """After a create's admission on a split counter's shard was throttled (nothing applied):
        another shard to try, at random among those not tried yet that have room for it (any not
        tried if none has), or None (a single item, or every shard tried). A hot shard then sheds
        its excess to the others, as a split is meant to: a create's shard is chosen by a hash of
        its id, so S shards do not each take an even share of every second. (One more Query,
        on this path only.)"""
        shards = self._view.org_shards(org)
        if shards <= 1:
            return None
        picture = self.splits.read(org, kind)
        left = [n for n in range(shards) if n not in tried]
        if not picture.split or not left:
            return None
        roomy = [n for n in left if picture.get(n).room >= units]
        return OrgSeen(random.choice(roomy or left), picture, epoch, org_usage_keys(shards))

    def would_admit(self, org: str, kind: str, units: int, creation: int | None) -> OrgAnswer:
        """A dry run at the organization: as its admission would judge now (a split counter:
        the room of its shards and what its basis holds beyond their claims, which moves and a
        reconcile would gather). ``creation``: the one its membership names, as precheck's."""
        if creation is not None:
            self._view.know_creation(org, creation)
        picture = self.splits.read(org, kind)
        basis = picture.basis
        if basis is None:
            state = picture.get(0).state
            limit = self._view.org_judge(org, kind)(state).limit
            return OrgAnswer(
                org,
                limit,
                state.used,
                units <= 0 or state.admits(limit, units),
                held(picture),
                hold_keys(picture),
            )
        wanted = self._wanted(org, kind, picture)
        if wanted is not None:  # a limit not laid out yet: judged by it, as the rebase will lay it out
            return OrgAnswer(
                org,
                wanted.limit,
                picture.used,
                units <= 0 or picture.used + units <= wanted.limit,
                held(picture),
                hold_keys(picture),
            )
        room = sum(max(0, s.room) for s in picture.shards.values()) + max(0, basis.limit - picture.claims)
        return OrgAnswer(
            org, basis.limit, picture.used, units <= 0 or units <= room, held(picture), hold_keys(picture)
        )

    def _single(self, org: str, picture: ShardSet) -> bool:
        """Its counter for the kind is one item, as every organization's is until it is split."""
        return not picture.split and not picture.frozen and self._view.org_shards(org) <= 1

    def admit(
        self,
        org: str,
        account_id: str,
        rid: str,
        incarnation: str,
        *,
        kind: str,
        units: int,
        seen: OrgSeen,
        hold: bool = False,
    ) -> Admission:
        """The organization's admission of a create's units: on its single item, one attempt as
        an account's; on a split counter, its shard's (gathering allowance first if short). A
        hold's marks the item ``holds_used``, as an account's: from then on a refusal there looks
        for its members' expired holds (holds.py), and one of an organization never held does not."""
        token = member_token(account_id, rid, incarnation)
        if seen.epoch is None:
            return self._gone(org)
        if seen.shard == 0 and self._single(org, seen.picture):
            admitted = self._admit_single(org, kind, rid, token, units=units, seen=seen, hold=hold)
            if admitted is not None:
                return admitted
            # split meanwhile: admitted on shard 0 of the split counter (if by this creation)
        write = partial(
            self.splits.admit_once, org, kind, resource_id=rid, token=token, units=units, hold=hold
        )
        try:
            return self._on_split(org, kind, seen.shard, units=units, write=write, creation=seen.epoch)
        except OwnerGone:
            return self._gone(org)  # as a single item's: judge it all again

    def _admit_single(
        self, org: str, kind: str, rid: str, token: str, *, units: int, seen: OrgSeen, hold: bool = False
    ) -> Admission | None:
        """O2 on the organization's single counter item, conditional on its having been opened by
        the creation of the organization the create was judged by (``seen.epoch``); opened first
        if it is not (a kind's first create; or an item written otherwise: an override's write, a
        rebase's). None: the counter was split meanwhile."""
        assert seen.epoch is not None
        state = seen.state
        for _ in range(2):
            if state.org_epoch is None:
                opened = self._open(org, kind, seen.epoch)
                if opened is not None:
                    return opened
            admitted = self.counters.admit(
                org,
                rid,
                token,
                state,
                kind=kind,
                units=units,
                judge=self._view.org_judge(org, kind),
                org_epoch=seen.epoch,
                hold=hold,
            )
            if admitted.outcome is not AdmissionOutcome.MOVED:
                return admitted
            state = admitted.state
            if state.in_a_split:
                return None
            if not state.exists or state.org_epoch is not None:
                # removed by DELETE /orgs, or opened by another creation of the organization
                return self._gone(org)
        return Admission(AdmissionOutcome.NOT_APPLIED, CounterState(), throttled=True)

    def _gone(self, org: str) -> Admission:
        """The organization the create was judged by is gone (deleted, perhaps created again
        under its id): forget what this process cached of it, and judge the create all again."""
        self._view.forget(org_id=org)
        return Admission(AdmissionOutcome.MOVED, CounterState())

    def _open(self, org: str, kind: str, epoch: int) -> Admission | None:
        """Before a kind's first admission at the organization: its counter item marked as opened
        by this creation of the organization (``org_epoch``; put if absent), in a transaction with
        a check that this creation lives. The single item's admission requires that mark, so no
        create judged before DELETE /orgs can make the item again after (the deletion marks the
        organization first, then removes its counter items), nor be admitted at an organization
        created again under the id. Paid once per organization and kind; its only conflicts are
        other first creates of the kind. None: the item is marked (now, or by another create
        first); MOVED: the organization is gone, being deleted or created again (the create judges
        its membership again); NOT_APPLIED: throttled or unreachable."""
        mark = {
            "Update": {
                "TableName": self._table.name,
                "Key": org_counter_key(org, kind=kind, shard=0),
                "UpdateExpression": "SET #epoch = :epoch",
                "ConditionExpression": "attribute_not_exists(#epoch)",
                "ExpressionAttributeNames": {"#epoch": ORG_EPOCH},
                "ExpressionAttributeValues": {":epoch": {"N": str(epoch)}},
            }
        }
        this_one, values = org_is(epoch)
        try:
            refused = transact_conditionally(
                self._table.clients.dynamodb,
                [mark, org_lives(self._table.name, org, this_one, values)],
                self._fx.retry,
            )
        except (ClientError, BotoCoreError) as error:
            return self._not_applied(error, "could not open the organization's counter")
        if refused is not None and refused[1] == "ConditionalCheckFailed":
            return self._gone(org)
        return None  # (or only the mark refused: the item is marked)

    def _not_applied(self, error: ClientError | BotoCoreError, what: str) -> Admission:
        """Nothing written at the organization: throttled (429) or unavailable (503)."""
        self._obs.logger.warning(what, extra={"error": repr(error)})
        throttled = isinstance(error, ClientError) and error_code(error) in THROTTLING_ERRORS
        return Admission(AdmissionOutcome.NOT_APPLIED, CounterState(), throttled=throttled)

    def _on_split(
        self, org: str, kind: str, shard: int, *, units: int, write: ShardWrite, creation: int | None = None
    ) -> Admission:
        """``units`` more on a split counter's shard (an admission, or a member resize's grow):
        its one conditional write, with allowance gathered first if the shard is short.
        ``creation``: a create's, the creation of the organization it was judged by: nothing of
        another is written, and finding another's counter raises OwnerGone (judge it all again)."""
        try:
            return self._admit_split(org, kind, shard, units=units, write=write, creation=creation)
        except Throttled:
            return Admission(AdmissionOutcome.NOT_APPLIED, CounterState(), throttled=True)
        except OwnerGone:
            raise  # the caller's to answer (an admission judged before DELETE /orgs)
        except (InProgress, StoreUnavailable, ClientError, BotoCoreError) as error:
            self._obs.logger.warning("split counter busy or unavailable", extra={"error": repr(error)})
            return Admission(
                AdmissionOutcome.NOT_APPLIED, CounterState(), throttled=isinstance(error, InProgress)
            )

    def _admit_split(
        self, org: str, kind: str, shard: int, *, units: int, write: ShardWrite, creation: int | None
    ) -> Admission:
        picture: ShardSet | None = None
        for _ in range(ATTEMPTS):
            picture = picture or self.splits.read(org, kind)
            # A shard written is the one read, at its epoch (admit_once): so of this creation. A
            # rebase's record is put only while this creation lives (its owner check).
            if creation is not None and not of_creation(picture, creation):
                raise OwnerGone("the organization was deleted (and created again) since it was judged")
            wanted = self._wanted(org, kind, picture)
            basis = picture.basis
            if self._unlaid(org, kind, picture, shard):
                target = wanted or basis or self._view.org_plan_basis(org, kind)
                self.splits.rebase(
                    org,
                    kind,
                    target,
                    shards=self._shards(org, shard),
                    favour=shard,
                    needed=partial(self._unlaid, org, kind, shard=shard),
                    creation=creation,
                )
                picture = None
                continue
            assert basis is not None
            judged = Judged(basis.limit, "override" if basis.source == OVERRIDE else "plan")
            mine = picture.get(shard)
            if mine.room >= units:
                attempt = write(mine)
                if attempt.applied:
                    return Admission(AdmissionOutcome.ADMITTED, picture.total(), judged=judged)
                if attempt.effect is Effect.CONDITION_FAILED:
                    picture = None
                    continue
                return self._not_admitted(attempt, picture, judged)
            spare = sum(max(0, s.room) for s in picture.shards.values())
            free = basis.limit - picture.claims
            if spare >= units:
                self.splits.gather(org, kind, picture, shard, units)
            elif free > 0 and spare + free >= units:
                # lost allowance, or room released on shards that were over theirs: hand it out
                self.splits.rebase(
                    org,
                    kind,
                    basis,
                    shards=self._shards(org, shard),
                    favour=shard,
                    needed=partial(self._short, org, kind, shard=shard, units=units),
                    creation=creation,
                )
            else:
                return Admission(
                    AdmissionOutcome.REJECTED,
                    picture.total(),
                    judged=judged,
                    holds_used=held(picture),
                    items=len(picture.shards),
                )
            picture = None
        self._obs.count("SplitAdmissionGaveUp")
        return Admission(
            AdmissionOutcome.NOT_APPLIED, picture.total() if picture else CounterState(), throttled=True
        )

    def _unlaid(self, org: str, kind: str, picture: ShardSet, shard: int) -> bool:
        """The shard cannot admit before a rebase: not laid out for the limit wanted, not split,
        or frozen."""
        return (
            self._wanted(org, kind, picture) is not None
            or picture.basis is None
            or picture.frozen
            or not picture.get(shard).split
        )

    def _short(self, org: str, kind: str, picture: ShardSet, shard: int, units: int) -> bool:
        """A reconcile is still what the shard needs: no room, and the basis holds more than the
        claims (or the picture is not laid out at all)."""
        basis = picture.basis
        if basis is None or self._unlaid(org, kind, picture, shard):
            return True
        return picture.get(shard).room < units and basis.limit > picture.claims

    # ---- laying allowances out (operators' changes) -------------------------------------------------
    def reshard(self, org: str, kind: str, shards: int, *, creation: int | None = None) -> None:
        """The kind's counter split over at least ``shards`` items (a single item stays one when
        asked for 1). ``creation``: the creation of the organization the change was asked of;
        another's counter is never split by it (OwnerGone: review 68, a PUT stalled past a
        DELETE /orgs and the id's creation again split the new creation's counter over its S)."""
        for _ in range(ATTEMPTS):
            picture = self.splits.read(org, kind)
            if shards <= 1 and not picture.split and not picture.frozen:
                return
            if not self._unsplit(org, kind, shards, picture):
                return
            wanted = self._wanted(org, kind, picture)
            target = wanted or picture.basis or self._view.org_plan_basis(org, kind)
            self.splits.rebase(
                org,
                kind,
                target,
                shards=shards,
                needed=partial(self._unsplit, org, kind, shards),
                creation=creation,
            )
        raise InProgress(
            "the organization's counter kept changing while it was being split; retry the request"
        )

    def _unsplit(self, org: str, kind: str, shards: int, picture: ShardSet) -> bool:
        laid_out = picture.split and all(picture.get(n).split for n in range(shards))
        return not laid_out or picture.frozen or self._wanted(org, kind, picture) is not None

    def rebalance(self, org: str, kind: str) -> None:
        """After a change of its limit: a split counter's allowances laid out for the new one."""
        for _ in range(ATTEMPTS):
            picture = self.splits.read(org, kind)
            if not picture.split and not picture.frozen:
                return  # a single item: its admissions judge by the limit itself
            wanted = self._wanted(org, kind, picture, settled=True)
            if wanted is None and not picture.frozen:
                return
            self.splits.rebase(
                org,
                kind,
                wanted or picture.basis or self._view.org_plan_basis(org, kind),
                shards=1,
                needed=lambda p: p.frozen or self._wanted(org, kind, p, settled=True) is not None,
            )
        raise InProgress("the organization's counter kept changing; retry the request")

    def lower_first(self, org: str, kind: str, limit: int) -> Guard:
        """Before a limit that is not forced is written on shard 0 (governance): the condition
        that write adds, so that no admission can take the organization over ``limit`` between
        the write's check of its use and its allowances being laid out for it.

        A single item: the write's own check is exact, as long as it is still single (no
        allowance, not frozen). A split counter: its allowances are laid out for ``limit`` first
        by a strict rebase (refused, LimitBelowUsage, when its frozen shards hold more), with a
        lowering basis that admissions keep for LOWERING_SECONDS rather than lay the standing
        override out again; the write is then conditional on shard 0 being laid out for at most
        ``limit`` and not frozen, which holds only while no later plan has been laid out anywhere
        (every rebase freezes shard 0 first and lays it out first)."""
        for _ in range(ATTEMPTS):
            picture = self.splits.read(org, kind)
            if not picture.split and not picture.frozen:
                return SINGLE_GUARD
            basis = picture.basis
            if basis is not None and basis.limit <= limit and not picture.frozen:
                return split_guard(limit)
            if basis is None or picture.frozen:
                # finish what is under way first
                self.splits.rebase(
                    org,
                    kind,
                    basis or self._view.org_plan_basis(org, kind),
                    shards=1,
                    needed=lambda p: p.frozen or p.basis is None,
                )
                continue
            until = self._fx.clock() + LOWERING_SECONDS
            self.splits.rebase(
                org,
                kind,
                Basis.lowering(limit, until),
                shards=1,
                strict=basis,
                needed=lambda p: p.basis is None or p.basis.limit > limit or p.frozen,
            )
            after = self.splits.read(org, kind)
            if (
                after.basis is not None
                and after.basis.limit > limit
                and not after.frozen
                and after.used > limit
            ):
                raise LimitBelowUsage([(kind, limit, after.used)])
        raise InProgress("the organization's counter kept changing while its limit was lowered; retry")

    def _shards(self, org: str, shard: int) -> int:
        return max(self._view.org_shards(org), shard + 1)

    def _wanted(self, org: str, kind: str, picture: ShardSet, *, settled: bool = False) -> Basis | None:
        """The basis the allowances should be laid out for, if not the one they are: the
        override (on shard 0, where governance keeps it), else the plan as this process sees it,
        when that view is later than the one the allowances were laid out for. A lowering's
        basis (lower_first) stands until its deadline unless ``settled`` (its change is written),
        or unless what is wanted is lower still: a forced lowering or a plan change written
        since is laid out at once (review 42: held back to the deadline, a limit of 3 admitted
        up to 7)."""
        have = picture.basis
        wanted = self._wanted_beyond_lowering(org, kind, picture)
        lowering = None if have is None else have.lowering_until
        if settled or lowering is None or self._fx.clock() >= lowering:
            return wanted
        assert have is not None
        return wanted if wanted is not None and wanted.limit < have.limit else None

    def _wanted_beyond_lowering(self, org: str, kind: str, picture: ShardSet) -> Basis | None:
        override = picture.get(0).state.limit
        have = picture.basis
        if override is not None:
            want = Basis(override, OVERRIDE)
            return None if have == want else want
        view = self._view.org_plan_basis(org, kind)
        if have is None or have.plan_tag is None:
            return view  # not split yet, or its override was removed
        if view.plan_tag is not None and view.plan_tag < have.plan_tag:
            self._view.forget(org_id=org)  # this process saw an older plan than the shards did
            view = self._view.org_plan_basis(org, kind)
        if view.plan_tag is None or view.plan_tag <= have.plan_tag:
            return None
        return view

    def _not_admitted(self, attempt: Attempted, picture: ShardSet, judged: Judged) -> Admission:
        if attempt.effect is Effect.NOT_APPLIED:
            self._obs.count("AdmissionNotApplied")
            return Admission(
                AdmissionOutcome.NOT_APPLIED, picture.total(), throttled=attempt.throttled, judged=judged
            )
        self._obs.count("AdmissionOutcomeUnknown")
        return Admission(AdmissionOutcome.UNKNOWN, picture.total(), judged=judged)

    def admitted_after_all(
        self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str, shard: int = 0
    ) -> bool:
        """After an organization's admission whose outcome is unknown: its counter item's
        last_admission answers unless another came since; then the stream path, which counts the
        resource there only if it applied (``org_counted``), usually answers within a second."""

        def counted() -> bool | None:
            found = self._table.get(account_id, rid, kind=kind)
            if found is not None and items.incarnation_of(found) == incarnation and items.org_counted(found):
                return True
            return None

        try:
            if self.last_admitted(org, account_id, rid, incarnation, kind=kind, shard=shard):
                return True
            return self._fx.waiter.until(counted) is not None
        except (ClientError, BotoCoreError):
            return False

    def last_admitted(
        self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str, shard: int = 0
    ) -> bool:
        """The shard's last admission is this create's: its admission there applied (False says
        nothing once another admission came since)."""
        return self.read(org, kind, shard).last_admission == member_token(account_id, rid, incarnation)

    def refused(self, org: str, admission: Admission, kind: str, units: int) -> LimitExceeded:
        """(Whether its members ever held, and under how many OrgHoldIndex keys: as the single
        item refusing says, or the split counter's picture the refusal was made on; None: not
        known, looked for.)"""
        limit = admission.judged.limit if admission.judged else 0
        state = admission.state
        split = state.in_a_split
        holds = (
            admission.holds_used if admission.holds_used is not None else None if split else state.holds_used
        )
        keys = org_usage_keys(admission.items) if admission.items is not None else None if split else 1
        return LimitExceeded(
            limit,
            state.used,
            kind,
            units,
            scope="organization",
            org=org,
            org_holds=holds,
            org_hold_keys=keys,
        )

    # ---- undoing an organization's admission (its account refused the create) ----------------------
    def undo(
        self,
        account_id: str,
        rid: str,
        incarnation: str,
        *,
        kind: str,
        org: str,
        units: int,
        certain: bool = True,
    ) -> bool:
        """Release what the organization's admission took, for a create its account refused,
        then remove the pending item. The item is marked ``undoing`` first, so the stream path no
        longer counts it there and the release knows whether it had. True when done; False when
        a write could not be made or confirmed: the item stays pending, marked and indexed, and
        the sweeper finishes it after the grace period (it holds no slot anyone can see). An
        admission not ``certain`` (its outcome unknown, not confirmed) is only marked: whether
        it holds anything there only the census of its range can say (the sweeper's, after the
        grace period: counting/org_recount.py), so it is never released blind."""
        marked_at = self._fx.clock()
        marked = self._table.mark_undoing(account_id, rid, incarnation, kind=kind)
        if not marked.applied or marked.item is None:
            return False
        counted, shard = items.org_counted(marked.item), items.org_shard(marked.item)
        if not certain:
            if self._counter_gone(org, kind, shard):
                # DELETE /orgs removes a counter item only while it holds nothing: nothing of
                # this create is held there, whatever its admission did
                self._table.drop_undone(account_id, rid, incarnation, kind=kind)
                return True
            self._obs.count("OrgUndoLeftToSweeper")
            return False
        if not items.in_time(marked_at, self._fx.clock(), self._grace):
            # Its mark older than half the grace period: the sweeper takes a mark older than the
            # grace period as a dead undo's, and its census gives the seat back; a release now
            # could be a second (review 47: 4 seats of 3). The census decides.
            self._obs.count("OrgUndoLeftToSweeper")
            return False
        attempt = self.release(
            org, account_id, rid, incarnation, kind=kind, units=units, counted=counted, shard=shard
        )
        if not attempt.applied and not self.released_after_all(
            org, account_id, rid, incarnation, kind=kind, shard=shard
        ):
            self._obs.count("OrgUndoLeftToSweeper")
            return False
        self._table.drop_undone(account_id, rid, incarnation, kind=kind)
        return True

    def _counter_gone(self, org: str, kind: str, shard: int) -> bool:
        try:
            found = self._table.clients.dynamodb.get_item(
                TableName=self._table.name,
                Key=org_counter_key(org, kind=kind, shard=shard),
                ConsistentRead=True,
                ProjectionExpression="pk",
            )
        except (ClientError, BotoCoreError):
            return False
        return "Item" not in found

    def released_after_all(
        self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str, shard: int = 0
    ) -> bool:
        """After an organization's release whose outcome is unknown: last_release, or what the
        stream path does when it sees it apply: a member's claim removed, an undone create's
        marked (``org_released``)."""

        def marked() -> bool | None:
            found = self._table.get(account_id, rid, kind=kind)
            if found is None or items.incarnation_of(found) != incarnation:
                return True  # gone: whoever removed it saw the release
            return True if found.get("org_released", {}).get("BOOL") else None

        try:
            if self.read(org, kind, shard).last_release == member_token(account_id, rid, incarnation):
                return True
            return self._fx.waiter.until(marked) is not None
        except (ClientError, BotoCoreError):
            return False

    # ---- releases (deletes) ------------------------------------------------------------------------
    def release(
        self,
        org: str,
        account_id: str,
        rid: str,
        incarnation: str,
        *,
        kind: str,
        units: int,
        counted: bool,
        shard: int = 0,
    ) -> Attempted:
        """On the shard that admitted it (a release never changes an allowance: counters/split.py)."""
        return self.shard(shard).release(
            org, rid, member_token(account_id, rid, incarnation), counted, kind=kind, units=units
        )

    def release_resolved(
        self,
        org: str,
        account_id: str,
        rid: str,
        incarnation: str,
        *,
        kind: str,
        units: int,
        counted: bool,
        shard: int = 0,
    ) -> Effect | None:
        """Release a claimed resource's units at its organization: None once released (this
        call or, outcome unknown, confirmed), else the effect of the attempt that did not."""
        attempt = self.release(
            org, account_id, rid, incarnation, kind=kind, units=units, counted=counted, shard=shard
        )
        if attempt.applied:
            return None
        if attempt.effect is Effect.UNKNOWN and self.released_after_all(
            org, account_id, rid, incarnation, kind=kind, shard=shard
        ):
            return None
        return attempt.effect

    # ---- member resizes (resize.py) ----------------------------------------------------------------
    def resize(self, account_id: str, kind: str, rid: str, claimed: Item, *, undo: bool = False) -> Admission:
        """A member resize's move at its organization (``claimed``: the resource as its resize
        claimed it), on the shard that holds the resource's units: a grow is admitted there like
        a create of the difference (its single item judged by the organization's limit, a split
        counter's shard within its allowance); a shrink, or the undoing of a grow (``undo``: its
        account did not make it), is released there. One write (single attempt, as every
        admission and release), its token in ``last_resize`` (keys.org_resize_token), from which
        the stream path marks the item (``org_resized``, ``org_unresized``)."""
        org, move = _org_move(account_id, rid, claimed, undo=undo)
        store = self.shard(move.shard)
        if move.delta < 0:
            return store.resize(
                org,
                rid,
                move.token,
                move.delta,
                counted=move.counted,
                seen=CounterState(),
                kind=kind,
                judge=_releasing,
            )
        try:
            picture = self.splits.read(org, kind)
            if (creation := creation_in(picture)) is not None:  # judged by that one's plan
                self._view.know_creation(org, creation)
        except (ClientError, BotoCoreError) as error:  # nothing moved: the resize is reverted
            return self._not_applied(error, "could not read the organization's counter")
        if move.shard == 0 and self._single(org, picture):
            judge = self._view.org_judge(org, kind)
            grown = store.resize(
                org,
                rid,
                move.token,
                move.delta,
                counted=move.counted,
                seen=picture.get(0).state,
                kind=kind,
                judge=judge,
            )
            if grown.outcome is not AdmissionOutcome.MOVED:
                return grown
        write = partial(
            self.splits.grow_once,
            org,
            kind,
            resource_id=rid,
            token=move.token,
            units=move.delta,
            counted=move.counted,
        )
        try:
            return self._on_split(org, kind, move.shard, units=move.delta, write=write)
        except OwnerGone:  # (a member's live resource keeps its organization: not met in practice)
            return Admission(AdmissionOutcome.NOT_APPLIED, CounterState(), throttled=True)

    def resized_after_all(
        self, account_id: str, kind: str, rid: str, claimed: Item, *, undo: bool = False
    ) -> bool:
        """After a member resize's move at its organization whose outcome is unknown: the shard's
        ``last_resize``, or the stream path's mark on the item (or the claim ended)."""
        request, mark = items.since(claimed, "resize_request"), "org_unresized" if undo else "org_resized"

        def marked() -> bool | None:
            found = self._table.get(account_id, rid, kind=kind)
            if found is None or items.since(found, "resize_request") != request:
                return True  # ended: whoever ended it saw the move
            return True if items.since(found, mark) == request else None

        try:
            if self.moved_last(account_id, kind, rid, claimed, undo=undo):
                return True
            return self._fx.waiter.until(marked) is not None
        except (ClientError, BotoCoreError):
            return False

    def moved_last(self, account_id: str, kind: str, rid: str, claimed: Item, *, undo: bool = False) -> bool:
        """The shard's last resize is this one's move (it applied; False says nothing once
        another came since)."""
        org, move = _org_move(account_id, rid, claimed, undo=undo)
        return self.read(org, kind, move.shard).last_resize == move.token

    def holds_target(self, account_id: str, kind: str, rid: str, seen: Item) -> bool | None:
        """Whether the organization holds the target size of ``seen``'s dead resize, as far as
        the shard's ``last_resize`` or the stream path's marks on the item can tell: True, its
        move there applied (and was not undone); False, its undoing applied; None, nothing says
        (the move was never made, or its records are late past the grace period while another
        resize on the shard overwrote ``last_resize``: review 54, where taking it as not made
        released a shrink there twice). Only the census of the range can tell then."""
        request = items.since(seen, "resize_request")
        if items.since(seen, "org_unresized") == request or self.moved_last(
            account_id, kind, rid, seen, undo=True
        ):
            return False
        if items.since(seen, "org_resized") == request or self.moved_last(account_id, kind, rid, seen):
            return True
        return None


@dataclass(frozen=True)
class OrgMove:
    delta: int  # units more (less) on the organization's shard
    counted: bool  # its eventual holds the resource (the claim stops the stream path counting it)
    shard: int
    token: str


def _org_move(account_id: str, rid: str, claimed: Item, *, undo: bool) -> tuple[str, OrgMove]:
    """What a member resize (or its undoing) moves at its organization, from its claimed item."""
    org = items.org_of(claimed)
    assert org is not None, "a member's resource records its organization"
    delta = int(claimed["resize_to"]["N"]) - int(claimed["resize_from"]["N"])
    token = org_resize_token(
        account_id, rid, items.incarnation_of(claimed), items.since(claimed, "resize_request"), undo=undo
    )
    move = OrgMove(
        -abs(delta) if undo else delta, items.org_counted(claimed), items.org_shard(claimed), token
    )
    return org, move


def _releasing(state: CounterState) -> Judged:
    """A release judges nothing (its write has no limit to check)."""
    return Judged(state.limit or 0, "plan")
