"""Apply the stream path's operations.

CountOps are folded into as few TransactWriteItems as the 100-action limit allows: one counter
update per account per chunk (the chunk's count, per range) plus one conditional update per
resource, so the hot counter item is written once per up to 99 counted resources instead of once
per resource (per-record mode, one transaction per CountOp, is the baseline the benchmark
compares against). FinishDeleteOps and HealOps are single conditional writes. Every operation
commutes with every other (ops.py), so CountOps are applied first and the rest after.

A cancelled transaction reports a reason per action. ConditionalCheckFailed on a resource means
its work is done or moot (counted already, claimed by a delete, gone): the operation is dropped
after a consistent read confirms it, and the rest is retried. Conflicts and throttling are
retried with backoff; if some operations still fail, ``ChunkFailed`` names them all, so the
caller can report exactly the records from the first of them on.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.counters import expressions
from hybrid_counter.counting.ops import CensusOp, CountOp, FinishDeleteOp, HealOp, Op
from hybrid_counter.keys import resource_key
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.recount_requests import RecountRequests
from hybrid_counter.resources import items
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
    """Some operations could not be applied; ``unapplied`` are their positions in the input."""

    def __init__(self, unapplied: Sequence[int], cause: str) -> None:
        super().__init__(f"counting failed at operation {min(unapplied)}: {cause}")
        self.unapplied = sorted(unapplied)

    @property
    def first_unapplied(self) -> int:
        return self.unapplied[0]


@dataclass
class ApplyReport:
    counted: int = 0
    finished_deletes: int = 0
    healed: int = 0
    already_done: int = 0
    transactions: int = 0
    cancelled: int = 0
    retried: int = 0
    censuses_requested: int = 0
    transaction_sizes: list[int] = field(default_factory=list)

    def merge(self, other: ApplyReport) -> None:
        for name in (
            "counted",
            "finished_deletes",
            "healed",
            "already_done",
            "transactions",
            "cancelled",
            "retried",
            "censuses_requested",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.transaction_sizes.extend(other.transaction_sizes)


def plan_chunks(ops: Sequence[CountOp], mode: CountingMode) -> list[list[int]]:
    """Positions of ``ops`` split, in order, into chunks that fit one transaction (one counter
    action per account plus one per resource) and touch each resource once."""
    if mode == "per_record":
        return [[index] for index in range(len(ops))]
    chunks: list[list[int]] = []
    current: list[int] = []
    resources: set[tuple[str, str]] = set()
    accounts: set[str] = set()
    for index, op in enumerate(ops):
        needed = 1 + (0 if op.account_id in accounts else 1)
        if current and (op.item in resources or len(resources) + len(accounts) + needed > MAX_ACTIONS):
            chunks.append(current)
            current, resources, accounts = [], set(), set()
        current.append(index)
        resources.add(op.item)
        accounts.add(op.account_id)
    if current:
        chunks.append(current)
    return chunks


class EventualCounter:
    def __init__(
        self,
        table_name: str,
        mode: CountingMode = "batched",
        clients: Clients | None = None,
        obs: Observability | None = None,
        sleep: Any = time.sleep,
        *,
        requests: RecountRequests | None = None,
    ) -> None:
        self._table = table_name
        self._mode = mode
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._sleep = sleep
        self._retry = RetryPolicy(sleep=sleep)
        self._requests = requests or RecountRequests(table_name, self._clients, time.time)

    def apply(self, ops: Sequence[Op]) -> ApplyReport:
        report = ApplyReport()
        counts = [(position, op) for position, op in enumerate(ops) if isinstance(op, CountOp)]
        finishes = [(position, op) for position, op in enumerate(ops) if isinstance(op, FinishDeleteOp)]
        censuses = [(position, op) for position, op in enumerate(ops) if isinstance(op, CensusOp)]
        heals = {op.account_id for op in ops if isinstance(op, HealOp)}
        try:
            for chunk in plan_chunks([op for _, op in counts], self._mode):
                try:
                    report.merge(self._count([counts[i][1] for i in chunk]))
                except CountingError as error:
                    failed = [counts[i][0] for i in range(chunk[0], len(counts))]
                    later = [position for position, _ in finishes + censuses]
                    raise ChunkFailed(failed + later, str(error)) from error
            for done, (_, op) in enumerate(finishes):
                try:
                    report.merge(self._finish(op))
                except (ClientError, BotoCoreError) as error:
                    failed = [p for p, _ in finishes[done:] + censuses]
                    raise ChunkFailed(failed, repr(error)) from error
            for done, (_, census) in enumerate(censuses):
                try:
                    self._requests.put(census.account_id, census.range_id, census.reason)
                except (ClientError, BotoCoreError) as error:
                    raise ChunkFailed([p for p, _ in censuses[done:]], repr(error)) from error
                report.censuses_requested += 1
            for account_id in sorted(heals):
                report.merge(self._heal(account_id))
        finally:
            self._emit(report)
        return report

    def _emit(self, report: ApplyReport) -> None:
        self._obs.count("EventualCounted", report.counted)
        self._obs.count("DeletesFinished", report.finished_deletes)
        self._obs.count("DuplicatesSkipped", report.already_done)
        self._obs.count("TransactionsCancelled", report.cancelled)

    # ---- counting: one transaction per chunk ------------------------------------------------------
    def _count(self, chunk: list[CountOp]) -> ApplyReport:
        report = ApplyReport()
        remaining = list(chunk)
        delay = 0.05
        for attempt in range(MAX_ATTEMPTS):
            if not remaining:
                return report
            actions = self._actions(remaining)
            try:
                report.transactions += 1
                report.transaction_sizes.append(len(actions))
                self._clients.dynamodb.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
            except ClientError as error:
                code = error_code(error)
                if code == "TransactionCanceledException":
                    report.cancelled += 1
                    reasons = [dict(r) for r in error.response.get("CancellationReasons", [])]
                    remaining, retry_needed = self._resolve(remaining, reasons, report)
                    if not retry_needed:
                        continue  # only work already done was dropped: go again at once
                elif code not in RETRYABLE_ERRORS:
                    raise CountingError(f"{code}: {error}") from error
                if attempt == MAX_ATTEMPTS - 1:
                    raise CountingError(f"gave up after {MAX_ATTEMPTS} attempts ({code})") from error
                report.retried += 1
                self._sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
                continue
            report.counted += len(remaining)
            return report
        if remaining:
            raise CountingError(f"operations still pending after {MAX_ATTEMPTS} attempts")
        return report

    def _actions(self, ops: list[CountOp]) -> list[dict[str, Any]]:
        """The counter update of each account (first), then one update per resource."""
        per_account: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for op in ops:
            per_account[op.account_id][op.range_id] += 1
        actions: list[dict[str, Any]] = [
            {"Update": expressions.counted(account_id, per_range).update(self._table, account_id)}
            for account_id, per_range in per_account.items()
        ]
        for op in ops:
            actions.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": resource_key(op.account_id, op.resource_id),
                        "UpdateExpression": (
                            "SET counter_processed = :true, #state = :live "
                            "REMOVE expires_at, pending_shard, pending_since"
                        ),
                        "ConditionExpression": (
                            "incarnation = :inc AND counter_processed = :false AND #state IN (:pending, :live)"
                        ),
                        "ExpressionAttributeNames": {"#state": "state"},
                        "ExpressionAttributeValues": {
                            ":inc": {"S": op.incarnation},
                            ":true": {"BOOL": True},
                            ":false": {"BOOL": False},
                            ":pending": {"S": items.PENDING},
                            ":live": {"S": items.LIVE},
                        },
                    }
                }
            )
        return actions

    def _resolve(
        self, remaining: list[CountOp], reasons: list[dict[str, Any]], report: ApplyReport
    ) -> tuple[list[CountOp], bool]:
        """After a cancellation: drop the operations whose work is done or moot, and say whether
        anything other than a condition failure (a conflict, throttling) needs a retry."""
        accounts = len({op.account_id for op in remaining})
        if len(reasons) != accounts + len(remaining):
            return remaining, True
        retry_needed = any(r.get("Code") in RETRYABLE_REASONS for r in reasons[:accounts])
        kept: list[CountOp] = []
        for reason, op in zip(reasons[accounts:], remaining, strict=True):
            code = reason.get("Code", "None")
            if code == "ConditionalCheckFailed":
                if self._still_needed(op):
                    kept.append(op)
                    retry_needed = True
                else:
                    report.already_done += 1
                continue
            if code in RETRYABLE_REASONS:
                retry_needed = True
            elif code not in ("None", None):
                raise CountingError(f"transaction cancelled: {code} {reason.get('Message', '')}")
            kept.append(op)
        return kept, retry_needed

    def _still_needed(self, op: CountOp) -> bool:
        item = self._clients.dynamodb.get_item(
            TableName=self._table, Key=resource_key(op.account_id, op.resource_id), ConsistentRead=True
        ).get("Item")
        return (
            item is not None
            and items.incarnation_of(item) == op.incarnation
            and not items.is_counted(item)
            and items.state_of(item) in (items.PENDING, items.LIVE)
        )

    # ---- finishing deletes and healing: single conditional writes --------------------------------
    def _finish(self, op: FinishDeleteOp) -> ApplyReport:
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.delete_item(
                    TableName=self._table,
                    Key=resource_key(op.account_id, op.resource_id),
                    ConditionExpression="incarnation = :inc AND #state = :deleting",
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={
                        ":inc": {"S": op.incarnation},
                        ":deleting": {"S": items.DELETING},
                    },
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return ApplyReport(already_done=1)
        return ApplyReport(finished_deletes=1)

    def _heal(self, account_id: str) -> ApplyReport:
        """Opportunistic: a heal that fails is tried again on the next drifted record."""
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.update_item(
                    **expressions.heal().update(self._table, account_id)
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                self._obs.logger.warning(
                    "heal failed", extra={"account_id": account_id, "error": repr(error)}
                )
            return ApplyReport()
        except BotoCoreError as error:
            self._obs.logger.warning("heal failed", extra={"account_id": account_id, "error": repr(error)})
            return ApplyReport()
        self._obs.count("BestEffortHealed")
        return ApplyReport(healed=1)
