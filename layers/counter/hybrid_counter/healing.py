"""Bring a drifted-low best-effort counter back up to the eventual counter, safely under traffic.

best_effort undercounts only after failures (an admission whose outcome stayed unknown and did
not apply, a create adopted after the grace period). Raising it to ``eventual`` is safe at any
instant, with no quiet window: ``eventual`` counts resources the stream path counted and no
delete has released, and every such resource is live or claimed by a delete that has not
released it yet, so each still holds a slot. The heal is therefore one conditional write,
``best_effort := eventual if best_effort < eventual``, evaluated by DynamoDB on the item itself;
whatever lands before or after it is serialised with it.

Who heals: the stream path, whenever a counter item's new image shows ``best_effort <
eventual`` (that is the drift signal: it costs nothing when there is no drift), and operators
(``hybrid-counter-ops heal``), here: paged over CounterIndex, the counter items read in batches
of 100 (eventually consistent, half a read unit each: the write's condition is what decides),
in parallel, resumable from a continuation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.counters import expressions
from hybrid_counter.counters.state import BEST_EFFORT, EVENTUAL
from hybrid_counter.keys import (
    DEFAULT_KIND,
    all_counter_shards,
    counter_key,
    parse_account_pk,
    parse_counter_sk,
)
from hybrid_counter.observability import Observability, default_observability

COUNTER_INDEX = "CounterIndex"


@dataclass(frozen=True)
class HealOutcome:
    account_id: str
    best_effort_before: int
    eventual: int
    healed: bool
    reason: str
    kind: str = DEFAULT_KIND


@dataclass
class HealAllReport:
    accounts_read: int = 0
    healed: list[HealOutcome] = field(default_factory=list)
    continuation: str | None = None  # pass back to go on (None: every account was seen)

    def to_json(self) -> dict[str, Any]:
        return {
            "accounts_read": self.accounts_read,
            "healed": [outcome.__dict__ for outcome in self.healed],
            "continuation": self.continuation,
        }


class Healer:
    def __init__(
        self, table_name: str, clients: Clients | None = None, obs: Observability | None = None
    ) -> None:
        self._table = table_name
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._retry = RetryPolicy()

    def heal_account(
        self, account_id: str, seen: dict[str, Any] | None = None, *, kind: str = DEFAULT_KIND
    ) -> HealOutcome:
        """Heal the account's counter of one kind (``seen``: its item, already read)."""
        item: dict[str, Any] | None = seen
        if item is None:
            item = dict(
                self._clients.dynamodb.get_item(
                    TableName=self._table, Key=counter_key(account_id, kind=kind), ConsistentRead=True
                ).get("Item")
                or {}
            )
        if not item:
            return HealOutcome(account_id, 0, 0, healed=False, reason="no counter item", kind=kind)
        best_effort = int(item.get(BEST_EFFORT, {"N": "0"})["N"])
        eventual = int(item.get(EVENTUAL, {"N": "0"})["N"])
        if best_effort >= eventual:
            return HealOutcome(
                account_id, best_effort, eventual, False, "best_effort is not below eventual", kind
            )
        args = expressions.heal().update(self._table, account_id, kind)
        try:
            retry_conflicts(lambda: self._clients.dynamodb.update_item(**args), self._retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return HealOutcome(
                account_id, best_effort, eventual, False, "best_effort is no longer below eventual", kind
            )
        self._obs.count("BestEffortHealed")
        self._obs.logger.info(
            "healed best-effort counter", extra={"account_id": account_id, "kind": kind, "from": best_effort}
        )
        return HealOutcome(account_id, best_effort, eventual, True, "raised to eventual", kind)

    def accounts(self, continuation: str | None = None) -> Iterator[tuple[list[tuple[str, str]], str | None]]:
        """Pages of (account id, kind) from CounterIndex (one entry per counter item), each with
        the continuation that follows it."""
        shards = all_counter_shards()
        position: dict[str, Any] = json.loads(continuation) if continuation else {"shard": 0, "start": None}
        shard, start = int(position["shard"]), position["start"]
        while shard < len(shards):
            query: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": COUNTER_INDEX,
                "KeyConditionExpression": "counter_shard = :shard",
                "ExpressionAttributeValues": {":shard": {"S": shards[shard]}},
                "Limit": 100,
            }
            if start:
                query["ExclusiveStartKey"] = start
            page = self._clients.dynamodb.query(**query)
            start = page.get("LastEvaluatedKey")
            if start is None:
                shard += 1
            following = json.dumps({"shard": shard, "start": start}) if shard < len(shards) else None
            found = [
                (parse_account_pk(item["pk"]["S"]), parse_counter_sk(item["sk"]["S"]))
                for item in page.get("Items", [])
            ]
            yield found, following

    def heal_all(
        self,
        continuation: str | None = None,
        *,
        parallelism: int = 8,
        until: Callable[[], bool] | None = None,
    ) -> HealAllReport:
        report = HealAllReport()
        with ThreadPoolExecutor(max_workers=parallelism) as pool:
            for counters, following in self.accounts(continuation):
                read = self._read_counters(counters)
                report.accounts_read += len(counters)
                drifted = [
                    (counter, item)
                    for counter, item in read.items()
                    if int(item.get(BEST_EFFORT, {"N": "0"})["N"]) < int(item.get(EVENTUAL, {"N": "0"})["N"])
                ]
                for outcome in pool.map(
                    lambda pair: self.heal_account(pair[0][0], pair[1], kind=pair[0][1]), drifted
                ):
                    if outcome.healed:
                        report.healed.append(outcome)
                report.continuation = following
                if following is not None and until is not None and until():
                    return report
        return report

    def _read_counters(self, counters: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        found: dict[tuple[str, str], dict[str, Any]] = {}
        keys: list[Any] = [counter_key(account, kind=kind) for account, kind in counters]
        while keys:
            response: Any = self._clients.dynamodb.batch_get_item(
                RequestItems={
                    self._table: {"Keys": keys, "ProjectionExpression": "pk, sk, best_effort, eventual"}
                }
            )
            for item in response.get("Responses", {}).get(self._table, []):
                key = (parse_account_pk(str(item["pk"]["S"])), parse_counter_sk(str(item["sk"]["S"])))
                found[key] = dict(item)
            keys = list(response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", []))
        return found
