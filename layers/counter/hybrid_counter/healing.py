"""Bring a drifted best-effort counter back up to the eventual counter, safely under traffic.

best_effort only ever undercounts after failures (a lost admission, a delete retried after a
crash). Raising it to ``eventual`` is safe when, at the instant of the write, every resource the
eventual counter counts is live. A counted resource stops being live only through a soft delete,
and every soft delete first puts its token in ``uncounting`` (removed by the same transaction
that hard-deletes the resource and decrements ``eventual``). So the heal is one conditional
write: ``best_effort := eventual`` if both counters are still what we read, ``uncounting`` is
empty, and no delete has bypassed the token set recently (``heal_fence``). Any admission, delete
or counting that lands in between changes one of those and the heal simply does not happen.
No quiescence window is needed for safety; a busy account is healed on a later run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.keys import all_counter_shards, counter_key, parse_account_pk
from hybrid_counter.observability import Observability, default_observability

COUNTER_INDEX = "CounterIndex"
# A delete that fell back to an untokened decrement may leave a counted resource soft-deleted
# for as long as the stream (24 h retention) or the sweeper takes to finish it.
HEAL_FENCE_SECONDS = 26 * 3600


@dataclass(frozen=True)
class HealOutcome:
    account_id: str
    best_effort_before: int
    eventual: int
    healed: bool
    reason: str


class Healer:
    def __init__(
        self,
        table_name: str,
        clients: Clients | None = None,
        obs: Observability | None = None,
        clock: Any = time.time,
    ) -> None:
        self._table = table_name
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._clock = clock

    def heal_account(self, account_id: str) -> HealOutcome:
        item = self._clients.dynamodb.get_item(
            TableName=self._table, Key=counter_key(account_id), ConsistentRead=True
        ).get("Item")
        if not item:
            return HealOutcome(account_id, 0, 0, healed=False, reason="no counter item")
        has_best_effort = "best_effort" in item
        best_effort = int(item.get("best_effort", {"N": "0"})["N"])
        eventual = int(item.get("eventual", {"N": "0"})["N"])
        outcome = HealOutcome(account_id, best_effort, eventual, healed=False, reason="")
        if best_effort >= eventual:
            return _with(outcome, "best_effort is not below eventual")
        if item.get("uncounting", {}).get("SS"):
            return _with(outcome, "deletes are in flight")
        cutoff = int(self._clock()) - HEAL_FENCE_SECONDS
        fence = item.get("heal_fence")
        if fence is not None and int(fence["N"]) >= cutoff:
            return _with(outcome, "a delete bypassed the token set recently")
        values: dict[str, Any] = {":ev": {"N": str(eventual)}, ":cutoff": {"N": str(cutoff)}}
        unchanged = "attribute_not_exists(#be)"
        if has_best_effort:
            unchanged = "#be = :be"
            values[":be"] = {"N": str(best_effort)}
        try:
            self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=counter_key(account_id),
                UpdateExpression="SET #be = :ev",
                ConditionExpression=(
                    f"{unchanged} AND #ev = :ev AND attribute_not_exists(#unc) AND "
                    "(attribute_not_exists(#fence) OR #fence < :cutoff)"
                ),
                ExpressionAttributeNames={
                    "#be": "best_effort",
                    "#ev": "eventual",
                    "#unc": "uncounting",
                    "#fence": "heal_fence",
                },
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            return _with(outcome, "the counters changed meanwhile; will retry on a later run")
        self._obs.count("BestEffortHealed")
        self._obs.logger.info(
            "healed best-effort counter",
            extra={"account_id": account_id, "from": best_effort, "to": eventual},
        )
        return HealOutcome(account_id, best_effort, eventual, healed=True, reason="raised to eventual")

    def accounts(self) -> Iterator[str]:
        paginator = self._clients.dynamodb.get_paginator("query")
        for shard in all_counter_shards():
            for page in paginator.paginate(
                TableName=self._table,
                IndexName=COUNTER_INDEX,
                KeyConditionExpression="counter_shard = :shard",
                ExpressionAttributeValues={":shard": {"S": shard}},
            ):
                for item in page.get("Items", []):
                    yield parse_account_pk(item["pk"]["S"])

    def heal_all(self) -> list[HealOutcome]:
        return [self.heal_account(account_id) for account_id in self.accounts()]


def _with(outcome: HealOutcome, reason: str) -> HealOutcome:
    return HealOutcome(outcome.account_id, outcome.best_effort_before, outcome.eventual, False, reason)
