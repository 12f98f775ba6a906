"""The history of limit changes: one item per change, written once, never changed by the API.

``HISTORY#ACCOUNT#<id>`` (an account's overrides and plan moves) and ``HISTORY#PLAN#<id>`` (a
plan's limits), sort key ``<when>#<change id>``: read backwards, newest first. An item is
written from the change's record (records.py) with a condition that it is new, so completing a
change twice writes it once. Retention (``HistoryRetentionDays``): 0 keeps it for ever, else the
table's TTL removes it after that many days.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import CONDITION_FAILED, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.governance.paging import decode_place, encode_place
from hybrid_counter.governance.publisher import OUTBOX, OutboxEvent
from hybrid_counter.governance.records import ChangeRecord
from hybrid_counter.keys import epoch_of, pending_shard

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients

DAY = 86_400
READ_BUDGET = 1000  # items a filtered page reads past before it answers with what it has
# ``<when>#<change id>``: what a page can end on (records.py), bounded well under 1 KB.
HISTORY_SORT_KEY = re.compile(r"[0-9A-Za-z:.+-]{1,64}#[0-9A-Za-z_-]{1,128}")


@dataclass(frozen=True)
class HistoryPage:
    items: list[dict[str, Any]]
    next_token: str | None


class HistoryStore:
    def __init__(self, table_name: str, clients: Clients, *, retention_days: int = 0) -> None:
        self._table = table_name
        self._clients = clients
        self._retention = retention_days
        self._retry = RetryPolicy()

    def exists(self, record: ChangeRecord) -> bool:
        """The change is in history (completed)."""
        return self.exists_at(record.history_pk, record.history_sk)

    def exists_at(self, pk: str, sk: str) -> bool:
        return "Item" in self._clients.dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": pk}, "sk": {"S": sk}},
            ConsistentRead=True,
            ProjectionExpression="pk",
        )

    def outbox_of(self, record: ChangeRecord) -> OutboxEvent | None:
        """The change's event, while it waits in the outbox on its history item."""
        item = self._clients.dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": record.history_pk}, "sk": {"S": record.history_sk}},
            ConsistentRead=True,
        ).get("Item")
        return OutboxEvent.of(dict(item)) if item is not None and OUTBOX in item else None

    def write(self, record: ChangeRecord, event: OutboxEvent | None) -> bool:
        """The record's history item (once), with its event in the outbox if there is one; True
        if this call wrote it."""
        item: dict[str, Any] = {
            "pk": {"S": record.history_pk},
            "sk": {"S": record.history_sk},
            "record": {"S": record.text()},
            "kind": {"S": record.kind or ""},
        }
        if self._retention:
            item["expires_at"] = {"N": str(int(epoch_of(record.at)) + self._retention * DAY)}
        if event is not None:
            item[OUTBOX] = {"S": event.text()}
            item["pending_shard"] = {"S": pending_shard(record.history_pk, record.change_id, kind="history")}
            item["pending_since"] = {"S": record.at}
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.put_item(
                    TableName=self._table, Item=item, ConditionExpression="attribute_not_exists(pk)"
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        return True

    def page(
        self, pk: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> HistoryPage:
        """Newest first; with ``kind``, only that kind's changes (full pages, a bounded read)."""
        found: list[dict[str, Any]] = []
        start = decode_place(next_token, HISTORY_SORT_KEY) if next_token else None
        read = 0
        more = True
        while more and len(found) < page_size and read < READ_BUDGET:
            query: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": pk}},
                "ScanIndexForward": False,
                "ConsistentRead": True,
                "Limit": page_size - len(found),
            }
            if start is not None:
                query["ExclusiveStartKey"] = {"pk": {"S": pk}, "sk": {"S": start}}
            response = self._clients.dynamodb.query(**query)
            for item in response.get("Items", []):
                read += 1
                start = str(item["sk"]["S"])
                record = json.loads(item["record"]["S"])
                if kind is None or record.get("kind") == kind:
                    found.append(record)
            more = "LastEvaluatedKey" in response
        token = encode_place(start) if more and start is not None else None
        return HistoryPage(found, token)
