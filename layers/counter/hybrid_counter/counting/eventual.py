"""Apply counting operations to the eventual counter with conditional transactions.

Batched mode folds a sequence of operations into as few TransactWriteItems calls as the
100-action limit allows: one counter update per account per chunk (the net delta), plus one
conditional write per resource. Per-record mode uses one transaction per operation; it is the
baseline the benchmark compares against.

A cancelled transaction reports a reason per action. ConditionalCheckFailed on a resource means
another delivery already did that work (or the resource was deleted first): the operation is
dropped after a consistent read confirms it, and the rest is retried. Conflicts and throttling
are retried with backoff; if a chunk still fails, ChunkFailed names the first operation not
known to be applied, so the caller can report exactly the records from there on.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.counting.ops import CountOp, Op, UncountOp
from hybrid_counter.keys import counter_key, counter_shard, resource_key
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.settings import CountingMode

MAX_ACTIONS = 100
MAX_ATTEMPTS = 6
RETRYABLE_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)
RETRYABLE_ERRORS = frozenset(
    {
        "TransactionConflictException",
        "TransactionInProgressException",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "InternalServerError",
    }
)


class CountingError(RuntimeError):
    pass


class ChunkFailed(CountingError):
    def __init__(self, first_unapplied: int, cause: str) -> None:
        super().__init__(f"counting failed at operation {first_unapplied}: {cause}")
        self.first_unapplied = first_unapplied


@dataclass
class ApplyReport:
    counted: int = 0
    uncounted: int = 0
    hard_deleted_uncounted: int = 0
    already_done: int = 0
    transactions: int = 0
    cancelled: int = 0
    retried: int = 0
    transaction_sizes: list[int] = field(default_factory=list)

    def merge(self, other: ApplyReport) -> None:
        self.counted += other.counted
        self.uncounted += other.uncounted
        self.hard_deleted_uncounted += other.hard_deleted_uncounted
        self.already_done += other.already_done
        self.transactions += other.transactions
        self.cancelled += other.cancelled
        self.retried += other.retried
        self.transaction_sizes.extend(other.transaction_sizes)


def plan_chunks(ops: Sequence[Op], mode: CountingMode) -> list[tuple[int, list[Op]]]:
    """Split ops, in order, into chunks that fit one transaction and touch each resource once."""
    if mode == "per_record":
        return [(index, [op]) for index, op in enumerate(ops)]
    chunks: list[tuple[int, list[Op]]] = []
    start, current, items, accounts = 0, [], set(), set()  # type: ignore[var-annotated]
    for index, op in enumerate(ops):
        needed = 1 + (0 if op.account_id in accounts else 1)
        if current and (op.item in items or len(items) + len(accounts) + needed > MAX_ACTIONS):
            chunks.append((start, current))
            start, current, items, accounts = index, [], set(), set()
        current.append(op)
        items.add(op.item)
        accounts.add(op.account_id)
    if current:
        chunks.append((start, current))
    return chunks


class EventualCounter:
    def __init__(
        self,
        table_name: str,
        mode: CountingMode = "batched",
        clients: Clients | None = None,
        obs: Observability | None = None,
        sleep: Any = time.sleep,
    ) -> None:
        self._table = table_name
        self._mode = mode
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._sleep = sleep

    def apply(self, ops: Sequence[Op]) -> ApplyReport:
        report = ApplyReport()
        for start, chunk in plan_chunks(ops, self._mode):
            try:
                report.merge(self._apply_chunk(chunk))
            except CountingError as error:
                self._emit(report)
                raise ChunkFailed(start, str(error)) from error
        self._emit(report)
        return report

    def _emit(self, report: ApplyReport) -> None:
        self._obs.count("EventualCounted", report.counted)
        self._obs.count("EventualUncounted", report.uncounted)
        self._obs.count("HardDeletedUncounted", report.hard_deleted_uncounted)
        self._obs.count("DuplicatesSkipped", report.already_done)
        self._obs.count("TransactionsCancelled", report.cancelled)

    # ---- one chunk ----------------------------------------------------------------------------
    def _apply_chunk(self, chunk: list[Op]) -> ApplyReport:
        report = ApplyReport()
        remaining = list(chunk)
        delay = 0.05
        for attempt in range(MAX_ATTEMPTS):
            if not remaining:
                return report
            actions, action_ops = self._actions(remaining)
            try:
                report.transactions += 1
                report.transaction_sizes.append(len(actions))
                self._clients.dynamodb.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
            except ClientError as error:
                code = error_code(error)
                if code == "TransactionCanceledException":
                    report.cancelled += 1
                    reasons = [dict(r) for r in error.response.get("CancellationReasons", [])]
                    remaining, retry_needed = self._resolve(remaining, action_ops, reasons, report)
                    if not retry_needed:
                        continue  # only "already done" operations were dropped: go again at once
                elif code not in RETRYABLE_ERRORS:
                    raise CountingError(f"{code}: {error}") from error
                if attempt == MAX_ATTEMPTS - 1:
                    raise CountingError(f"gave up after {MAX_ATTEMPTS} attempts ({code})") from error
                report.retried += 1
                self._sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
                continue
            for op in remaining:
                if isinstance(op, CountOp):
                    report.counted += 1
                elif op.counted:
                    report.uncounted += 1
                else:
                    report.hard_deleted_uncounted += 1
            return report
        if remaining:
            raise CountingError(f"operations still pending after {MAX_ATTEMPTS} attempts")
        return report

    def _actions(self, ops: list[Op]) -> tuple[list[dict[str, Any]], list[Op | None]]:
        """Transaction actions for ops; action_ops[i] is the op behind action i (None: counter)."""
        per_account: dict[str, tuple[int, list[str]]] = {}
        for op in ops:
            delta, tokens = per_account.get(op.account_id, (0, []))
            if isinstance(op, CountOp):
                delta += 1
            else:
                tokens = [*tokens, op.token]
                delta -= 1 if op.counted else 0
            per_account[op.account_id] = (delta, tokens)
        actions: list[dict[str, Any]] = []
        action_ops: list[Op | None] = []
        for account_id, (delta, tokens) in per_account.items():
            if delta == 0 and not tokens:
                continue
            # counting_version changes with every counted-state change, so an operator's recount
            # can tell whether the stream path moved while it was counting.
            expression = "SET #cs = if_not_exists(#cs, :cs) ADD #ev :delta, #ver :one"
            values: dict[str, Any] = {
                ":delta": {"N": str(delta)},
                ":one": {"N": "1"},
                ":cs": {"S": counter_shard(account_id)},
            }
            names = {"#ev": "eventual", "#ver": "counting_version", "#cs": "counter_shard"}
            if tokens:
                expression += " DELETE #unc :tokens"
                values[":tokens"] = {"SS": sorted(set(tokens))}
                names["#unc"] = "uncounting"
            actions.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": counter_key(account_id),
                        "UpdateExpression": expression,
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                }
            )
            action_ops.append(None)
        for op in ops:
            actions.append(self._resource_action(op))
            action_ops.append(op)
        return actions, action_ops

    def _resource_action(self, op: Op) -> dict[str, Any]:
        key = resource_key(op.account_id, op.resource_id)
        if isinstance(op, CountOp):
            return {
                "Update": {
                    "TableName": self._table,
                    "Key": key,
                    "UpdateExpression": "SET counter_processed = :true REMOVE pending_shard, pending_since",
                    "ConditionExpression": (
                        "incarnation = :inc AND counter_processed = :false AND deleted = :false"
                    ),
                    "ExpressionAttributeValues": {
                        ":inc": {"S": op.incarnation},
                        ":true": {"BOOL": True},
                        ":false": {"BOOL": False},
                    },
                }
            }
        return {
            "Delete": {
                "TableName": self._table,
                "Key": key,
                "ConditionExpression": (
                    "incarnation = :inc AND deleted = :true AND counter_processed = :counted"
                ),
                "ExpressionAttributeValues": {
                    ":inc": {"S": op.incarnation},
                    ":true": {"BOOL": True},
                    ":counted": {"BOOL": op.counted},
                },
            }
        }

    def _resolve(
        self,
        remaining: list[Op],
        action_ops: list[Op | None],
        reasons: list[dict[str, Any]],
        report: ApplyReport,
    ) -> tuple[list[Op], bool]:
        """After a cancellation: drop ops that are already done, correct stale ones, and say
        whether anything other than a condition failure (a conflict, throttling) needs a retry."""
        if len(reasons) != len(action_ops):
            return remaining, True
        retry_needed = False
        replacements: dict[tuple[str, str], Op | None] = {}
        for reason, op in zip(reasons, action_ops, strict=True):
            code = reason.get("Code", "None")
            if code in ("None", None):
                continue
            if code == "ConditionalCheckFailed" and op is not None:
                replacements[op.item] = self._recheck(op)
            elif code in RETRYABLE_REASONS:
                retry_needed = True
            else:
                raise CountingError(f"transaction cancelled: {code} {reason.get('Message', '')}")
        kept: list[Op] = []
        for op in remaining:
            if op.item not in replacements:
                kept.append(op)
                continue
            replacement = replacements[op.item]
            if replacement is None:
                report.already_done += 1
            else:
                kept.append(replacement)
                retry_needed = retry_needed or replacement == op
        return kept, retry_needed

    def _recheck(self, op: Op) -> Op | None:
        """Read the resource and return the op still needed (None: nothing left to do)."""
        item = self._clients.dynamodb.get_item(
            TableName=self._table,
            Key=resource_key(op.account_id, op.resource_id),
            ConsistentRead=True,
        ).get("Item")
        if item is None or item.get("incarnation", {}).get("S") != op.incarnation:
            return None
        deleted = bool(item.get("deleted", {}).get("BOOL", False))
        processed = bool(item.get("counter_processed", {}).get("BOOL", False))
        if isinstance(op, CountOp):
            return op if not deleted and not processed else None
        if not deleted:
            return None
        return (
            op
            if processed == op.counted
            else UncountOp(op.account_id, op.resource_id, op.incarnation, processed)
        )
