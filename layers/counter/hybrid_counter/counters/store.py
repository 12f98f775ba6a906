"""Reads and single-item writes of the counter item: the API path's admission and release, limit
changes, and the heal. No transaction here: the only transactions on this item are the stream
path's counting (counting/eventual.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError

from hybrid_counter.aws import (
    CONDITION_FAILED,
    Attempted,
    Clients,
    Effect,
    attempt_write,
    error_code,
    retry_conflicts,
)
from hybrid_counter.counters import expressions
from hybrid_counter.counters.state import CounterState, PlanMark
from hybrid_counter.errors import StoreUnavailable, Throttled
from hybrid_counter.keys import COUNTER_PREFIX, DEFAULT_KIND, account_pk, counter_key, parse_counter_sk

if TYPE_CHECKING:
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability


class AdmissionOutcome(Enum):
    ADMITTED = "admitted"
    REJECTED = "rejected"  # the account is at its limit
    MOVED = "moved"  # the account's organization changed since it was judged: judge it again
    NOT_APPLIED = "not_applied"  # throttled (or unreachable) on every attempt: nothing was written
    UNKNOWN = "unknown"  # the write may or may not have taken effect


LimitSource = Literal["override", "plan"]


@dataclass(frozen=True)
class Judged:
    """The limit an admission is judged by, and where it came from."""

    limit: int
    source: LimitSource
    # (an account's plan) the move mark the item held when judged (0: none): the write is
    # conditional on it, so a move marked meanwhile is judged again (plans/limits.py); None: no
    # mark judged by (an override; an organization's item)
    plan_move: int | None = None
    # (an account's plan, judged by a later move than the item's mark) the mark its write leaves
    mark: PlanMark | None = None

    @property
    def override(self) -> bool:
        return self.source == "override"

    @property
    def plan_pin(self) -> int | None:
        return None if self.override else self.plan_move


Judge = Callable[[CounterState], Judged]
KeyOf = Callable[[str, str], dict[str, Any]]  # (owner, kind) -> the counter item's key


@dataclass(frozen=True)
class Admission:
    outcome: AdmissionOutcome
    state: CounterState  # the state the decision was made on
    throttled: bool = False
    judged: Judged | None = None  # the limit the decision was made by
    # A split counter's refusal, as its picture of every shard said: whether any shard ever
    # admitted a hold, and how many shard items there were (None: one item's state, as read)
    holds_used: bool | None = None
    items: int | None = None


class CounterStore:
    def __init__(
        self,
        table_name: str,
        default_limit: int,
        clients: Clients,
        obs: Observability,
        effects: Effects,
        *,
        default_kind: str = DEFAULT_KIND,
        key_of: KeyOf | None = None,
    ) -> None:
        self._table = table_name
        self._default_limit = default_limit
        self._clients = clients
        self._obs = obs
        self._effects = effects
        self.default_kind = default_kind
        # Whose counter items: an account's (the default) or an organization's (orgs/).
        self._key_of: KeyOf = key_of or (lambda owner, kind: counter_key(owner, kind=kind))
        self._listed = key_of is None

    @property
    def default_limit(self) -> int:
        return self._default_limit

    def default_judge(self, state: CounterState) -> Judged:
        """Without plans (tools and tests): the override, else the stack's default limit."""
        if state.limit is not None:
            return Judged(state.limit, "override")
        return Judged(self._default_limit, "plan")

    def read(self, account_id: str, *, kind: str | None = None) -> CounterState:
        response = self._clients.dynamodb.get_item(
            TableName=self._table,
            Key=self._key_of(account_id, kind or self.default_kind),
            ConsistentRead=True,
        )
        return CounterState.from_item(response.get("Item"))

    def read_all(self, account_id: str) -> dict[str, CounterState]:
        """Every counter item of the account, by kind: one consistent Query (a few hundred bytes
        a kind: 100 kinds are 10 read units)."""
        found: dict[str, CounterState] = {}
        paginator = self._clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": COUNTER_PREFIX},
            },
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                found[parse_counter_sk(str(item["sk"]["S"]))] = CounterState.from_item(item)
        return found

    def set_limit(self, account_id: str, limit: int, *, kind: str | None = None) -> None:
        args = expressions.set_limit(account_id, limit).update_key(
            self._table, self._key_of(account_id, kind or self.default_kind)
        )
        retry_conflicts(lambda: self._clients.dynamodb.update_item(**args), self._effects.retry)

    def remove_limit(self, account_id: str, *, kind: str | None = None) -> None:
        args = expressions.remove_limit().update_key(
            self._table, self._key_of(account_id, kind or self.default_kind)
        )
        retry_conflicts(lambda: self._clients.dynamodb.update_item(**args), self._effects.retry)

    def admit(
        self,
        account_id: str,
        resource_id: str,
        admission_token: str,
        seen: CounterState,
        *,
        kind: str | None = None,
        units: int = 1,
        judge: Judge | None = None,
        membership: expressions.Membership | None = None,
        hold: bool = False,
        org_epoch: int | None = None,
    ) -> Admission:
        """best_effort + units if, and only if, both counters leave room for them under the
        limit: one conditional write (on an account's counter item, also conditional on the
        ``membership`` it was judged by: MOVED if it changed; on an organization's single item,
        on the creation of the organization that opened it, ``org_epoch``: MOVED if another).

        It runs on a client without botocore retries: a blind retry after a lost response would
        count the resource twice. ``seen`` is the state read before the resource was written; the
        write is conditional on the limit judged by (the override, or its absence), so a
        concurrent limit change is re-judged, by ``judge``, on the state that refused it.
        """
        judged_by = judge or self.default_judge
        kind = kind or self.default_kind
        state = seen
        for _ in range(4):
            judged = _judge(judged_by, state)
            if not isinstance(judged, Judged):
                return judged
            if not state.admits(judged.limit, units):
                return Admission(AdmissionOutcome.REJECTED, state, judged=judged)
            args: dict[str, Any] = expressions.admission(
                account_id,
                resource_id,
                admission_token,
                judged.limit,
                judged.limit if judged.override else None,
                units=units,
                plan_pin=judged.plan_pin,
                plan_mark=None if judged.override else judged.mark,
                membership=membership,
                listed=self._listed,
                kind=kind,
                hold=hold,
                org_epoch=org_epoch,
            ).update_key(self._table, self._key_of(account_id, kind))
            args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            attempt = self._once(args)
            if attempt.applied:
                return Admission(AdmissionOutcome.ADMITTED, state, judged=judged)
            if attempt.effect is Effect.CONDITION_FAILED:
                state = self._refused_on(attempt)
                moved = membership is not None and state.org_known and state.org != membership.org
                # (or an organization's item split meanwhile: its admission is a shard's, split.py;
                # or removed by DELETE /orgs, or not opened by the organization judged by:
                # org_level.py)
                gone = not self._listed and (not state.exists or state.org_epoch != (org_epoch or 0))
                if moved or gone or state.in_a_split:
                    return Admission(AdmissionOutcome.MOVED, state, judged=judged)
                continue
            return self._not_admitted(attempt, state, judged, account_id)
        # The limit kept moving under us: judge by the last state seen, conservatively.
        last = _judge(judged_by, state)
        return Admission(AdmissionOutcome.REJECTED, state, judged=last) if isinstance(last, Judged) else last

    def _not_admitted(
        self, attempt: Attempted, state: CounterState, judged: Judged, account_id: str
    ) -> Admission:
        if attempt.effect is Effect.NOT_APPLIED:
            self._obs.count("AdmissionNotApplied")
            return Admission(AdmissionOutcome.NOT_APPLIED, state, throttled=attempt.throttled, judged=judged)
        self._obs.count("AdmissionOutcomeUnknown")
        self._obs.logger.warning(
            "admission outcome unknown", extra={"account_id": account_id, "error": repr(attempt.error)}
        )
        return Admission(AdmissionOutcome.UNKNOWN, state, judged=judged)

    @staticmethod
    def _refused_on(attempt: Attempted) -> CounterState:
        """The item as it was when a conditional write was refused (ALL_OLD)."""
        assert isinstance(attempt.error, ClientError)
        return CounterState.from_item(attempt.error.response.get("Item"))  # type: ignore[arg-type]

    def release(
        self,
        account_id: str,
        resource_id: str,
        release_token: str,
        counted: bool,
        *,
        kind: str | None = None,
        units: int = 1,
    ) -> Attempted:
        """best_effort - units (and eventual - units if the stream had counted it): the delete's
        slot is free.

        Single attempt: the delete's claim on the resource item makes sure only one request
        releases one incarnation, and a blind retry could release it twice. Its one condition,
        best_effort >= units, only fails when best_effort already undercounts; then the release is
        made again taking best_effort to 0 (conditional on the value it was refused on), never
        below (expressions.release).
        """
        kind = kind or self.default_kind
        seen: int | None = None
        attempt = Attempted(Effect.NOT_APPLIED)
        for _ in range(4):
            expr = expressions.release(
                resource_id,
                release_token,
                counted,
                units=units,
                best_effort_seen=seen,
                must_exist=not self._listed,
            )
            args: dict[str, Any] = expr.update_key(self._table, self._key_of(account_id, kind))
            args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            attempt = self._once(args)
            if attempt.effect is not Effect.CONDITION_FAILED:
                break
            refused = self._refused_on(attempt)
            if not self._listed and not refused.exists:
                # DELETE /orgs removes an organization's counter item only while it holds
                # nothing: nothing was held there to release
                return Attempted(None)
            seen = max(0, refused.best_effort)
        if not attempt.applied:
            self._obs.count(
                "ReleaseNotApplied" if attempt.effect is Effect.NOT_APPLIED else "ReleaseOutcomeUnknown"
            )
        return attempt

    def resize(
        self,
        account_id: str,
        resource_id: str,
        resize_token: str,
        delta: int,
        *,
        counted: bool,
        seen: CounterState,
        kind: str,
        judge: Judge | None = None,
    ) -> Admission:
        """Move both counters by ``delta`` units for a resize (single attempt, as the admission and
        the release: a blind retry would move them twice). Growing is admitted like a create of
        ``delta`` units; shrinking always applies (best_effort floored at 0)."""
        judged_by = judge or self.default_judge
        state = seen
        floor: int | None = None
        for _ in range(4):
            judged = _judge(judged_by, state)
            if not isinstance(judged, Judged):
                return judged
            if delta > 0 and not state.admits(judged.limit, delta):
                return Admission(AdmissionOutcome.REJECTED, state, judged=judged)
            expr = expressions.resize(
                resource_id,
                resize_token,
                delta,
                counted,
                cap=judged.limit,
                limit_seen=judged.limit if judged.override else None,
                plan_pin=judged.plan_pin,
                best_effort_seen=floor,
                single=not self._listed,
            )
            args: dict[str, Any] = expr.update_key(self._table, self._key_of(account_id, kind))
            args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            attempt = self._once(args)
            if attempt.applied:
                return Admission(AdmissionOutcome.ADMITTED, state, judged=judged)
            if attempt.effect is Effect.CONDITION_FAILED:
                state = self._refused_on(attempt)
                if delta > 0 and not self._listed and state.in_a_split:
                    # an organization's item split meanwhile: the grow is a shard's (org_level.py)
                    return Admission(AdmissionOutcome.MOVED, state, judged=judged)
                floor = max(0, state.best_effort) if delta < 0 else None
                continue
            return self._not_admitted(attempt, state, judged, account_id)
        last = _judge(judged_by, state)
        return Admission(AdmissionOutcome.REJECTED, state, judged=last) if isinstance(last, Judged) else last

    def heal(self, account_id: str, *, kind: str | None = None) -> bool:
        """best_effort := eventual if it is below (one conditional write); False if it was not."""
        args = expressions.heal().update_key(self._table, self._key_of(account_id, kind or self.default_kind))
        try:
            retry_conflicts(lambda: self._clients.dynamodb.update_item(**args), self._effects.retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        self._obs.count("BestEffortHealed")
        return True

    def _once(self, args: dict[str, Any]) -> Attempted:
        return attempt_write(
            lambda: self._clients.dynamodb_single_attempt.update_item(**args), self._effects.retry
        )


def _judge(judged_by: Judge, state: CounterState) -> Judged | Admission:
    """The limit to judge by, or, if it could not be read (the plan's read failed), an admission
    not applied: the caller has written its resource and undoes it, as for a throttled write."""
    try:
        return judged_by(state)
    except (Throttled, StoreUnavailable) as error:
        return Admission(AdmissionOutcome.NOT_APPLIED, state, throttled=isinstance(error, Throttled))
