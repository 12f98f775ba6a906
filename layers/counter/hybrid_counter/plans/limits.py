"""The limit an admission is judged by: the account's override for the kind, else its plan's.

The override sits on the kind's counter item (``limit``), which the admission reads and writes
anyway, so it costs nothing and is exact: the admission's write is conditional on it (or on its
absence). The plan's limit is not on that item: an account's plan and the plan's limits are read
through caches that keep what they read for ``cache_seconds`` (``PlanCacheSeconds``, 60 s by
default). So a plan change writes one item and takes effect for every account within that
time, however many accounts are on the plan; in steady state a create reads nothing more than
before. An account moved to another plan is judged by its new plan at once: the move marks its
counter items (``plan_of``, ``plan_move``; governance/changes.py), ``plan_judged`` takes the
newer of that mark and the cached profile, and the admission is conditional on the mark it read. An admission always uses one value for both its
check and its conditional write (judged by the old limit or the new, never a mix), and a create
racing a change of the override is judged again on what refused its write.

cachetools' TTLCache does the expiry (with the injected clock, so tests and the explorer move
time); the caches are bounded, so a function that sees a million accounts keeps the most recent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError
from cachetools import TTLCache

from hybrid_counter.aws import store_error
from hybrid_counter.counters import CounterState, Judge, Judged
from hybrid_counter.counters.split import Basis
from hybrid_counter.counters.state import PlanMark
from hybrid_counter.plans.store import AccountProfile, OrgProfile, Plan, PlanStore, profile_from

ACCOUNTS_CACHED = 10_000
PLANS_CACHED = 1_000


class StoredPlan(NamedTuple):
    """An owner's plan as stored now: its id, its limit for the kind, and the plan as read (None:
    no such plan; its version, or its absence from the table, fences a write judged by it)."""

    plan_id: str
    limit: int
    plan: Plan | None


class Limits:
    def __init__(self, plans: PlanStore, *, cache_seconds: float, clock: Callable[[], float]) -> None:
        self._plans = plans
        self._lock = threading.Lock()
        # an account's (plan, organization), from one read of its profile
        self._plan_of: TTLCache[str, AccountProfile] = TTLCache(ACCOUNTS_CACHED, cache_seconds, timer=clock)
        self._plan: TTLCache[str, Plan | None] = TTLCache(PLANS_CACHED, cache_seconds, timer=clock)
        self._org_profile: TTLCache[str, OrgProfile | None] = TTLCache(
            ACCOUNTS_CACHED, cache_seconds, timer=clock
        )

    # Each cache is looked up once, with one reading of the clock (TTLCache.__getitem__): a test
    # of membership followed by a read takes two, and an entry expiring between them raised
    # KeyError (cachetools' own get() does the same two readings).
    def plan_id_of(self, account_id: str) -> str:
        return self._profile(account_id).plan_id

    def org_id_of(self, account_id: str) -> str | None:
        """The organization the account belongs to, through the cache: for showing it (usage);
        admissions judge by the account's counter items, which are exact (orgs/store.py)."""
        return self._profile(account_id).org_id

    def org_epoch_of(self, account_id: str) -> int | None:
        """Which creation of its organization's id the account joined, through the cache (None:
        in none, or joined before memberships recorded it)."""
        return self._profile(account_id).org_epoch

    def _profile(self, account_id: str) -> AccountProfile:
        try:
            with self._lock:
                return self._plan_of[account_id]
        except KeyError:
            pass
        found = self._plans.profile_of(account_id)
        with self._lock:
            self._plan_of[account_id] = found
        return found

    def plan(self, plan_id: str) -> Plan | None:
        try:
            with self._lock:
                return self._plan[plan_id]
        except KeyError:
            pass
        found = self._plans.get(plan_id)
        with self._lock:
            self._plan[plan_id] = found
        return found

    def plan_judged(self, account_id: str, kind: str, state: CounterState) -> Judged:
        """The account's plan's limit for the kind, by the newest view of its plan this process
        has: the move marked on the counter item (written by the move itself, so seen at once),
        or its profile as cached, whichever move is later (a move whose marks were not written,
        or not on this item: its profile says, within cache_seconds)."""
        profile = self._profile(account_id)
        marked = state.plan_move or 0
        if (by_mark := _marked_plan(state, profile)) is not None:
            # and at least the version of that plan the move was judged by, whether or not the
            # profile cached says the same move (review 81: a plan lowered just before the move,
            # judged by its cached limits until they expired; review 82: so too by a process
            # that read the profile after the move)
            plan = self.plan_at_least(by_mark, state.plan_version)
            mark = None
        else:
            plan = self.plan(profile.plan_id)
            # an admission by a later move than the item's mark (none: 0) writes it there, so a
            # process whose cache is older judges the item by it (review 83: a kind's first
            # create after a move made an item with no mark, which such a process judged by its
            # cached profile); never for an account never moved under marks
            later = profile.plan_moves > marked
            version = 0 if plan is None else plan.version
            mark = PlanMark(profile.plan_id, profile.plan_moves, version) if later else None
        return Judged(0 if plan is None else plan.limit_for(kind), "plan", plan_move=marked, mark=mark)

    def seen_profile(self, account_id: str, item: Mapping[str, Any]) -> None:
        """The account's profile as a consistent read of it just said (a kind's first create
        reads it for its membership, orgs/: its plan is judged by it too, at no cost; review 82:
        a kind with no item, so no mark, was judged by a profile cached before a move)."""
        seen = profile_from(item)
        with self._lock:
            try:
                cached: AccountProfile | None = self._plan_of[account_id]
            except KeyError:
                cached = None
            # (never an older read over a newer one: two requests of one process at once)
            if cached is None or cached.plan_moves <= seen.plan_moves:
                self._plan_of[account_id] = seen

    def plan_at_least(self, plan_id: str, version: int) -> Plan | None:
        """The plan through the cache, read again if what is cached is older than ``version``
        (or cached as absent where a version says it is there)."""
        plan = self.plan(plan_id)
        if (plan.version if plan is not None else -1) >= version:
            return plan
        found = self._plans.get(plan_id)
        with self._lock:
            self._plan[plan_id] = found
        return found

    def plan_id_seen(self, account_id: str, states: Iterable[CounterState]) -> str:
        """The account's plan as ``plan_judged`` takes it: the latest of its counter items'
        marks and its profile as cached (usage shows the plan its limits were judged by)."""
        profile = self._profile(account_id)
        marked = [(s.plan_move or 0, plan_id) for s in states if (plan_id := _marked_plan(s, profile))]
        return max(marked)[1] if marked else profile.plan_id

    def stored_plan(self, account_id: str, kind: str) -> StoredPlan:
        """The account's plan as stored now and its limit for the kind (consistent reads, no
        cache): what a check that guards a write judges by (a process's cache may be
        PlanCacheSeconds behind another's change). What it read replaces what was cached."""
        profile = self._plans.profile_of(account_id)
        plan_id = profile.plan_id
        plan = self._plans.get(plan_id)
        with self._lock:
            self._plan_of[account_id] = profile
            self._plan[plan_id] = plan
        return StoredPlan(plan_id, 0 if plan is None else plan.limit_for(kind), plan)

    def org_profile(self, org_id: str, creation: int | None = None) -> OrgProfile | None:
        """An organization's plan and shards, through the cache (None: it does not exist).
        ``creation``: the creation of the id the caller knows to live (a membership's, a counter
        item's mark): what is cached of another creation, or of none, is read again (an
        organization created again under its id is judged by its own plan at once)."""
        try:
            with self._lock:
                cached = self._org_profile[org_id]
            if creation is None or (cached is not None and cached.epoch_base == creation):
                return cached
        except KeyError:
            pass
        found = self._plans.org_profile_of(org_id)
        with self._lock:
            self._org_profile[org_id] = found
        return found

    def know_creation(self, org_id: str, creation: int) -> None:
        """What is cached of the organization made that creation's, read again if it is not
        (before anything is written: a store's error is the caller's to map)."""
        self.org_profile(org_id, creation)

    def org_plan_id_of(self, org_id: str, creation: int | None = None) -> str | None:
        profile = self.org_profile(org_id, creation)
        return None if profile is None else profile.plan_id

    def org_epoch(self, org_id: str) -> int | None:
        """Which creation of the id the organization is, through the cache (None: it does not
        exist): for members whose membership does not say (joined before members recorded it)."""
        try:
            profile = self.org_profile(org_id)
        except (ClientError, BotoCoreError) as error:
            raise store_error(error, "the organization's read") from error
        return None if profile is None else profile.epoch_base

    def org_shards(self, org_id: str) -> int:
        """How many shards its creates go to (1: not split). Read inside flows that have
        written (an admission after its pending item), so a store error is the domain's "not
        done": a process whose cache expired mid-create met a throttled read here and answered
        500 (the explorer's stall past the grace period, 2026-11-27)."""
        try:
            profile = self.org_profile(org_id)
        except (ClientError, BotoCoreError) as error:
            raise store_error(error, "the organization's read") from error
        return 1 if profile is None else profile.shards

    def org_plan_limit(self, org_id: str, kind: str, creation: int | None = None) -> int:
        plan_id = self.org_plan_id_of(org_id, creation)
        plan = None if plan_id is None else self.plan(plan_id)
        return 0 if plan is None else plan.limit_for(kind)

    def org_plan_basis(self, org_id: str, kind: str) -> Basis:
        """The organization's plan's limit, with the order of this view of it (a split counter
        lays allowances out only for a view later than the one they were laid out for)."""
        try:
            profile = self.org_profile(org_id)
            plan = None if profile is None else self.plan(profile.plan_id)
        except (ClientError, BotoCoreError) as error:
            raise store_error(error, "the organization's plan's read") from error
        if profile is None or plan is None:
            return Basis.of_plan(0, 0 if profile is None else profile.plan_moves, 0)
        return Basis.of_plan(plan.limit_for(kind), profile.plan_moves, plan.version)

    def stored_org_plan(self, org_id: str, kind: str) -> StoredPlan | None:
        """The organization's plan as stored now, and its limit (None: no such organization)."""
        profile = self._plans.org_profile_of(org_id)
        plan = None if profile is None else self._plans.get(profile.plan_id)
        with self._lock:
            self._org_profile[org_id] = profile
            if profile is not None:
                self._plan[profile.plan_id] = plan
        if profile is None:
            return None
        return StoredPlan(profile.plan_id, 0 if plan is None else plan.limit_for(kind), plan)

    def org_judge(self, org_id: str, kind: str) -> Judge:
        """How an admission on the organization's counter item is judged: its override there,
        else its plan's limit (read through the cache, as an account's plan is; by the plan of the
        creation of the organization that marked the item, never a cached one's of another)."""

        def judged(state: CounterState) -> Judged:
            if state.limit is not None:
                return Judged(state.limit, "override")
            try:
                return Judged(self.org_plan_limit(org_id, kind, state.org_epoch), "plan")
            except (ClientError, BotoCoreError) as error:
                raise store_error(error, "the organization's plan's read") from error

        return judged

    def judge(self, account_id: str, kind: str) -> Judge:
        """How an admission of this account and kind is judged, given the counter item it read."""

        def judged(state: CounterState) -> Judged:
            if state.limit is not None:
                return Judged(state.limit, "override")
            try:
                return self.plan_judged(account_id, kind, state)
            except (ClientError, BotoCoreError) as error:
                # A judge runs inside flows that have written (a re-judge after a refused
                # admission): they take a domain error as "not done" and undo their writes.
                raise store_error(error, "the plan's read") from error

        return judged

    def forget(
        self, account_id: str | None = None, plan_id: str | None = None, org_id: str | None = None
    ) -> None:
        """Drop what this process cached after it changed it itself (its own next request sees
        the change at once; other processes within cache_seconds)."""
        with self._lock:
            if account_id is not None:
                self._plan_of.pop(account_id, None)
            if plan_id is not None:
                self._plan.pop(plan_id, None)
            if org_id is not None:
                profile = self._org_profile.pop(org_id, None)
                if profile is not None:
                    self._plan.pop(profile.plan_id, None)


def _marked_plan(state: CounterState, profile: AccountProfile) -> str | None:
    """The plan the item's move mark names, where it is this process's newest view of the
    account's plan: a mark at least the cached profile's move (the same move: the same plan)."""
    return state.plan_of if (state.plan_move or 0) >= profile.plan_moves else None
