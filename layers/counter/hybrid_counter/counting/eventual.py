"""Apply the stream path's operations.

CountOps are folded into as few TransactWriteItems as the 100-action limit allows: one counter
update per account per chunk (the chunk's count, per range) plus one conditional update per
resource, so the hot counter item is written once per up to 99 counted resources instead of once
per resource (per-record mode, one transaction per CountOp, is the baseline the benchmark
compares against). FinishDeleteOps, OrgReleasedOps and HealOps are single conditional writes
(two, at most); a handed-off member's delete (HandedOffDeleteOp) is one transaction of its own. Every operation
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.counters import expressions
from hybrid_counter.counters.state import BEST_EFFORT
from hybrid_counter.counting.ops import (
    CensusOp,
    CountOp,
    FinishDeleteOp,
    FinishResizeOp,
    HandedOffDeleteOp,
    HealOp,
    Op,
    OrgReleasedOp,
    OrgResizedOp,
)
from hybrid_counter.keys import iso_utc, member_token, org_counter_key, pending_shard, range_of, resource_key
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.recount_requests import RecountRequests
from hybrid_counter.resources import items
from hybrid_counter.resources.table import RESIZE_FIELDS, unindexed
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
    finished_resizes: int = 0
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
            "finished_resizes",
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
    """Positions of ``ops`` split into chunks that fit one transaction (one counter action per
    account and kind, plus one per resource) and touch each resource once.

    An organization's counter items each get chunks of their own: a transaction that wrote all S
    items of a split counter would wait for all S of them to have capacity at once (on AWS, and
    in the benchmark's simulator), where one per item waits for that item alone. The other
    counts keep their order and share chunks, many accounts to a transaction. Operations commute
    (ops.py), so the chunks need not follow the records' order; a failure names every position
    of its chunk and of the chunks after it (``EventualCounter.apply``)."""
    if mode == "per_record":
        return [[index] for index in range(len(ops))]
    groups: dict[tuple[str, str] | None, list[int]] = {}
    for index, op in enumerate(ops):
        groups.setdefault(None if op.org is None else op.counter, []).append(index)
    return [chunk for positions in groups.values() for chunk in _in_order(ops, positions)]


def _in_order(ops: Sequence[CountOp], positions: list[int]) -> list[list[int]]:
    chunks: list[list[int]] = []
    current: list[int] = []
    resources: set[tuple[str, str, str]] = set()
    counters: set[tuple[str, str]] = set()
    for index in positions:
        op = ops[index]
        needed = 1 + (0 if op.counter in counters else 1)
        if current and (op.item in resources or len(resources) + len(counters) + needed > MAX_ACTIONS):
            chunks.append(current)
            current, resources, counters = [], set(), set()
        current.append(index)
        resources.add(op.item)
        counters.add(op.counter)
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
        clock: Callable[[], float] = time.time,
        grace_seconds: float = 300,
    ) -> None:
        self._table = table_name
        self._grace = grace_seconds  # (Settings.pending_grace_seconds: the sweeper's)
        self._mode = mode
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._sleep = sleep
        self._retry = RetryPolicy(sleep=sleep)
        # The same clock as the sweeper's: what it stamps into the PendingIndex is judged by it.
        self._clock = clock
        self._requests = requests or RecountRequests(table_name, self._clients, clock)

    def apply(self, ops: Sequence[Op]) -> ApplyReport:
        report = ApplyReport()
        counts = [(position, op) for position, op in enumerate(ops) if isinstance(op, CountOp)]
        finishes = [
            (position, op)
            for position, op in enumerate(ops)
            if isinstance(
                op, FinishDeleteOp | FinishResizeOp | OrgReleasedOp | OrgResizedOp | HandedOffDeleteOp
            )
        ]
        censuses = [(position, op) for position, op in enumerate(ops) if isinstance(op, CensusOp)]
        heals = {(op.account_id, op.kind, op.org, op.shard) for op in ops if isinstance(op, HealOp)}
        try:
            chunks = plan_chunks([op for _, op in counts], self._mode)
            for number, chunk in enumerate(chunks):
                try:
                    report.merge(self._count([counts[i][1] for i in chunk]))
                except CountingError as error:
                    failed = sorted(counts[i][0] for later in chunks[number:] for i in later)
                    later = [position for position, _ in finishes + censuses]
                    raise ChunkFailed(failed + later, str(error)) from error
            for done, (_, op) in enumerate(finishes):
                try:
                    report.merge(self._finish(op))
                except (ClientError, BotoCoreError, CountingError) as error:
                    failed = [p for p, _ in finishes[done:] + censuses]
                    raise ChunkFailed(failed, repr(error)) from error
            for done, (_, census) in enumerate(censuses):
                try:
                    self._requests.put(census.account_id, census.range_id, census.reason, kind=census.kind)
                except (ClientError, BotoCoreError) as error:
                    raise ChunkFailed([p for p, _ in censuses[done:]], repr(error)) from error
                report.censuses_requested += 1
            for account_id, kind, org, shard in sorted(heals, key=str):
                report.merge(self._heal(HealOp(account_id, kind, org, shard)))
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
        """The update of each counter item (first: an account's kind, or an organization's), then
        one update per resource."""
        per_counter: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        keys: dict[tuple[str, str], tuple[CountOp, dict[str, Any]]] = {}
        for op in ops:
            per_counter[op.counter][op.range_id] += op.units
            keys[op.counter] = (op, op.counter_key)
        actions: list[dict[str, Any]] = []
        holds = {op.counter for op in ops if op.hold}
        for counter, per_range in per_counter.items():
            op, key = keys[counter]
            expr = expressions.counted(op.account_id, per_range, listed=op.org is None, hold=counter in holds)
            actions.append({"Update": expr.update_key(self._table, key)})
        actions.extend(self._resource_action(op) for op in ops)
        return actions

    def _resource_action(self, op: CountOp) -> dict[str, Any]:
        values: dict[str, Any] = {
            ":inc": {"S": op.incarnation},
            ":true": {"BOOL": True},
            ":false": {"BOOL": False},
            ":pending": {"S": items.PENDING},
            ":live": {"S": items.LIVE},
            ":units": {"N": str(op.units)},
        }
        if op.org is None:
            # Counted as it holds the units counted, and never while a delete or a resize owns
            # its counters (their writes know it was not counted), nor once a repair undoes its
            # create (a member's, marked ``undoing``: released at its organization, then removed;
            # made live here, it would be live with no seat there: review 41). Its account's unit
            # is then the census's, as for any create rolled back pending.
            # A create still pending is made live here only within half the grace period of its
            # put (items.in_time): past the grace period the census of its range counts it as
            # holding nothing and gives its unit back, so a late record (a batch retried past it)
            # would make live a create whose unit was freed for another (review 51: 3 live of 2).
            update = "SET counter_processed = :true, #state = :live REMOVE expires_at, pending_shard, pending_since"
            condition = (
                "incarnation = :inc AND counter_processed = :false "
                "AND (#state = :live OR (#state = :pending AND created_at > :fresh)) "
                "AND #units = :units AND attribute_not_exists(resize_request) AND attribute_not_exists(undoing)"
            )
            values[":fresh"] = {"S": self._fresh_since()}
        else:
            # At its organization: never while its create is being undone there (org_level.py).
            # Counted live (the usual case: its create finished); one still pending goes into
            # the PendingIndex too, for the sweeper to finish if its create died between the
            # levels (a count that finds it pending is tried again so: _still_needed).
            condition = (
                "incarnation = :inc AND org_counted = :false AND #state = :state "
                "AND #units = :units AND attribute_not_exists(resize_request) AND attribute_not_exists(undoing)"
            )
            if op.pending:
                update = (
                    "SET org_counted = :true, pending_shard = if_not_exists(pending_shard, :shard), "
                    "pending_since = if_not_exists(pending_since, :now)"
                )
                values[":shard"] = {"S": pending_shard(op.account_id, op.resource_id, kind=op.kind)}
                values[":now"] = {"S": iso_utc(self._clock())}
            else:
                update = "SET org_counted = :true"
            values[":state"] = values[":pending"] if op.pending else values[":live"]
            del values[":pending"], values[":live"]
        return {
            "Update": {
                "TableName": self._table,
                "Key": resource_key(op.account_id, op.resource_id, kind=op.kind),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#state": "state", "#units": "units"},
                "ExpressionAttributeValues": values,
            }
        }

    def _resolve(
        self, remaining: list[CountOp], reasons: list[dict[str, Any]], report: ApplyReport
    ) -> tuple[list[CountOp], bool]:
        """After a cancellation: drop the operations whose work is done or moot, and say whether
        anything other than a condition failure (a conflict, throttling) needs a retry."""
        counters = len({op.counter for op in remaining})
        if len(reasons) != counters + len(remaining):
            return remaining, True
        retry_needed = any(r.get("Code") in RETRYABLE_REASONS for r in reasons[:counters])
        kept: list[CountOp] = []
        for reason, op in zip(reasons[counters:], remaining, strict=True):
            code = reason.get("Code", "None")
            if code == "ConditionalCheckFailed":
                needed = self._still_needed(op)
                if needed is not None:
                    kept.append(needed)
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

    def _still_needed(self, op: CountOp) -> CountOp | None:
        """The count still to make after its condition failed: None if done or moot (counted,
        claimed by a delete, gone), the count of the units it holds now if a resize changed them.
        One a resize holds right now is left to the sweeper (indexed): the resize's own write
        knows it was not counted, and no record will ask for the count again."""
        item = self._clients.dynamodb.get_item(
            TableName=self._table,
            Key=resource_key(op.account_id, op.resource_id, kind=op.kind),
            ConsistentRead=True,
        ).get("Item")
        counted = items.is_counted if op.org is None else items.org_counted
        if (
            item is None
            or items.incarnation_of(item) != op.incarnation
            or counted(item)
            or items.state_of(item) not in (items.PENDING, items.LIVE)
            or "undoing" in item
        ):
            return None
        if op.org is None and self._too_late_to_make_live(item):
            # The census's (see _resource_action), asked for here: its request is in the
            # PendingIndex, so the sweeper takes it past the grace period, rolls the create back
            # and gives its unit back (review 52: a create dead before C5, its record late, was
            # left pending in no index, its unit held until TTL's 15 days)
            self._requests.put(
                op.account_id, range_of(op.resource_id), "a create too old to be made live", kind=op.kind
            )
            # ... and indexed: its create's C5, checked in time, may still land after this
            # (review 58: live, told 201, counted by nothing); the sweeper counts it then
            self._leave_to_sweeper(op)
            return None
        if items.resizing(item):
            if op.org is None:
                self._leave_to_sweeper(op)
            # (at its organization: the record of the write that ends the resize counts it there,
            # counting/records.py; the sweeper's index would not, its account's count takes it out)
            return None
        return replace(
            op,
            units=items.units_of(item),
            pending=items.state_of(item) == items.PENDING,
            # (as the item shows it: the sweeper's ops come from index entries without hold_until;
            # at either level: its count marks the counter holds_used, as its admission would have)
            hold="hold_until" in item,
        )

    def _fresh_since(self) -> str:
        """Puts after this (ISO 8601) are within half the grace period, by this process's clock."""
        return iso_utc(self._clock() - self._grace / 2)

    def _too_late_to_make_live(self, item: dict[str, Any]) -> bool:
        """Pending, put longer ago than half the grace period: the census's now (see _resource_action)."""
        return (
            items.state_of(item) == items.PENDING and items.since(item, "created_at") <= self._fresh_since()
        )

    def _leave_to_sweeper(self, op: CountOp) -> None:
        try:
            self._index_for_sweeper(op)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            # counted meanwhile (or gone): nothing is left for the sweeper

    def _index_for_sweeper(self, op: CountOp) -> None:
        retry_conflicts(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=resource_key(op.account_id, op.resource_id, kind=op.kind),
                UpdateExpression="SET pending_shard = if_not_exists(pending_shard, :shard), "
                "pending_since = if_not_exists(pending_since, :now)",
                ConditionExpression="incarnation = :inc AND counter_processed = :false",
                ExpressionAttributeValues={
                    ":shard": {"S": pending_shard(op.account_id, op.resource_id, kind=op.kind)},
                    ":now": {"S": iso_utc(self._clock())},
                    ":inc": {"S": op.incarnation},
                    ":false": {"BOOL": False},
                },
            ),
            self._retry,
        )

    # ---- finishing deletes and healing: single conditional writes --------------------------------
    def _finish(
        self, op: FinishDeleteOp | FinishResizeOp | OrgReleasedOp | OrgResizedOp | HandedOffDeleteOp
    ) -> ApplyReport:
        key = resource_key(op.account_id, op.resource_id, kind=op.kind)
        if isinstance(op, OrgResizedOp):
            return self._org_resized(op, key)
        if isinstance(op, HandedOffDeleteOp):
            return self._finish_handed_off(op, key)
        if isinstance(op, OrgReleasedOp):
            return self._org_released(op, key)
        if isinstance(op, FinishDeleteOp):
            return self._account_released(op, key)
        finished = self._resize_ended(
            key,
            {
                "UpdateExpression": f"SET #units = resize_to REMOVE {RESIZE_FIELDS}",
                # not a member's shrink: its organization's release is still to come
                "ConditionExpression": "incarnation = :inc AND resize_request = :req "
                "AND (attribute_not_exists(org) OR resize_to > resize_from)",
                "ExpressionAttributeNames": {"#units": "units"},
                "ExpressionAttributeValues": {":inc": {"S": op.incarnation}, ":req": {"S": op.request_id}},
            },
            op.request_id,
        )
        return ApplyReport(finished_resizes=1) if finished else ApplyReport(already_done=1)

    def _resize_ended(self, key: dict[str, Any], write: dict[str, Any], request_id: str) -> bool:
        """A write that ends a resize, out of the PendingIndex where nothing else needs the item
        there (resources/table.py unindexed). False if its condition failed."""
        for variant in unindexed(write):
            ended, found = self._write_or_refusal(
                lambda v=variant: self._clients.dynamodb.update_item(  # type: ignore[misc]
                    TableName=self._table, Key=key, ReturnValuesOnConditionCheckFailure="ALL_OLD", **v
                )
            )
            if ended or found is None or items.since(found, "resize_request") != request_id:
                return ended
        return False

    def _conditional(self, write: Callable[[], object]) -> bool:
        """One conditional write, conflicts retried: False if its condition failed."""
        return self._write_or_refusal(write)[0]

    def _write_or_refusal(self, write: Callable[[], object]) -> tuple[bool, dict[str, Any] | None]:
        """One conditional write, conflicts retried: (True, None), or (False, the item it was
        refused on, if its write asked for it and there was one)."""
        try:
            retry_conflicts(write, self._retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            found: Any = error.response.get("Item")
            return False, None if found is None else dict(found)
        return True, None

    def _removed(
        self, op: FinishDeleteOp | OrgReleasedOp, key: dict[str, Any], condition: str
    ) -> tuple[bool, dict[str, Any] | None]:
        """The claimed item of that incarnation removed if ``condition`` holds too; if not, the
        item as it was. One write: in the usual case its delete removed the item already, and
        nothing more is written."""
        return self._write_or_refusal(
            lambda: self._clients.dynamodb.delete_item(
                TableName=self._table,
                Key=key,
                ConditionExpression=f"incarnation = :inc AND #state = :deleting AND {condition}",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":inc": {"S": op.incarnation},
                    ":deleting": {"S": items.DELETING},
                    **({":true": {"BOOL": True}} if ":true" in condition else {}),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        )

    def _noted(
        self,
        op: FinishDeleteOp | OrgReleasedOp,
        key: dict[str, Any],
        note: str,
        condition: str,
        *,
        also: str = "",
    ) -> bool:
        """``note`` set on the item of that incarnation where ``condition`` holds, and the item
        indexed for the sweeper: if the request that released died, the sweeper finishes what is
        left past the grace period (sweeper.py), without waiting for a retried DELETE or an
        audit. ``also``: a REMOVE clause."""
        return self._conditional(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=f"SET {note} = :true, "
                "pending_shard = if_not_exists(pending_shard, :shard), "
                f"pending_since = if_not_exists(pending_since, :now){also}",
                ConditionExpression=f"incarnation = :inc AND {condition}",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":inc": {"S": op.incarnation},
                    ":true": {"BOOL": True},
                    ":deleting": {"S": items.DELETING},
                    ":shard": {"S": pending_shard(op.account_id, op.resource_id, kind=op.kind)},
                    ":now": {"S": iso_utc(self._clock())},
                },
            )
        )

    def _account_released(self, op: FinishDeleteOp, key: dict[str, Any]) -> ApplyReport:
        """A delete's release at its account applied: the item removed if its delete could not
        (§4.5). A member's claim (``account_first``) still holds its units at its organization
        (released there second, resources/delete.py): noted ``account_released`` instead (no
        longer visible, out of the HoldIndex), for the organization's release's record, or the
        sweeper, to finish. A claim made before that order released at its account last."""
        removed, seen = self._removed(
            op, key, "(attribute_not_exists(org) OR attribute_not_exists(account_first))"
        )
        if removed:
            return ApplyReport(finished_deletes=1)
        if (
            _claimed(seen, op.incarnation)
            and not items.account_released(seen)  # type: ignore[arg-type]
            and self._noted(
                op,
                key,
                "account_released",
                "#state = :deleting AND account_first = :true",
                # (out of the HoldIndex: no longer the account's; still in the OrgHoldIndex, whose
                # reclaim waits for or gives up the organization's release: review 67)
                also=" REMOVE hold_account",
            )
        ):
            return ApplyReport()
        return ApplyReport(already_done=1)

    def _org_released(self, op: OrgReleasedOp, key: dict[str, Any]) -> ApplyReport:
        """A release at its organization applied. A member's delete makes it after its account's
        (``account_first``, resources/delete.py), so the delete is done: the item removed if its
        request could not. An undone create's (org_level.py), or a claim made before that order
        (released at its organization first), is noted ``org_released``, for the sweeper."""
        removed, seen = self._removed(op, key, "account_first = :true")
        if removed:
            return ApplyReport(finished_deletes=1)
        if (
            seen is not None
            and items.incarnation_of(seen) == op.incarnation
            and self._noted(
                op,
                key,
                "org_released",
                "((#state = :deleting AND attribute_not_exists(account_first)) OR attribute_exists(undoing))",
            )
        ):
            return ApplyReport()
        return ApplyReport(already_done=1)

    def _finish_handed_off(self, op: HandedOffDeleteOp, key: dict[str, Any]) -> ApplyReport:
        """The organization's release and the removal, in one transaction on the claim its
        request handed off (resources/delete.py): exactly once, whatever else finishes the
        delete (a takeover changes the claim's owner; anything that finished it removed the
        item). The release's floor is the API path's (counters/store.py): refused on a
        best_effort that already undercounts, it is written again taking it to 0."""
        seen: int | None = None
        delay = 0.05
        for attempt in range(MAX_ATTEMPTS):
            release = expressions.release(
                op.resource_id,
                member_token(op.account_id, op.resource_id, op.incarnation),
                op.counted,
                units=op.units,
                best_effort_seen=seen,
            )
            remove: dict[str, Any] = {
                "TableName": self._table,
                "Key": key,
                "ConditionExpression": "incarnation = :inc AND #state = :deleting "
                "AND delete_request = :req AND org_handoff = :req",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {
                    ":inc": {"S": op.incarnation},
                    ":deleting": {"S": items.DELETING},
                    ":req": {"S": op.request_id},
                },
            }
            counter = org_counter_key(op.org, kind=op.kind, shard=op.shard)
            actions: list[dict[str, Any]] = [
                {"Update": release.update_key(self._table, counter)},
                {"Delete": remove},
            ]
            try:
                self._clients.dynamodb.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
                self._obs.count("HandedOffDeletesFinished")
                return ApplyReport(finished_deletes=1, transactions=1)
            except ClientError as error:
                code = error_code(error)
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
                if code == "TransactionCanceledException" and len(reasons) == 2:
                    if reasons[1] == "ConditionalCheckFailed":
                        return ApplyReport(already_done=1)  # finished, or no longer this claim's
                    if reasons[0] == "ConditionalCheckFailed":
                        seen = max(0, self._best_effort(counter))
                        continue
                    if not set(reasons) - {"None", None} <= RETRYABLE_REASONS:
                        raise CountingError(f"transaction cancelled: {reasons}") from error
                elif code not in RETRYABLE_ERRORS:
                    raise CountingError(f"{code}: {error}") from error
            if attempt < MAX_ATTEMPTS - 1:
                self._sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise CountingError(f"a handed-off delete still unfinished after {MAX_ATTEMPTS} attempts")

    def _best_effort(self, key: dict[str, Any]) -> int:
        item = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return int(item.get(BEST_EFFORT, {}).get("N", 0)) if item else 0

    def _org_resized(self, op: OrgResizedOp, key: dict[str, Any]) -> ApplyReport:
        """A shrink's move at its organization is its last: the resize finished (if its request
        did not); a grow's, or its undoing, noted on the claim. One conditional write, a second
        when the first finds a grow."""
        values = {":inc": {"S": op.incarnation}, ":req": {"S": op.request_id}}
        claimed = "incarnation = :inc AND resize_request = :req"
        noted = {"ConditionExpression": claimed, "ExpressionAttributeValues": values}
        if op.undo:
            ending: list[dict[str, Any]] = []
            writes = [{"UpdateExpression": "SET org_unresized = :req", **noted}]
        else:
            # the shrink's end (out of the PendingIndex where nothing else needs the item there),
            # or, where it is a grow, the note that its move there applied
            ending = unindexed(
                {
                    "UpdateExpression": f"SET #units = resize_to REMOVE {RESIZE_FIELDS}",
                    "ConditionExpression": f"{claimed} AND resize_to < resize_from",
                    "ExpressionAttributeNames": {"#units": "units"},
                    "ExpressionAttributeValues": values,
                }
            )
            writes = [*ending, {"UpdateExpression": "SET org_resized = :req", **noted}]
        for number, write in enumerate(writes):
            try:
                retry_conflicts(
                    lambda w=write: self._clients.dynamodb.update_item(  # type: ignore[misc]
                        TableName=self._table, Key=key, **w
                    ),
                    self._retry,
                )
            except ClientError as error:
                if error_code(error) != CONDITION_FAILED:
                    raise
                continue
            return ApplyReport(finished_resizes=1) if number < len(ending) else ApplyReport()
        return ApplyReport(already_done=1)

    def _heal(self, op: HealOp) -> ApplyReport:
        """Opportunistic: a heal that fails is tried again on the next drifted record."""
        account_id = op.account_id
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.update_item(
                    **expressions.heal().update_key(self._table, op.counter_key)
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


def _claimed(item: dict[str, Any] | None, incarnation: str) -> bool:
    return (
        item is not None
        and items.incarnation_of(item) == incarnation
        and items.state_of(item) == items.DELETING
    )
