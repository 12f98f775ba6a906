"""Finish counting work found in the table itself, independent of the stream.

Every resource that still needs the stream path carries ``pending_shard``/``pending_since``
(set when it is written or soft-deleted, removed when it is counted; a hard delete removes the
item). The sparse PendingIndex lists them. Anything pending for longer than the grace period
(longer than an API request can take) is finished here with the same conditional operations
the stream uses, so a sweep racing a late stream delivery still counts each resource once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hybrid_counter.aws import Clients
from hybrid_counter.counting.eventual import ApplyReport, EventualCounter
from hybrid_counter.counting.ops import CountOp, Op, UncountOp
from hybrid_counter.keys import all_pending_shards, iso_utc, parse_account_pk, parse_resource_sk

PENDING_INDEX = "PendingIndex"


@dataclass
class SweepOutcome:
    found: int = 0
    report: ApplyReport = field(default_factory=ApplyReport)


def op_for_item(item: dict[str, Any]) -> Op | None:
    """The operation a resource item still needs, judged from its own state."""
    account_id = parse_account_pk(item["pk"]["S"])
    resource_id = parse_resource_sk(item["sk"]["S"])
    incarnation = item["incarnation"]["S"]
    processed = bool(item.get("counter_processed", {}).get("BOOL", False))
    if item.get("deleted", {}).get("BOOL", False):
        return UncountOp(account_id, resource_id, incarnation, counted=processed)
    if not processed:
        return CountOp(account_id, resource_id, incarnation)
    return None


class Sweeper:
    def __init__(
        self,
        table_name: str,
        counter: EventualCounter,
        grace_seconds: int,
        clients: Clients | None = None,
        clock: Any = time.time,
    ) -> None:
        self._table = table_name
        self._counter = counter
        self._grace = grace_seconds
        self._clients = clients or Clients()
        self._clock = clock

    def pending_keys(self, older_than_seconds: float | None = None) -> list[dict[str, Any]]:
        grace = self._grace if older_than_seconds is None else older_than_seconds
        cutoff = iso_utc(self._clock() - grace)
        keys: list[dict[str, Any]] = []
        for shard in all_pending_shards():
            paginator = self._clients.dynamodb.get_paginator("query")
            for page in paginator.paginate(
                TableName=self._table,
                IndexName=PENDING_INDEX,
                KeyConditionExpression="pending_shard = :shard AND pending_since < :cutoff",
                ExpressionAttributeValues={":shard": {"S": shard}, ":cutoff": {"S": cutoff}},
            ):
                keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in page.get("Items", []))
        return keys

    def sweep(self, older_than_seconds: float | None = None) -> SweepOutcome:
        outcome = SweepOutcome()
        ops: list[Op] = []
        for key in self.pending_keys(older_than_seconds):
            item = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
                "Item"
            )
            if item is None:
                continue
            op = op_for_item(dict(item))
            if op is not None:
                ops.append(op)
        outcome.found = len(ops)
        if ops:
            outcome.report = self._counter.apply(ops)
        return outcome
