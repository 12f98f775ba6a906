"""Finish, from the table itself, what the stream path will not.

Two jobs, both page by page, each page's work applied before the next page is read, so a run cut
off anywhere loses nothing and the next run goes on where the work is.

- **Sweep** (every scheduled run): the sparse PendingIndex lists the resources that failure paths
  left for the sweeper (a create whose admission outcome stayed unknown, a create adopted by a
  retried PUT, a delete's claim reverted before the stream path counted the resource). Those older
  than the grace period that are live and uncounted are counted (the stream path's own CountOp,
  exactly once); counted ones just leave the index. Finished work leaves the index, so the index
  itself is the sweep's progress.
- **Audit** (when asked for: the retry path found stream records already trimmed, or an operator
  runs it): a scan of the whole table in segments that counts every live uncounted resource older
  than the grace period and finishes every delete claimed longer ago than that. It is how the
  table recovers when the stream lost records; it reads the whole table once, and saves each
  segment's position after every page in a control item (``CONTROL#sweeper``/``audit``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.counting.eventual import ApplyReport, EventualCounter
from hybrid_counter.counting.ops import CountOp, Op
from hybrid_counter.errors import DomainError
from hybrid_counter.keys import (
    ACCOUNT_PREFIX,
    CONTROL_PREFIX,
    RESOURCE_PREFIX,
    iso_utc,
    parse_account_pk,
    parse_resource_sk,
)
from hybrid_counter.resources import items

if TYPE_CHECKING:
    from hybrid_counter.resources import ResourceService

PENDING_INDEX = "PendingIndex"
CONTROL_PK = f"{CONTROL_PREFIX}sweeper"
AUDIT_SEGMENTS = 16
PAGE_SIZE = 100


@dataclass
class SweepOutcome:
    found: int = 0
    cleared: int = 0
    deletes_finished: int = 0
    pages: int = 0
    finished: bool = True  # False: cut off by the time budget; the next run goes on
    report: ApplyReport = field(default_factory=ApplyReport)

    def summary(self) -> dict[str, Any]:
        return {
            "pending_found": self.found,
            "counted": self.report.counted,
            "already_done": self.report.already_done,
            "cleared_from_index": self.cleared,
            "stale_deletes_finished": self.deletes_finished,
            "pages": self.pages,
            "finished": self.finished,
        }


def op_for_item(item: dict[str, Any]) -> Op | None:
    """What a resource (or its PendingIndex entry) still needs from the stream path."""
    if items.state_of(item) == items.LIVE and not items.is_counted(item):
        return CountOp(
            parse_account_pk(item["pk"]["S"]), parse_resource_sk(item["sk"]["S"]), items.incarnation_of(item)
        )
    return None


class Sweeper:
    def __init__(
        self,
        table_name: str,
        counter: EventualCounter,
        grace_seconds: float,
        clients: Clients | None = None,
        *,
        clock: Callable[[], float] = time.time,
        deletes: ResourceService | None = None,
    ) -> None:
        self._table = table_name
        self._counter = counter
        self._grace = grace_seconds
        self._clients = clients or Clients()
        self._clock = clock
        self._deletes = deletes  # finishes stale deletes in the audit
        self._retry = RetryPolicy()

    # ---- the sweep ------------------------------------------------------------------------------
    def pending_keys(self, older_than_seconds: float | None = None) -> list[dict[str, Any]]:
        """Every PendingIndex entry older than the grace period (or ``older_than_seconds``)."""
        found: list[dict[str, Any]] = []
        cutoff, start = self._cutoff(older_than_seconds), None
        while True:
            page, start = self._pending_page(cutoff, start)
            found.extend(page)
            if start is None:
                return found

    def sweep(
        self, older_than_seconds: float | None = None, *, until: Callable[[], bool] | None = None
    ) -> SweepOutcome:
        """Sweep the PendingIndex; ``until()`` true stops it between pages. Nothing needs saving:
        what a page finishes leaves the index, so the next run starts where the work is (the
        index is sparse: a scan of it reads only what failure paths left, not the table)."""
        outcome = SweepOutcome()
        cutoff, start = self._cutoff(older_than_seconds), None
        while True:
            if until is not None and until():
                outcome.finished = False
                return outcome
            page, start = self._pending_page(cutoff, start)
            self._apply_page(page, outcome)
            if start is None:
                return outcome

    def _cutoff(self, older_than_seconds: float | None) -> str:
        grace = self._grace if older_than_seconds is None else older_than_seconds
        return iso_utc(self._clock() - grace)

    def _pending_page(
        self, cutoff: str, start: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        scan: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": PENDING_INDEX,
            "FilterExpression": "pending_since < :cutoff",
            "ExpressionAttributeValues": {":cutoff": {"S": cutoff}},
            "Limit": PAGE_SIZE,
        }
        if start:
            scan["ExclusiveStartKey"] = start
        response = self._clients.dynamodb.scan(**scan)
        return [dict(item) for item in response.get("Items", [])], response.get("LastEvaluatedKey")

    def _apply_page(self, page: list[dict[str, Any]], outcome: SweepOutcome) -> None:
        outcome.pages += 1
        ops = [op for op in (op_for_item(item) for item in page) if op is not None]
        outcome.found += len(ops)
        if ops:
            outcome.report.merge(self._counter.apply(ops))
        for item in page:
            if items.is_counted(item) or items.state_of(item) != items.LIVE:
                outcome.cleared += self._clear_index(item)

    def _clear_index(self, entry: dict[str, Any]) -> int:
        """Take a resource that needs nothing more out of the index (the index entry may be stale:
        the write is conditional on the resource's own state)."""
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.update_item(
                    TableName=self._table,
                    Key={"pk": entry["pk"], "sk": entry["sk"]},
                    UpdateExpression="REMOVE pending_shard, pending_since",
                    ConditionExpression="attribute_exists(pk) AND (counter_processed = :true OR #state <> :live)",
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={":true": {"BOOL": True}, ":live": {"S": items.LIVE}},
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return 0
        return 1

    # ---- the audit ------------------------------------------------------------------------------
    def request_audit(self, reason: str) -> None:
        """Ask for a full audit (idempotent: an audit already asked for or running is kept)."""
        try:
            self._clients.dynamodb.put_item(
                TableName=self._table,
                Item={
                    "pk": {"S": CONTROL_PK},
                    "sk": {"S": "audit"},
                    "state": {"S": json.dumps({"reason": reason, "next": {}})},
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise

    def audit_requested(self) -> bool:
        return self._load("audit") is not None

    def audit(self, *, until: Callable[[], bool] | None = None) -> SweepOutcome:
        """Go on with a requested audit: each scan segment from where it stopped."""
        outcome = SweepOutcome()
        saved = self._load("audit")
        if saved is None:
            return outcome
        progress: dict[str, Any] = saved.get("next", {})
        cutoff = self._cutoff(None)
        for segment in range(AUDIT_SEGMENTS):
            start = progress.get(str(segment), {})
            while start != "done":
                if until is not None and until():
                    self._save("audit", {**saved, "next": progress})
                    outcome.finished = False
                    return outcome
                page, last = self._scan_page(segment, start or None)
                self._audit_page(page, cutoff, outcome)
                start = last if last is not None else "done"
                progress[str(segment)] = start
                self._save("audit", {**saved, "next": progress})
        self._clear("audit")
        return outcome

    def _scan_page(
        self, segment: int, start: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        scan: dict[str, Any] = {
            "TableName": self._table,
            "Segment": segment,
            "TotalSegments": AUDIT_SEGMENTS,
            "Limit": PAGE_SIZE,
            "ConsistentRead": True,
        }
        if start:
            scan["ExclusiveStartKey"] = start
        response = self._clients.dynamodb.scan(**scan)
        return [dict(item) for item in response.get("Items", [])], response.get("LastEvaluatedKey")

    def _audit_page(self, page: list[dict[str, Any]], cutoff: str, outcome: SweepOutcome) -> None:
        outcome.pages += 1
        resources = [
            item
            for item in page
            if str(item["pk"]["S"]).startswith(ACCOUNT_PREFIX)
            and str(item["sk"]["S"]).startswith(RESOURCE_PREFIX)
        ]
        ops = [
            op
            for item in resources
            if items.since(item, "created_at") < cutoff and (op := op_for_item(item)) is not None
        ]
        outcome.found += len(ops)
        if ops:
            outcome.report.merge(self._counter.apply(ops))
        if self._deletes is None:
            return
        for item in resources:
            if items.state_of(item) == items.DELETING and items.since(item, "deleting_since") < cutoff:
                try:
                    # The same takeover a retried DELETE does after the grace period.
                    self._deletes.delete(
                        parse_account_pk(item["pk"]["S"]), parse_resource_sk(item["sk"]["S"])
                    )
                    outcome.deletes_finished += 1
                except DomainError:
                    continue

    # ---- saved progress ---------------------------------------------------------------------------
    def _load(self, job: str) -> dict[str, Any] | None:
        item = self._clients.dynamodb.get_item(
            TableName=self._table, Key={"pk": {"S": CONTROL_PK}, "sk": {"S": job}}, ConsistentRead=True
        ).get("Item")
        return None if item is None else dict(json.loads(item["state"]["S"]))

    def _save(self, job: str, state: dict[str, Any]) -> None:
        self._clients.dynamodb.put_item(
            TableName=self._table,
            Item={"pk": {"S": CONTROL_PK}, "sk": {"S": job}, "state": {"S": json.dumps(state)}},
        )

    def _clear(self, job: str) -> None:
        self._clients.dynamodb.delete_item(
            TableName=self._table, Key={"pk": {"S": CONTROL_PK}, "sk": {"S": job}}
        )
