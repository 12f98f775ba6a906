"""Recount an account exactly from its resource items and fix its counters, under traffic.

The truth is in the table: ``eventual`` must equal the number of resource items with
``counter_processed = true`` (live, or soft-deleted and not yet hard-deleted), and
``best_effort`` must not exceed the number of live items. Every stream-path change to counted
state bumps ``counting_version`` on the counter item in the same transaction, so a recount that
reads the version, counts the items and then writes ``eventual`` on condition that the version
did not move has counted a state nothing changed underneath it. Otherwise it tries again.
``best_effort`` is only ever lowered here (always safe) or raised through the healer's
conditional write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.ops import Op
from hybrid_counter.counting.sweeper import op_for_item
from hybrid_counter.healing import Healer
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, counter_key, iso_utc

MAX_ATTEMPTS = 8


@dataclass
class AccountCensus:
    live: int = 0
    counted: int = 0
    waiting_to_be_counted: int = 0
    waiting_for_hard_delete: int = 0
    pending_items: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RecountReport:
    account_id: str
    best_effort: int
    eventual: int
    census: AccountCensus
    actions: list[str] = field(default_factory=list)

    @property
    def eventual_drift(self) -> int:
        return self.eventual - self.census.counted

    @property
    def best_effort_excess(self) -> int:
        return max(0, self.best_effort - self.census.live)

    def to_json(self) -> dict[str, Any]:
        census = self.census
        return {
            "account_id": self.account_id,
            "best_effort": self.best_effort,
            "eventual": self.eventual,
            "live_resources": census.live,
            "counted_resources": census.counted,
            "waiting_to_be_counted": census.waiting_to_be_counted,
            "waiting_for_hard_delete": census.waiting_for_hard_delete,
            "eventual_drift": self.eventual_drift,
            "best_effort_excess": self.best_effort_excess,
            "best_effort_deficit": max(0, census.live - self.best_effort),
            "actions": self.actions,
        }


class Recounter:
    def __init__(self, table_name: str, counter: EventualCounter, healer: Healer, clients: Clients) -> None:
        self._table = table_name
        self._counter = counter
        self._healer = healer
        self._clients = clients

    def census(self, account_id: str) -> AccountCensus:
        census = AccountCensus()
        paginator = self._clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": RESOURCE_PREFIX},
            },
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                deleted = bool(item.get("deleted", {}).get("BOOL", False))
                counted = bool(item.get("counter_processed", {}).get("BOOL", False))
                census.live += not deleted
                census.counted += counted
                census.waiting_to_be_counted += not deleted and not counted
                census.waiting_for_hard_delete += deleted
                if "pending_since" in item:
                    census.pending_items.append(dict(item))
        return census

    def _counter_item(self, account_id: str) -> dict[str, Any]:
        return dict(
            self._clients.dynamodb.get_item(
                TableName=self._table, Key=counter_key(account_id), ConsistentRead=True
            ).get("Item")
            or {}
        )

    def recount(
        self, account_id: str, *, fix: bool, finish_pending_older_than: float | None = None
    ) -> RecountReport:
        actions: list[str] = []
        if fix and finish_pending_older_than is not None:
            actions.extend(self._finish_pending(account_id, finish_pending_older_than))
        for _ in range(MAX_ATTEMPTS):
            item = self._counter_item(account_id)
            census = self.census(account_id)
            report = RecountReport(
                account_id,
                int(item.get("best_effort", {"N": "0"})["N"]),
                int(item.get("eventual", {"N": "0"})["N"]),
                census,
                actions,
            )
            if not fix:
                return report
            if report.eventual_drift and not self._set_eventual(account_id, item, census.counted):
                continue
            if report.eventual_drift:
                actions.append(f"eventual {report.eventual} -> {census.counted}")
            if report.best_effort_excess:
                # Lower to the live resources already counted: a create between our census and
                # its admission is live here but not yet in best_effort, and must stay out of it.
                target = census.live - census.waiting_to_be_counted
                if not self._lower_best_effort(account_id, report.best_effort, target):
                    continue
                actions.append(f"best_effort {report.best_effort} -> {target} (lowered)")
            healed = self._healer.heal_account(account_id)
            if healed.healed:
                actions.append(f"best_effort {healed.best_effort_before} -> {healed.eventual} (healed)")
            elif healed.best_effort_before < healed.eventual:
                actions.append(f"best_effort left at {healed.best_effort_before}: {healed.reason}")
            final = self._counter_item(account_id)
            return RecountReport(
                account_id,
                int(final.get("best_effort", {"N": "0"})["N"]),
                int(final.get("eventual", {"N": "0"})["N"]),
                self.census(account_id),
                actions,
            )
        actions.append(f"gave up after {MAX_ATTEMPTS} attempts: the account kept changing; run again")
        return report

    def _finish_pending(self, account_id: str, older_than: float) -> list[str]:
        cutoff = iso_utc(time.time() - older_than)
        ops: list[Op] = []
        for item in self.census(account_id).pending_items:
            if item["pending_since"]["S"] < cutoff:
                op = op_for_item(item)
                if op is not None:
                    ops.append(op)
        if not ops:
            return []
        report = self._counter.apply(ops)
        return [
            f"finished {len(ops)} pending resources: {report.counted} counted, "
            f"{report.uncounted + report.hard_deleted_uncounted} hard-deleted, {report.already_done} already done"
        ]

    def _set_eventual(self, account_id: str, item: dict[str, Any], counted: int) -> bool:
        values: dict[str, Any] = {":counted": {"N": str(counted)}}
        version = item.get("counting_version")
        if version is None:
            unchanged = "attribute_not_exists(#ver)"
        else:
            unchanged = "#ver = :ver"
            values[":ver"] = version
        return self._conditional(
            account_id,
            "SET #ev = :counted ADD #ver :one",
            unchanged,
            {"#ev": "eventual", "#ver": "counting_version"},
            {**values, ":one": {"N": "1"}},
        )

    def _lower_best_effort(self, account_id: str, best_effort: int, target: int) -> bool:
        return self._conditional(
            account_id,
            "SET #be = :target",
            "#be = :be",
            {"#be": "best_effort"},
            {":be": {"N": str(best_effort)}, ":target": {"N": str(target)}},
        )

    def _conditional(
        self, account_id: str, update: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> bool:
        try:
            self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=counter_key(account_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True
