"""The reference design, as the reference paper and the brief describe it, for side-by-side figures.

Create: check the limit on max(best_effort, eventual), put the resource (counter_processed =
false), then an unconditional best-effort increment. Delete: decrement best_effort, then set
deleted = true. The stream path: one transaction per record, the counter update together with
flipping counter_processed (an INSERT) or with the hard delete (a soft delete); a delete of a
resource never counted only hard-deletes it. Its items are kept apart from ours by their sort
keys (``REF#...``) and by accounts of their own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.errors import LimitExceeded, NotFound
from hybrid_counter.keys import account_pk, iso_utc

COUNTER = "REF#COUNTER"
RESOURCE = "REF#RES#"


class ReferenceDesign:
    def __init__(self, table: str, clients: Clients, default_limit: int = 100) -> None:
        self._table = table
        self._db = clients.dynamodb
        self._default_limit = default_limit

    def _key(self, account_id: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": account_pk(account_id)}, "sk": {"S": sk}}

    def _counter_update(self, account_id: str, expression: str, delta: int) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Key": self._key(account_id, COUNTER),
            "UpdateExpression": expression,
            "ExpressionAttributeValues": {":delta": {"N": str(delta)}},
        }

    def set_limit(self, account_id: str, limit: int) -> None:
        self._db.update_item(
            TableName=self._table,
            Key=self._key(account_id, COUNTER),
            UpdateExpression="SET #limit = :limit",
            ExpressionAttributeNames={"#limit": "limit"},
            ExpressionAttributeValues={":limit": {"N": str(limit)}},
        )

    def uncounted(self, account_id: str) -> int:
        """Resources written that eventual does not count yet. Not best_effort minus eventual: a
        create whose increment failed after its put leaves best_effort one low for good, which
        would hide as much lag."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :resource)",
            FilterExpression="counter_processed = :false",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":resource": {"S": RESOURCE},
                ":false": {"BOOL": False},
            },
            Select="COUNT",
            ConsistentRead=True,
        )
        return sum(page["Count"] for page in pages)

    def create(self, account_id: str, name: str, now: float) -> str:
        counter = self._db.get_item(
            TableName=self._table, Key=self._key(account_id, COUNTER), ConsistentRead=True
        ).get("Item", {})
        used = max(
            int(counter.get("best_effort", {"N": "0"})["N"]), int(counter.get("eventual", {"N": "0"})["N"])
        )
        limit = int(counter.get("limit", {"N": str(self._default_limit)})["N"])
        if used >= limit:
            raise LimitExceeded(limit, used)
        rid = str(uuid.uuid4())
        self._db.put_item(
            TableName=self._table,
            Item={
                **self._key(account_id, RESOURCE + rid),
                "account_id": {"S": account_id},
                "resource_id": {"S": rid},
                "name": {"S": name},
                "extra_json": {"S": json.dumps({})},
                "created_at": {"S": iso_utc(now)},
                "counter_processed": {"BOOL": False},
                "deleted": {"BOOL": False},
            },
            ConditionExpression="attribute_not_exists(pk)",
        )
        self._db.update_item(**self._counter_update(account_id, "ADD best_effort :delta", 1))
        return rid

    def delete(self, account_id: str, resource_id: str) -> None:
        key = self._key(account_id, RESOURCE + resource_id)
        item = self._db.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")
        if item is None or item["deleted"]["BOOL"]:
            raise NotFound(resource_id)
        self._db.update_item(**self._counter_update(account_id, "ADD best_effort :delta", -1))
        self._db.update_item(
            TableName=self._table,
            Key=key,
            UpdateExpression="SET deleted = :true",
            ConditionExpression="deleted = :false",
            ExpressionAttributeValues={":true": {"BOOL": True}, ":false": {"BOOL": False}},
        )

    def process(self, records: Sequence[Mapping[str, Any]]) -> int:
        """One transaction per record that carries work; returns how many applied."""
        applied = 0
        for record in records:
            actions = self._actions(record)
            if not actions:
                continue
            try:
                self._db.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
                applied += 1
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
        return applied

    def _actions(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        stream = record["dynamodb"]
        keys = stream["Keys"]
        if not keys["sk"]["S"].startswith(RESOURCE):
            return []
        account_id = keys["pk"]["S"].removeprefix("ACCOUNT#")
        new, old = stream.get("NewImage", {}), stream.get("OldImage", {})
        if record["eventName"] == "INSERT" and not new["counter_processed"]["BOOL"]:
            flip = {
                "TableName": self._table,
                "Key": keys,
                "UpdateExpression": "SET counter_processed = :true",
                "ConditionExpression": "counter_processed = :false",
                "ExpressionAttributeValues": {":true": {"BOOL": True}, ":false": {"BOOL": False}},
            }
            return [{"Update": self._counter_update(account_id, "ADD eventual :delta", 1)}, {"Update": flip}]
        soft_deleted = new.get("deleted", {}).get("BOOL") and not old.get("deleted", {}).get("BOOL")
        if record["eventName"] != "MODIFY" or not soft_deleted:
            return []
        hard_delete = {
            "TableName": self._table,
            "Key": keys,
            "ConditionExpression": "deleted = :true",
            "ExpressionAttributeValues": {":true": {"BOOL": True}},
        }
        if not new["counter_processed"]["BOOL"]:
            return [{"Delete": hard_delete}]  # never counted: nothing to take out
        return [
            {"Update": self._counter_update(account_id, "ADD eventual :delta", -1)},
            {"Delete": hard_delete},
        ]
