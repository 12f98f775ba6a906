"""The per-account counter item: both counters, the account's limit and the API path's writes to it.

Attributes: ``best_effort`` (API path), ``eventual`` (stream path), ``limit`` (absent: the
stack default), ``last_admission`` ("<resource_id>#<incarnation>" of the latest admitted create;
its change in the stream is what tells the stream path to count that resource) and
``uncounting`` (string set of tokens of deletes that already decremented best_effort and wait
for the stream to hard-delete; it makes a retried delete uncount once).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import NOT_APPLIED_ERRORS, Clients, error_code
from hybrid_counter.errors import StoreUnavailable
from hybrid_counter.keys import counter_key, counter_shard

if TYPE_CHECKING:
    from hybrid_counter.observability import Observability

# Bound on the uncounting set: past it, deletes fall back to a plain decrement (see uncount()).
UNCOUNTING_CAP = 200
_THROTTLE_RETRIES = 6


@dataclass(frozen=True)
class CounterState:
    best_effort: int = 0
    eventual: int = 0
    limit: int | None = None
    uncounting: frozenset[str] = frozenset()

    def effective_limit(self, default_limit: int) -> int:
        return default_limit if self.limit is None else self.limit

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual)

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> CounterState:
        if not item:
            return cls()
        limit = item.get("limit")
        return cls(
            best_effort=int(item.get("best_effort", {"N": "0"})["N"]),
            eventual=int(item.get("eventual", {"N": "0"})["N"]),
            limit=None if limit is None else int(limit["N"]),
            uncounting=frozenset(item.get("uncounting", {}).get("SS", [])),
        )


class AdmissionOutcome:
    ADMITTED = "admitted"
    REJECTED = "rejected"
    UNKNOWN = "unknown"  # the write may or may not have happened: treat as not counted


@dataclass(frozen=True)
class Admission:
    outcome: str
    state: CounterState


class CounterItemStore:
    def __init__(self, table_name: str, default_limit: int, clients: Clients, obs: Observability) -> None:
        self._table = table_name
        self._default_limit = default_limit
        self._clients = clients
        self._obs = obs

    @property
    def default_limit(self) -> int:
        return self._default_limit

    def read(self, account_id: str) -> CounterState:
        response = self._clients.dynamodb.get_item(
            TableName=self._table, Key=counter_key(account_id), ConsistentRead=True
        )
        return CounterState.from_item(response.get("Item"))

    def set_limit(self, account_id: str, limit: int) -> None:
        self._clients.dynamodb.update_item(
            TableName=self._table,
            Key=counter_key(account_id),
            UpdateExpression="SET #limit = :limit, #cs = if_not_exists(#cs, :cs)",
            ExpressionAttributeNames={"#limit": "limit", "#cs": "counter_shard"},
            ExpressionAttributeValues={":limit": {"N": str(limit)}, ":cs": {"S": counter_shard(account_id)}},
        )

    def admit(self, account_id: str, admission_token: str, seen: CounterState) -> Admission:
        """Increment best_effort if, and only if, both counters are below the limit.

        ``seen`` is the state read before the resource was written; the write is conditional on
        the limit still being the one we judged by, so a concurrent limit change re-evaluates.
        """
        state = seen
        for _ in range(4):
            limit = state.effective_limit(self._default_limit)
            if state.used >= limit:
                return Admission(AdmissionOutcome.REJECTED, state)
            names = {
                "#be": "best_effort",
                "#ev": "eventual",
                "#limit": "limit",
                "#adm": "last_admission",
                "#cs": "counter_shard",
            }
            values: dict[str, Any] = {
                ":one": {"N": "1"},
                ":zero": {"N": "0"},
                ":cap": {"N": str(limit)},
                ":adm": {"S": admission_token},
                ":cs": {"S": counter_shard(account_id)},
            }
            limit_unchanged = "attribute_not_exists(#limit)"
            if state.limit is not None:
                limit_unchanged = "#limit = :cap"
            condition = (
                "(attribute_not_exists(#be) OR #be < :cap) AND "
                f"(attribute_not_exists(#ev) OR #ev < :cap) AND {limit_unchanged}"
            )
            try:
                self._single_attempt_update(
                    Key=counter_key(account_id),
                    UpdateExpression=(
                        "SET #be = if_not_exists(#be, :zero) + :one, #adm = :adm, "
                        "#cs = if_not_exists(#cs, :cs)"
                    ),
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
            except ClientError as error:
                if error_code(error) == "ConditionalCheckFailedException":
                    state = CounterState.from_item(error.response.get("Item"))  # type: ignore[arg-type]
                    continue
                return self._unknown(account_id, error_code(error))
            except BotoCoreError as error:  # timeouts, connection resets: outcome unknown
                return self._unknown(account_id, type(error).__name__)
            return Admission(AdmissionOutcome.ADMITTED, state)
        # The limit kept moving under us: judge by the last state seen, conservatively.
        return Admission(AdmissionOutcome.REJECTED, state)

    def _unknown(self, account_id: str, reason: str) -> Admission:
        self._obs.count("BestEffortIncrementFailed")
        self._obs.logger.warning(
            "best-effort increment failed; the resource stays uncounted on the API path",
            extra={"account_id": account_id, "reason": reason},
        )
        return Admission(AdmissionOutcome.UNKNOWN, CounterState())

    def uncount(self, account_id: str, token: str) -> None:
        """Decrement best_effort once per token, before the resource is soft-deleted.

        The token set makes the decrement idempotent, so botocore may retry it freely and a
        client's retried DELETE does not uncount twice. The stream path removes the token when it
        hard-deletes the resource, and healing waits while any token is present.
        """
        state = self._uncount_with_token(account_id, token, decrement=True)
        if state is None or token in state.uncounting:
            return
        if len(state.uncounting) < UNCOUNTING_CAP:
            # best_effort is already 0 (it undercounts; going negative would let it overcount
            # later): record the token alone, so healing still waits for the hard delete.
            state = self._uncount_with_token(account_id, token, decrement=False)
            if state is None or token in state.uncounting:
                return
        # The set is full (a long stream backlog): decrement without the token. A retry may then
        # uncount twice, which undercounts (safe); heal_fence keeps healing off meanwhile.
        self._obs.count("UncountingSetFull")
        now = {":now": {"N": str(int(time.time()))}}
        try:
            self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=counter_key(account_id),
                UpdateExpression="SET #be = #be - :one, #fence = :now",
                ConditionExpression="#be > :zero",
                ExpressionAttributeNames={"#be": "best_effort", "#fence": "heal_fence"},
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}, **now},
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise StoreUnavailable("could not update the account's counter; retry the request") from error
            self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=counter_key(account_id),
                UpdateExpression="SET #fence = :now",
                ExpressionAttributeNames={"#fence": "heal_fence"},
                ExpressionAttributeValues=now,
            )

    def _uncount_with_token(self, account_id: str, token: str, *, decrement: bool) -> CounterState | None:
        """One conditional write; None when it applied, else the state that refused it."""
        values: dict[str, Any] = {
            ":tok": {"S": token},
            ":tokset": {"SS": [token]},
            ":cap": {"N": str(UNCOUNTING_CAP)},
        }
        condition = "NOT contains(#unc, :tok) AND (attribute_not_exists(#unc) OR size(#unc) < :cap)"
        update = "ADD #unc :tokset"
        names = {"#unc": "uncounting"}
        if decrement:
            values.update({":one": {"N": "1"}, ":zero": {"N": "0"}})
            names["#be"] = "best_effort"
            condition = f"#be > :zero AND {condition}"
            update = f"SET #be = #be - :one {update}"
        try:
            self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=counter_key(account_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise StoreUnavailable("could not update the account's counter; retry the request") from error
            return CounterState.from_item(error.response.get("Item"))  # type: ignore[arg-type]
        return None

    def _single_attempt_update(self, **kwargs: Any) -> None:
        """UpdateItem without blind retries: only errors that prove nothing was written are retried."""
        delay = 0.02
        for attempt in range(_THROTTLE_RETRIES):
            try:
                self._clients.dynamodb_single_attempt.update_item(
                    TableName=self._table, ReturnValuesOnConditionCheckFailure="ALL_OLD", **kwargs
                )
                return
            except ClientError as error:
                if error_code(error) not in NOT_APPLIED_ERRORS or attempt == _THROTTLE_RETRIES - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
