"""The API path's façade: limits, usage, reads, and the create and delete flows."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import Clients
from hybrid_counter.counters import CounterState, CounterStore
from hybrid_counter.counters.split import SHARD_CHOICES
from hybrid_counter.effects import Effects
from hybrid_counter.errors import HoldExpired, InProgress, LimitExceeded, NotFound, ValidationError
from hybrid_counter.governance.changes import LimitChanges
from hybrid_counter.governance.event_log import EventLog, EventPage
from hybrid_counter.governance.history import HistoryPage, HistoryStore
from hybrid_counter.governance.publisher import EventPublisher
from hybrid_counter.governance.usage_over import OverPage, UsageOver
from hybrid_counter.keys import (
    HISTORY_PREFIX,
    account_pk,
    all_org_usage_keys,
    is_valid_id,
    iso_utc,
    kind_prefix,
    parse_account_pk,
    parse_resource_sk,
    resource_sk,
)
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.orgs import Org, OrgStore
from hybrid_counter.orgs.counters import org_counters
from hybrid_counter.plans import Limits, Plan, PlanPage, PlanStore
from hybrid_counter.resources import items
from hybrid_counter.resources.create import CreateFlow, same_request
from hybrid_counter.resources.delete import DeleteFlow
from hybrid_counter.resources.holds import HoldFlow
from hybrid_counter.resources.items import Resource
from hybrid_counter.resources.org_level import OrgLevel
from hybrid_counter.resources.repairs import Repairs
from hybrid_counter.resources.resize import ResizeFlow
from hybrid_counter.resources.table import ResourceTable, guarded
from hybrid_counter.settings import Settings
from hybrid_counter.usage import KindUsage, OrgKindUsage, OrgRoom, OrgUsage, TopAccount, Usage, WouldAdmit

# A list request skips invisible (pending) items: as many as creates in flight, plus failed creates
# until their TTL. It stops skipping after this many once it has something to return, and after
# ten times as many in any case (then, and only then, a page may be empty with a next_token).
LIST_READ_BUDGET = 1000
OPERATOR_TOOL = "operator-tool"  # who changed a limit when no caller identity is given
ORG_USAGE_INDEX = "OrgUsageIndex"


@dataclass(frozen=True)
class ResourcePage:
    items: list[Resource]
    next_token: str | None


class ResourceService:
    """The API path: every request's entry into the domain (one object, so the HTTP layer has
    one dependency); the work is in the flows, the plans and the counters."""

    def __init__(
        self,
        settings: Settings,
        clients: Clients | None = None,
        obs: Observability | None = None,
        effects: Effects | None = None,
        *,
        limits: Limits | None = None,
    ) -> None:
        self._settings = settings
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._fx = effects or Effects()
        self.plans = PlanStore(
            settings.table_name,
            self._clients,
            default_kind=settings.default_kind,
            default_limit=settings.default_limit,
            clock=self._fx.clock,
        )
        self.limits = limits or Limits(
            self.plans, cache_seconds=settings.plan_cache_seconds, clock=self._fx.clock
        )
        self.counters = CounterStore(
            settings.table_name,
            settings.default_limit,
            self._clients,
            self._obs,
            self._fx,
            default_kind=settings.default_kind,
        )
        self._table = ResourceTable(settings.table_name, self._clients, self._fx)
        grace = settings.pending_grace_seconds
        self.orgs = OrgLevel(
            self._table, self.counters, self.limits, self._fx, self._obs, grace_seconds=grace
        )
        self._create = CreateFlow(self._table, self.counters, grace, self._fx, self._obs, orgs=self.orgs)
        self._delete = DeleteFlow(self._table, self.counters, grace, self._fx, self._obs)
        self._resize = ResizeFlow(self._table, self.counters, grace, self._fx, self._obs, orgs=self.orgs)
        self._delete.resizes = self._resize
        self._create.left_claims = self._delete
        self.repairs = Repairs(self._table, self._delete, grace, self._fx, resizes=self._resize)
        self.holds = HoldFlow(self._table, self._delete, self._fx, self._obs)
        self.org_store = OrgStore(settings.table_name, self._clients, clock=self._fx.clock)
        self.history = HistoryStore(
            settings.table_name, self._clients, retention_days=settings.history_retention_days
        )
        self.changes = LimitChanges(
            settings.table_name,
            self._clients,
            counters=self.counters,
            plans=self.plans,
            limits=self.limits,
            history=self.history,
            publisher=EventPublisher(settings.event_bus_name, self._clients, self._obs),
            effects=self._fx,
            event_log_days=settings.event_log_days,
        )

    def kind(self, kind: str | None) -> str:
        return kind or self._settings.default_kind

    # ---- limits, plans and usage ------------------------------------------------------------------
    def set_limit(
        self,
        account_id: str,
        limit: int,
        *,
        kind: str | None = None,
        force: bool = False,
        by: str = OPERATOR_TOOL,
    ) -> dict[str, Any]:
        """The account's override for a kind (the routes without a kind: the default kind).
        Below current use: LimitBelowUsage, unless ``force``. Recorded in history, by ``by``."""
        kind = self.kind(kind)
        guarded(
            lambda: self.changes.set_override(account_id, kind, limit, force=force, by=by), "the limit change"
        )
        return {"account_id": account_id, "kind": kind, "limit": limit}

    def remove_limit(
        self, account_id: str, *, kind: str, force: bool = False, by: str = OPERATOR_TOOL
    ) -> None:
        """Back to the plan's limit (the same rule as setting one)."""
        guarded(
            lambda: self.changes.set_override(account_id, kind, None, force=force, by=by), "the limit change"
        )

    def account_history(
        self, account_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> HistoryPage:
        return guarded(
            lambda: self.history.page(
                f"{HISTORY_PREFIX}ACCOUNT#{account_id}", kind=kind, page_size=page_size, next_token=next_token
            ),
            "the read",
        )

    def plan_history(
        self, plan_id: str, *, page_size: int = 50, next_token: str | None = None
    ) -> HistoryPage:
        return guarded(
            lambda: self.history.page(
                f"{HISTORY_PREFIX}PLAN#{plan_id}", page_size=page_size, next_token=next_token
            ),
            "the read",
        )

    def usage(self, account_id: str) -> Usage:
        states = guarded(lambda: self.counters.read_all(account_id), "the read")
        # (the plan its limits are judged by: a move marked on its counter items is seen at once)
        plan_id = guarded(lambda: self.limits.plan_id_seen(account_id, states.values()), "the read")
        plan = guarded(lambda: self.limits.plan(plan_id), "the read")
        # Listed: the plan's kinds and every kind with a counter item (used, held or overridden,
        # now or before; not one that holds only a plan move's marks). The default kind is judged
        # for the top-level fields even when the plan lacks it, but listed only as any other kind
        # is: a plan without it does not grow it.
        listed = {
            *(kind for kind, state in states.items() if state.used_once),
            *(plan.limits if plan else {}),
        }
        kinds = listed | {self._settings.default_kind}
        # The account's organization (its profile, read with its plan: one more Query for a
        # member only, of its organization's counters)
        org_id = guarded(lambda: self.limits.org_id_of(account_id), "the read")
        # its organization's room judged by the creation its counter items name, if any do; else
        # by the one its membership names (review 34: a member without counter items saw a
        # cached profile of a deleted organization of the id)
        if org_id is not None:
            named = {s.org_epoch for s in states.values() if s.org == org_id and s.org_epoch is not None}
            if not named and (joined := guarded(lambda: self.limits.org_epoch_of(account_id), "the read")):
                named = {joined}
            for creation in sorted(named):
                guarded(partial(self.limits.know_creation, org_id, creation), "the read")
        rooms = guarded(lambda: self._org_rooms(org_id), "the read") if org_id is not None else {}
        # (an account whose counter items never admitted a hold has none: no Query for them)
        ever_held = any(state.holds_used for state in states.values())
        held = guarded(lambda: self.holds.held_units(account_id), "the read") if ever_held else {}
        per_kind = {
            kind: replace(
                KindUsage.of(
                    kind,
                    states.get(kind, CounterState()),
                    self.limits.judge(account_id, kind)(states.get(kind, CounterState())),
                    rooms.get(kind) if org_id is not None else None,
                ),
                held=held.get(kind, 0),
            )
            for kind in kinds
        }
        if org_id is not None:
            for kind in kinds:
                if kind not in rooms:
                    judged = self.limits.org_judge(org_id, kind)(CounterState())
                    per_kind[kind] = replace(
                        per_kind[kind], org=OrgRoom(org_id, judged.limit, judged.source, 0)
                    )
        default = per_kind[self._settings.default_kind]
        return Usage(
            account_id,
            default.limit,
            default.best_effort,
            default.eventual,
            plan_id,
            {kind: per_kind[kind] for kind in listed},
            org_id,
        )

    def _org_rooms(self, org_id: str) -> dict[str, OrgRoom]:
        return {
            kind: OrgRoom(org_id, judged.limit, judged.source, state.used)
            for kind, state in self.org_counters(org_id).items()
            for judged in (self.limits.org_judge(org_id, kind)(state),)
        }

    # ---- organizations ----------------------------------------------------------------------------
    def org_counters(self, org_id: str) -> dict[str, CounterState]:
        """The organization's counters by kind (a split kind's shards summed): one consistent Query."""
        return {
            kind: shards.total()
            for kind, shards in org_counters(self._clients, self._settings.table_name, org_id).items()
        }

    def put_org(
        self,
        org_id: str,
        plan_id: str,
        *,
        force: bool = False,
        by: str = OPERATOR_TOOL,
        shards: int | None = None,
    ) -> tuple[Org, bool]:
        """Create the organization on a plan, or move it to another (LimitBelowUsage unless
        forced), and (``shards``) split its counters over that many items per kind; (the
        organization, whether it was created)."""
        created = guarded(lambda: self.changes.put_org(org_id, plan_id, force=force, by=by), "the change")
        try:
            if shards is not None:
                self.set_org_shards(org_id, shards)
            return self.get_org(org_id), created
        except NotFound as error:
            # Deleted since this PUT's write (a DELETE /orgs racing it): the PUT took effect
            # before the deletion, but what it made is gone, so nothing here can show it; a 404
            # would say it never was (review 56: 89 of 200 racing PUTs answered 404)
            raise InProgress(
                f"organization {org_id} was deleted while it was being set; retry the request"
            ) from error

    def set_org_shards(self, org_id: str, shards: int) -> None:
        """Split the organization's counters over ``shards`` items per kind (1, 2, 4, 8 or 16;
        counters/split.py): the profile first (creates choose their shard by it, within
        PlanCacheSeconds), then each kind it has counters for laid out again over them (a kind
        without counters yet is, by its first create). Going back to fewer keeps the items and
        what they hold; creates stop going to the ones beyond."""
        if shards not in SHARD_CHOICES:
            raise ValidationError(f"shards must be one of {', '.join(map(str, SHARD_CHOICES))}")
        org = self.get_org(org_id)
        if org.shards != shards:
            guarded(lambda: self.org_store.set_shards(org_id, shards), "the change")
        self.limits.forget(org_id=org_id)
        for kind in sorted(guarded(lambda: self.org_counters(org_id), "the read")):
            guarded(
                lambda k=kind: self.orgs.reshard(org_id, k, shards, creation=org.creation),  # type: ignore[misc]
                "the change",
            )

    def get_org(self, org_id: str) -> Org:
        org = guarded(lambda: self.org_store.get(org_id), "the read")
        if org is None:
            raise NotFound(f"organization {org_id} not found")
        return org

    def delete_org(self, org_id: str) -> None:
        guarded(lambda: self.org_store.delete(org_id, settle=self.changes.complete_named), "the delete")

    def set_org_limit(
        self, org_id: str, kind: str, limit: int | None, *, force: bool = False, by: str = OPERATOR_TOOL
    ) -> None:
        """The organization's override for a kind (None: back to its plan's). A split counter's
        allowances are laid out for it before the answer (if this process dies first, by the
        next create of the kind: the override is on shard 0, which every admission reads)."""
        self.get_org(org_id)
        guarded(
            lambda: self.changes.set_org_override(
                org_id,
                kind,
                limit,
                force=force,
                by=by,
                guard=lambda effective: self.orgs.lower_first(org_id, kind, effective),
            ),
            "the limit change",
        )
        self.limits.forget(org_id=org_id)
        guarded(lambda: self.orgs.rebalance(org_id, kind), "the limit change")

    def add_member(self, org_id: str, account_id: str) -> bool:
        """The account joins the organization (only while empty); False if it was a member."""
        joined = guarded(lambda: self.org_store.join(org_id, account_id), "the membership change")
        self.limits.forget(account_id=account_id)
        return joined

    def remove_member(self, org_id: str, account_id: str) -> bool:
        """The account leaves the organization (only while empty); False if it was not a member."""
        left = guarded(lambda: self.org_store.leave(org_id, account_id), "the membership change")
        self.limits.forget(account_id=account_id)
        return left

    def org_usage(self, org_id: str, *, top: int = 5) -> OrgUsage:
        """Per kind: the limit, where it comes from, the use, and the accounts that use most (by
        their counted use, OrgUsageIndex: a Query of ``top`` entries per key of the kind, one
        for an organization never split, 4 S for one split over S; no read per account)."""
        org = self.get_org(org_id)
        guarded(lambda: self.limits.know_creation(org_id, org.creation), "the read")  # judged by this one
        states = guarded(lambda: self.org_counters(org_id), "the read")
        plan = guarded(lambda: self.limits.plan(org.plan_id), "the read")
        kinds = {*states, *(plan.limits if plan else {})}
        per_kind = {}
        for kind in sorted(kinds):
            state = states.get(kind, CounterState())
            judged = self.limits.org_judge(org_id, kind)(state)
            leaders = guarded(partial(self._top_accounts, org_id, kind, top, org.usage_keys), "the read")
            per_kind[kind] = OrgKindUsage(
                kind, judged.limit, judged.source, state.best_effort, state.eventual, leaders
            )
        return OrgUsage(org_id, org.plan_id, org.members, per_kind)

    def _top_accounts(self, org_id: str, kind: str, top: int, keys: int) -> tuple[TopAccount, ...]:
        """The ``top`` of each of the organization's OrgUsageIndex keys, merged: the accounts that
        use most are among them, whichever keys they are spread over."""
        if top <= 0:
            return ()
        found: list[TopAccount] = []
        for key in all_org_usage_keys(org_id, kind, keys):
            response = self._clients.dynamodb.query(
                TableName=self._settings.table_name,
                IndexName=ORG_USAGE_INDEX,
                KeyConditionExpression="org_kind = :org_kind",
                ExpressionAttributeValues={":org_kind": {"S": key}},
                ScanIndexForward=False,
                Limit=top,
            )
            found += (
                TopAccount(
                    parse_account_pk(str(item["pk"]["S"])), int(item.get("eventual", {}).get("N", "0"))
                )
                for item in response.get("Items", [])
            )
        # (an item whose key just moved may show under both for a moment: the index is eventual)
        best = {leader.account_id: leader for leader in sorted(found, key=lambda leader: leader.used)}
        return tuple(sorted(best.values(), key=lambda leader: (-leader.used, leader.account_id))[:top])

    def org_history(
        self, org_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> HistoryPage:
        return guarded(
            lambda: self.history.page(
                f"{HISTORY_PREFIX}ORG#{org_id}", kind=kind, page_size=page_size, next_token=next_token
            ),
            "the read",
        )

    def usage_over(
        self,
        *,
        threshold: int | None = None,
        kind: str | None = None,
        page_size: int = 50,
        next_token: str | None = None,
    ) -> OverPage:
        """Who is at or over a usage threshold, newest crossing first (governance/usage_over.py)."""
        listing = UsageOver(self._settings.table_name, self._settings.usage_thresholds, self._clients)
        return guarded(
            lambda: listing.page(threshold=threshold, kind=kind, page_size=page_size, next_token=next_token),
            "the read",
        )

    def events(
        self, *, since: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> EventPage:
        """The events published recently, newest first (governance/event_log.py)."""
        log = EventLog(
            self._settings.table_name,
            self._clients,
            log_days=self._settings.event_log_days,
            clock=self._fx.clock,
        )
        return guarded(lambda: log.page(since=since, page_size=page_size, next_token=next_token), "the read")

    def put_plan(self, plan_id: str, limits: dict[str, int], *, by: str = OPERATOR_TOOL) -> Plan:
        return guarded(lambda: self.changes.put_plan(plan_id, limits, by=by), "the plan change")

    def get_plan(self, plan_id: str) -> Plan:
        plan = guarded(lambda: self.plans.get(plan_id), "the read")
        if plan is None:
            raise NotFound(f"plan {plan_id} not found")
        return plan

    def list_plans(self, page_size: int = 50, next_token: str | None = None) -> PlanPage:
        return guarded(lambda: self.plans.list(page_size, next_token), "the list")

    def assign_plan(
        self, account_id: str, plan_id: str, *, force: bool = False, by: str = OPERATOR_TOOL
    ) -> dict[str, Any]:
        """Move the account to a plan that exists (else ValidationError); a kind it would put
        below current use refuses the move (LimitBelowUsage) unless ``force``."""
        guarded(lambda: self.changes.assign_plan(account_id, plan_id, force=force, by=by), "the plan change")
        return {"account_id": account_id, "plan_id": plan_id}

    # ---- writes -----------------------------------------------------------------------------
    def create(
        self,
        account_id: str,
        name: str,
        extra: dict[str, Any],
        resource_id: str | None = None,
        *,
        kind: str | None = None,
        units: int = 1,
        hold_seconds: float | None = None,
    ) -> tuple[Resource, bool]:
        """A create (``hold_seconds``: a hold, released unless confirmed by then, holds.py). One
        refused for room first expires the account's expired holds of the kind (refused at its
        organization, the organization's members'), then is judged again (an expired hold never
        blocks a create longer than one request)."""
        kind = self.kind(kind)
        self._check_hold(hold_seconds)
        judge = self.limits.judge(account_id, kind)

        def create() -> tuple[Resource, bool]:
            return self._create.create(
                account_id,
                name,
                extra,
                resource_id,
                kind=kind,
                units=units,
                judge=judge,
                hold_seconds=hold_seconds,
            )

        return self._reclaiming(account_id, kind, create, "the create")

    def _reclaiming[T](self, account_id: str, kind: str, admit: Callable[[], T], what: str) -> T:
        """``admit`` (a create, a grow); refused for room, the account's expired holds of the kind
        are expired (holds.py), and refused at its organization that organization's members'
        too (another member's expired hold holds its room as much), and it is judged once more,
        whatever the reclaim found (the hold that refused it may have gone meanwhile: its
        owner's delete, or another's expiry, before the reclaim's Query; the explorer's member
        holds, 2026-11-27: before, 409 with the room free): refused again, 503 if an expiry was
        given up (that hold may be what holds the room), else the refusal."""
        try:
            return admit()
        except LimitExceeded as refused:
            org = _reclaims_at(refused)
            if refused.holds is False and org is None:
                raise
            if (
                refused.scope == "organization"
                and refused.org_holds is False
                and not self._ever_held(account_id, kind, refused.holds)
            ):
                # no member ever held the kind there, nor this account: no expired hold can be
                # what refuses it (review 72: a grow refused so was made twice; an account that
                # held is still searched, for its holds from before the organization's mark:
                # review 73, a grow does not know it, and its own expired hold kept the room)
                raise
            own = refused.holds is not False  # (an account that never held has none of its own)
            keys = refused.org_hold_keys
            reclaimed = guarded(
                lambda: self.holds.reclaim(account_id, kind, org=org, own=own, org_keys=keys), what
            )
        try:
            return admit()
        except LimitExceeded as again:
            later = _reclaims_at(again)
            if org is not None or later is None:
                raise reclaimed.refused_again(again, account_id) from again
            # Refused at its account first, then, its own holds released, at its organization:
            # that one's members' expired holds are reclaimed too, and it is judged a third time
            # (review 60: before, 409 while another member's expired hold held the room)
            keys = again.org_hold_keys
            more = guarded(
                lambda: self.holds.reclaim(account_id, kind, org=later, own=False, org_keys=keys), what
            )
            reclaimed = reclaimed.and_then(more)
        try:
            return admit()
        except LimitExceeded as refused:
            raise reclaimed.refused_again(refused, account_id) from refused

    def _ever_held(self, account_id: str, kind: str, known: bool | None) -> bool:
        """Whether the account's counter item of the kind ever admitted a hold: ``known`` (as its
        refusal read it), else read (one GetItem; a store error: taken as held, searched)."""
        if known is not None:
            return known
        try:
            return self.counters.read(account_id, kind=kind).holds_used
        except (ClientError, BotoCoreError):
            return True

    def _check_hold(self, hold_seconds: float | None) -> None:
        if hold_seconds is None:
            return
        longest = self._settings.hold_max_seconds
        if not 0 < hold_seconds <= longest:
            raise ValidationError(f"hold_seconds must be more than 0 and at most {longest}")

    def confirm(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        """Make a hold permanent (holds.py): 200 with the resource, again on a retry; HoldExpired
        once its deadline has passed."""
        return self.holds.confirm(account_id, self.kind(kind), resource_id)

    def would_create(
        self,
        account_id: str,
        name: str,
        extra: dict[str, Any],
        resource_id: str | None = None,
        *,
        kind: str | None = None,
        units: int = 1,
        hold_seconds: float | None = None,
    ) -> WouldAdmit:
        """Would this create be admitted now? Nothing is written (a PUT of an id that exists with
        the same body would answer 200: admitted, adding nothing). A hold is judged as a create
        (its ``hold_seconds`` checked as the create would)."""
        kind = self.kind(kind)
        self._check_hold(hold_seconds)
        if resource_id is not None:
            item = guarded(lambda: self._table.get(account_id, resource_id, kind=kind), "the read")
            if items.state_of(item) == items.LIVE:
                assert item is not None
                same_request(items.resource_from_item(item), name, extra, units)
                return self._would_admit(account_id, kind, 0)
        return self._would_admit(account_id, kind, units)

    def resize(self, account_id: str, resource_id: str, units: int, *, kind: str | None = None) -> Resource:
        """A grow refused for room first expires the account's expired holds of the kind (at its
        organization, the organization's members'), then is judged again, as a create is."""
        kind = self.kind(kind)
        judge = self.limits.judge(account_id, kind)
        started = self._fx.clock()
        try:
            return self._reclaiming(
                account_id,
                kind,
                lambda: self._resize.resize(account_id, kind, resource_id, units, judge=judge),
                "the resize",
            )
        except NotFound:
            # the hold it grows released by an expiry while it was judged (its own refusal's
            # reclaim, the deadline passed meanwhile: review 75, 404 where its confirm said
            # HoldExpired); only then: an id's tombstone outlives the incarnation it was left by
            # (review 76: a resource created again under the id, then deleted, is 404)
            expired = guarded(
                lambda: self.holds.released_by_an_expiry(account_id, kind, resource_id, since=started),
                "the resize",
            )
            if expired:
                raise HoldExpired(f"the hold on {resource_id} expired; its units were released") from None
            raise

    def would_resize(
        self, account_id: str, resource_id: str, units: int, *, kind: str | None = None
    ) -> WouldAdmit:
        kind = self.kind(kind)
        item = guarded(lambda: self._table.get(account_id, resource_id, kind=kind), "the read")
        if not items.visible(item):
            raise NotFound(f"resource {resource_id} not found")
        assert item is not None
        until = items.hold_until_of(item)
        if (
            until is not None
            and (until <= self._fx.clock() or "expired" in item)
            and units > items.units_of(item)
        ):
            raise HoldExpired(f"the hold on {resource_id} expired at {iso_utc(until)}")  # as the PATCH would
        return self._would_admit(account_id, kind, units - items.units_of(item), org_first=True)

    def _would_admit(self, account_id: str, kind: str, units: int, *, org_first: bool = False) -> WouldAdmit:
        """Judged as the request would be: by its account, and a member's by its organization
        too; one refused for room without the account's expired holds of the kind, and one
        refused at its organization without its members' too (the request would release them
        first and be judged again)."""
        state = guarded(lambda: self.counters.read(account_id, kind=kind), "the read")
        # (membership first, as the create reads it: a kind's first create is judged by the
        # profile that read returns; review 83: the dry run judged by a profile cached before a
        # move, and answered by the plan the account had left)
        membership = guarded(lambda: self.orgs.membership(account_id, kind, state), "the read")
        judged = self.limits.judge(account_id, kind)(state)
        admits = units <= 0 or state.admits(judged.limit, units)
        org_id = membership.org
        at_org = (
            None
            if org_id is None
            else guarded(lambda: self.orgs.would_admit(org_id, kind, units, membership.epoch), "the read")
        )
        # (an account that never held: nothing of its own to release, and no Query to find that
        # out; refused at its organization, its members' expired holds are looked for)
        org_refuses = at_org is not None and not at_org.would_admit
        org_held = at_org is not None and at_org.holds is not False
        if (org_refuses and (org_held or state.holds_used)) or (state.holds_used and not admits):
            reclaiming = org_id if org_refuses and org_held else None
            # as the request would reclaim them: refused at its account first, its own page,
            # then (refused at its organization) that one's page apart (review 61: one page of
            # both, the dry run refused what the request admitted)
            # (a member's grow is judged at its organization first, whose reclaim reads one page
            # of both: review 72, the dry run read them in turn, as a create's, and disagreed)
            in_turn = reclaiming is not None and state.holds_used and not admits and not org_first
            mine, everyone = guarded(
                lambda: self.holds.expired_units(
                    account_id,
                    kind,
                    org=reclaiming,
                    own=state.holds_used,
                    in_turn=in_turn,
                    org_keys=None if at_org is None else at_org.hold_keys,
                ),
                "the read",
            )
            if mine:
                admits = admits or state.used - mine + units <= judged.limit
            if everyone and at_org is not None and not at_org.would_admit:
                at_org = replace(at_org, would_admit=at_org.used - everyone + units <= at_org.limit)
        if at_org is None:
            return WouldAdmit(kind, units, judged.limit, state.used, admits)
        return WouldAdmit(
            kind,
            units,
            judged.limit,
            state.used,
            admits and at_org.would_admit,
            organization=at_org,
            org_first=org_first,
            account_admits=admits,
        )

    def delete(self, account_id: str, resource_id: str, *, kind: str | None = None) -> None:
        self._delete.delete(account_id, resource_id, kind=self.kind(kind))

    # ---- reads ------------------------------------------------------------------------------
    def get(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        kind = self.kind(kind)
        item = guarded(lambda: self._table.get(account_id, resource_id, kind=kind), "the read")
        if not items.visible(item):
            raise NotFound(f"resource {resource_id} not found")
        assert item is not None
        return items.resource_from_item(item)

    def list(
        self, account_id: str, page_size: int = 50, next_token: str | None = None, *, kind: str | None = None
    ) -> ResourcePage:
        """A full page, or the last one: reads go on past invisible items until the page is full
        or the account ends (bounded by LIST_READ_BUDGET). The token is the last item read, so a
        resource after it is never skipped."""
        kind = self.kind(kind)
        start = resource_sk(self._decode_token(next_token), kind=kind) if next_token else None
        found: list[Resource] = []
        skipped = 0
        more = True
        while (
            more
            and len(found) < page_size
            and skipped < (LIST_READ_BUDGET if found else 10 * LIST_READ_BUDGET)
        ):
            query: dict[str, Any] = {
                "TableName": self._settings.table_name,
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": account_pk(account_id)},
                    ":prefix": {"S": kind_prefix(kind)},
                },
                "ConsistentRead": True,
                "Limit": page_size - len(found) + 10,
            }
            if start:
                query["ExclusiveStartKey"] = {"pk": {"S": account_pk(account_id)}, "sk": {"S": start}}
            response = guarded(partial(self._clients.dynamodb.query, **query), "the list")
            for item in response.get("Items", []):
                start = str(item["sk"]["S"])
                if items.visible(item):
                    found.append(items.resource_from_item(item))
                    if len(found) == page_size:
                        break
                else:
                    skipped += 1
            else:
                more = "LastEvaluatedKey" in response
        token = None
        if more and start is not None:
            token = base64.urlsafe_b64encode(parse_resource_sk(start).encode()).decode()
        return ResourcePage(found, token)

    @staticmethod
    def _decode_token(token: str) -> str:
        try:
            resource_id = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as error:
            raise ValidationError("next_token is not valid") from error
        if not is_valid_id(resource_id):
            raise ValidationError("next_token is not valid")
        return resource_id


def _reclaims_at(refused: LimitExceeded) -> str | None:
    """The organization whose members' expired holds a refusal reclaims: the one that refused,
    unless its counter items say none of its members ever held (no Query of the OrgHoldIndex)."""
    if refused.scope != "organization" or refused.org_holds is False:
        return None
    return refused.org
