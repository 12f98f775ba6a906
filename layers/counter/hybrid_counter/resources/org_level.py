"""The organization's level of an account's creates, deletes and resizes (design.md §10).

An account that belongs to an organization has its units held twice: by its own counter item and
by its organization's (``ORG#<org>`` / ``COUNTER#<kind>#0``). Each level is admitted, released and
moved with its own conditional single-item write, in a fixed order, so no transaction is ever on
the API path:

- a create is admitted by the **organization first, then the account**: the account's admission
  is the commit point (the stream path counts and makes live a resource on its account's
  admission, as for any account); an account that refuses (at its limit, or no longer in the
  organization) has the organization's admission undone;
- a delete releases the **organization first, then the account** (whose release the stream path
  finishes the delete by, as for any account): a delete that dies between the two leaves its
  claim, and the takeover releases the organization only if the stream path has not seen that
  release (``org_released``);
- a grow is admitted by the organization first, then the account (undone at the organization if
  the account refuses); a shrink is released by the account first, then the organization.

The resource records the organization (``org``, written with the pending item: the levels that
hold its units), and the stream path marks what it saw apply at the organization's level: it
counts the resource there exactly once (``org_counted``), and notes a release or a resize there
(``org_released``, ``org_resize``) on the claim that made it. A repair that finds a request dead
(older than the grace period) trusts those marks: the stream path would have made them within
its lag (the same assumption the takeover of a dead delete makes, design.md §4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import Attempted, Effect
from hybrid_counter.counters import Admission, CounterState, CounterStore, Judge, Judged
from hybrid_counter.counters.expressions import Membership
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import member_token, org_counter_key, profile_key, resize_token
from hybrid_counter.resources import items
from hybrid_counter.resources.table import Item, ResourceTable

if TYPE_CHECKING:
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability

OrgJudge = Callable[[str, str], Judge]  # (org, kind) -> how its admissions are judged


def releases_only(org: str, kind: str) -> Judge:
    """For flows that only release at an organization (deletes, repairs): never asked to judge."""

    def judged(_: CounterState) -> Judged:
        raise AssertionError(f"an admission at organization {org} ({kind}) in a flow that only releases")

    return judged


class OrgLevel:
    def __init__(
        self,
        table: ResourceTable,
        account_counters: CounterStore,
        judge: OrgJudge,
        effects: Effects,
        obs: Observability,
    ) -> None:
        self._table = table
        self._account_counters = account_counters
        self._judge = judge
        self._fx = effects
        self._obs = obs
        self.counters = CounterStore(
            table.name,
            0,
            table.clients,
            obs,
            effects,
            default_kind=account_counters.default_kind,
            key_of=lambda org, kind: org_counter_key(org, kind=kind),
        )

    # ---- membership --------------------------------------------------------------------------------
    def membership(self, account_id: str, kind: str, state: CounterState) -> Membership:
        """The organization the account belongs to for this kind, as the create judges it: its
        counter item says (every admission on it is conditional on that); where it does not say
        yet (a kind's first create), its profile (a consistent read: paid once a kind)."""
        if state.org_known:
            return Membership(state.org)
        profile = (
            self._table.clients.dynamodb.get_item(
                TableName=self._table.name, Key=profile_key(account_id), ConsistentRead=True
            ).get("Item")
            or {}
        )
        return Membership(profile.get("org_id", {}).get("S"))

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
    def read(self, org: str, kind: str) -> CounterState:
        return self.counters.read(org, kind=kind)

    def precheck(self, org: str, kind: str, units: int) -> CounterState:
        """The organization's counter as read before anything is written; LimitExceeded (scope
        organization) if the units do not fit."""
        state = self.read(org, kind)
        judged = self._judge(org, kind)(state)
        if not state.admits(judged.limit, units):
            self._obs.count("LimitExceeded")
            raise LimitExceeded(judged.limit, state.used, kind, units, scope="organization")
        return state

    def admit(
        self,
        org: str,
        account_id: str,
        rid: str,
        incarnation: str,
        *,
        kind: str,
        units: int,
        seen: CounterState,
    ) -> Admission:
        """The organization's admission of a create's units (single attempt, as an account's)."""
        return self.counters.admit(
            org,
            rid,
            member_token(account_id, rid, incarnation),
            seen,
            kind=kind,
            units=units,
            judge=self._judge(org, kind),
        )

    def admitted_after_all(self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str) -> bool:
        """After an organization's admission whose outcome is unknown: its counter item's
        last_admission answers unless another came since; then the stream path, which counts the
        resource there only if it applied (``org_counted``), usually answers within a second."""

        def counted() -> bool | None:
            found = self._table.get(account_id, rid, kind=kind)
            if found is not None and items.incarnation_of(found) == incarnation and items.org_counted(found):
                return True
            return None

        try:
            if self.read(org, kind).last_admission == member_token(account_id, rid, incarnation):
                return True
            return self._fx.waiter.until(counted) is not None
        except (ClientError, BotoCoreError):
            return False

    def refused(self, admission: Admission, kind: str, units: int) -> LimitExceeded:
        limit = admission.judged.limit if admission.judged else 0
        return LimitExceeded(limit, admission.state.used, kind, units, scope="organization")

    # ---- undoing an organization's admission (its account refused the create) ----------------------
    def undo(self, account_id: str, rid: str, incarnation: str, *, kind: str, org: str, units: int) -> bool:
        """Release what the organization's admission took, for a create its account refused,
        then remove the pending item. The item is marked ``undoing`` first, so the stream path no
        longer counts it there and the release knows whether it had. True when done; False when
        a write could not be made or confirmed: the item stays pending, marked and indexed, and
        the sweeper finishes it after the grace period (it holds no slot anyone can see)."""
        marked = self._table.mark_undoing(account_id, rid, incarnation, kind=kind)
        if not marked.applied or marked.item is None:
            return False
        counted = items.org_counted(marked.item)
        attempt = self.counters.release(
            org, rid, member_token(account_id, rid, incarnation), counted, kind=kind, units=units
        )
        if not attempt.applied and not self.released_after_all(org, account_id, rid, incarnation, kind=kind):
            self._obs.count("OrgUndoLeftToSweeper")
            return False
        self._table.drop_undone(account_id, rid, incarnation, kind=kind)
        return True

    def released_after_all(self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str) -> bool:
        """After an organization's release whose outcome is unknown: last_release, or the stream
        path's mark on the item (``org_released``)."""

        def marked() -> bool | None:
            found = self._table.get(account_id, rid, kind=kind)
            if found is None or items.incarnation_of(found) != incarnation:
                return True  # gone: whoever removed it saw the release
            return True if found.get("org_released", {}).get("BOOL") else None

        try:
            if self.read(org, kind).last_release == member_token(account_id, rid, incarnation):
                return True
            return self._fx.waiter.until(marked) is not None
        except (ClientError, BotoCoreError):
            return False

    # ---- releases (deletes) ------------------------------------------------------------------------
    def release(
        self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str, units: int, counted: bool
    ) -> Attempted:
        return self.counters.release(
            org, rid, member_token(account_id, rid, incarnation), counted, kind=kind, units=units
        )

    def release_resolved(
        self, org: str, account_id: str, rid: str, incarnation: str, *, kind: str, units: int, counted: bool
    ) -> Effect | None:
        """Release a claimed resource's units at its organization: None once released (this
        call or, outcome unknown, confirmed), else the effect of the attempt that did not."""
        attempt = self.release(org, account_id, rid, incarnation, kind=kind, units=units, counted=counted)
        if attempt.applied:
            return None
        if attempt.effect is Effect.UNKNOWN and self.released_after_all(
            org, account_id, rid, incarnation, kind=kind
        ):
            return None
        return attempt.effect

    # ---- resizes -----------------------------------------------------------------------------------
    def resize(
        self,
        org: str,
        account_id: str,
        rid: str,
        incarnation: str,
        request_id: str,
        *,
        kind: str,
        delta: int,
        counted: bool,
        phase: str,
    ) -> Admission:
        """Move the organization's counters by ``delta`` for a resize (a grow admitted like a
        create of delta units); ``phase`` names the write on its token (move, undo, settle), so
        the stream path's mark says which applied."""
        seen = self.read(org, kind)
        return self.counters.resize(
            org,
            rid,
            f"{account_id}/{resize_token(rid, incarnation, request_id)}#{phase}",
            delta,
            counted=counted,
            seen=seen,
            kind=kind,
            judge=self._judge(org, kind),
        )


def org_resize_mark(item: Item) -> str:
    """The last organization's resize write the stream path saw apply for the item's claim:
    ``<request>#<phase>`` (empty: none)."""
    return str(item.get("org_resize", {}).get("S", ""))
