"""Reads and single-item writes of the counter item: the API path's admission and release, limit
changes, and the heal. No transaction here: the only transactions on this item are the stream
path's counting (counting/eventual.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

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
from hybrid_counter.counters.state import CounterState
from hybrid_counter.keys import counter_key

if TYPE_CHECKING:
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability


class AdmissionOutcome(Enum):
    ADMITTED = "admitted"
    REJECTED = "rejected"  # the account is at its limit
    NOT_APPLIED = "not_applied"  # throttled (or unreachable) on every attempt: nothing was written
    UNKNOWN = "unknown"  # the write may or may not have taken effect


@dataclass(frozen=True)
class Admission:
    outcome: AdmissionOutcome
    state: CounterState  # the state the decision was made on
    throttled: bool = False


class CounterStore:
    def __init__(
        self, table_name: str, default_limit: int, clients: Clients, obs: Observability, effects: Effects
    ) -> None:
        self._table = table_name
        self._default_limit = default_limit
        self._clients = clients
        self._obs = obs
        self._effects = effects

    @property
    def default_limit(self) -> int:
        return self._default_limit

    def read(self, account_id: str) -> CounterState:
        response = self._clients.dynamodb.get_item(
            TableName=self._table, Key=counter_key(account_id), ConsistentRead=True
        )
        return CounterState.from_item(response.get("Item"))

    def set_limit(self, account_id: str, limit: int) -> None:
        args = expressions.set_limit(account_id, limit).update(self._table, account_id)
        retry_conflicts(lambda: self._clients.dynamodb.update_item(**args), self._effects.retry)

    def admit(self, account_id: str, resource_id: str, admission_token: str, seen: CounterState) -> Admission:
        """best_effort + 1 if, and only if, both counters are below the limit: one conditional write.

        It runs on a client without botocore retries: a blind retry after a lost response would
        count the resource twice. ``seen`` is the state read before the resource was written; the
        write is conditional on the limit judged by, so a concurrent limit change is re-judged.
        """
        state = seen
        for _ in range(4):
            limit = state.effective_limit(self._default_limit)
            if not state.admits(limit):
                return Admission(AdmissionOutcome.REJECTED, state)
            args: dict[str, Any] = expressions.admission(
                account_id, resource_id, admission_token, limit, state.limit
            ).update(self._table, account_id)
            args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            attempt = self._once(args)
            if attempt.applied:
                return Admission(AdmissionOutcome.ADMITTED, state)
            if attempt.effect is Effect.CONDITION_FAILED:
                assert isinstance(attempt.error, ClientError)
                state = CounterState.from_item(attempt.error.response.get("Item"))  # type: ignore[arg-type]
                continue
            if attempt.effect is Effect.NOT_APPLIED:
                self._obs.count("AdmissionNotApplied")
                return Admission(AdmissionOutcome.NOT_APPLIED, state, throttled=attempt.throttled)
            self._obs.count("AdmissionOutcomeUnknown")
            self._obs.logger.warning(
                "admission outcome unknown", extra={"account_id": account_id, "error": repr(attempt.error)}
            )
            return Admission(AdmissionOutcome.UNKNOWN, state)
        # The limit kept moving under us: judge by the last state seen, conservatively.
        return Admission(AdmissionOutcome.REJECTED, state)

    def release(self, account_id: str, resource_id: str, release_token: str, counted: bool) -> Attempted:
        """best_effort - 1 (and eventual - 1 if the stream had counted it): the delete's slot is free.

        Single attempt: the delete's claim on the resource item makes sure only one request
        releases one incarnation, and a blind retry could release it twice. Its one condition,
        best_effort > 0, only fails when best_effort already undercounts; then the same release
        is made without touching best_effort.
        """
        args = expressions.release(resource_id, release_token, counted).update(self._table, account_id)
        attempt = self._once(args)
        if attempt.effect is Effect.CONDITION_FAILED:
            at_zero = expressions.release(resource_id, release_token, counted, best_effort_at_zero=True)
            attempt = self._once(at_zero.update(self._table, account_id))
        if not attempt.applied:
            self._obs.count(
                "ReleaseNotApplied" if attempt.effect is Effect.NOT_APPLIED else "ReleaseOutcomeUnknown"
            )
        return attempt

    def heal(self, account_id: str) -> bool:
        """best_effort := eventual if it is below (one conditional write); False if it was not."""
        args = expressions.heal().update(self._table, account_id)
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
