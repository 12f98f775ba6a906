"""Finish, from the table itself, what the stream path will not.

Two jobs, both page by page, each page's work applied before the next page is read, so a run cut
off anywhere loses nothing and the next run goes on where the work is.

- **Sweep** (every scheduled run): the sparse PendingIndex lists what failure paths left for the
  sweeper: resources (a create whose admission outcome stayed unknown, a create adopted by a
  retried PUT, a delete's claim reverted before the stream path counted the resource) and census
  requests (recount_requests.py: a pending item rolled back or removed by TTL, whose slot only a
  census of its range can release exactly). Those older than the grace period are finished: live
  uncounted resources are counted (the stream path's own CountOp, exactly once), counted ones
  just leave the index, a requested range is recounted and its request removed once settled.
  Finished work leaves the index, so the index itself is the sweep's progress.
- **Audit** (when asked for: the retry path found stream records already trimmed, or an operator
  runs it): a scan of the whole table in segments that, for everything older than the grace
  period, counts every live uncounted resource, finishes every claimed delete (a member's that
  died after its account's release, by a census of its organization's range where nothing else
  can tell whether it was released there), and rolls back
  every create left pending (then settles the census of its range). Every repair acts only on
  the incarnation and claim it read (resources/repairs.py). It is how the table recovers when
  the stream lost records; it reads the whole table once, and saves each segment's position
  after every page in a control item (``CONTROL#sweeper``/``audit``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.counters import CounterStore
from hybrid_counter.counters.state import CounterState
from hybrid_counter.counting.eventual import ApplyReport, EventualCounter
from hybrid_counter.counting.ops import op_for_item, ops_for_item  # op_for_item: re-exported
from hybrid_counter.counting.org_recount import OrgRecounter
from hybrid_counter.counting.recount import HasRepairs, Recounter
from hybrid_counter.effects import Effects
from hybrid_counter.errors import DomainError
from hybrid_counter.governance.publisher import OUTBOX, OutboxEvent
from hybrid_counter.healing import Healer
from hybrid_counter.keys import (
    ACCOUNT_PREFIX,
    CHANGE_PREFIX,
    CONTROL_PREFIX,
    COUNTER_PREFIX,
    ORG_PREFIX,
    PLANS_PK,
    PROFILE_SK,
    REBASE_PREFIX,
    REPAIR_PREFIX,
    RESOURCE_PREFIX,
    iso_utc,
    member_token,
    org_counter_key,
    parse_account_pk,
    parse_kind_resource_sk,
    parse_org_pk,
    range_of,
)
from hybrid_counter.observability import default_observability
from hybrid_counter.orgs.counters import org_split_counter
from hybrid_counter.orgs.store import OrgStore
from hybrid_counter.recount_requests import RecountRequests, Seen, is_org_request, is_request, requested_range
from hybrid_counter.resources import items
from hybrid_counter.resources.repairs import Repairs

if TYPE_CHECKING:
    from hybrid_counter.governance.changes import LimitChanges
    from hybrid_counter.observability import Observability

__all__ = ["PENDING_INDEX", "SweepOutcome", "Sweeper", "op_for_item"]

PENDING_INDEX = "PendingIndex"
CONTROL_PK = f"{CONTROL_PREFIX}sweeper"
AUDIT_SEGMENTS = 16
PAGE_SIZE = 100


@dataclass
class SweepOutcome:
    found: int = 0
    cleared: int = 0
    deletes_finished: int = 0
    resizes_ended: int = 0
    pending_rolled_back: int = 0
    ranges_recounted: int = 0
    ranges_unsettled: int = 0
    events_published: int = 0
    changes_recorded: int = 0
    rebases_finished: int = 0
    holds_expired: int = 0
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
            "stale_resizes_ended": self.resizes_ended,
            "stale_pending_rolled_back": self.pending_rolled_back,
            "ranges_recounted": self.ranges_recounted,
            "ranges_unsettled": self.ranges_unsettled,
            "events_published": self.events_published,
            "rebases_finished": self.rebases_finished,
            "holds_expired": self.holds_expired,
            "limit_changes_recorded": self.changes_recorded,
            "pages": self.pages,
            "finished": self.finished,
        }


class Sweeper:
    def __init__(
        self,
        table_name: str,
        counter: EventualCounter,
        grace_seconds: float,
        clients: Clients | None = None,
        *,
        clock: Callable[[], float] = time.time,
        deletes: HasRepairs | None = None,
        recounter: Recounter | None = None,
        obs: Observability | None = None,
        changes: LimitChanges | None = None,
        org_recounter: OrgRecounter | None = None,
    ) -> None:
        self._table = table_name
        self._counter = counter
        self._grace = grace_seconds
        self._clients = clients or Clients()
        self._clock = clock
        self._retry = RetryPolicy()
        self._requests = RecountRequests(table_name, self._clients, clock)
        self._changes = changes  # completes limit changes and publishes events left waiting
        self._obs = obs or default_observability()
        # Takes the censuses that requests ask for; its repairs finish what died (the audit).
        self._recounter = recounter or self._own_recounter(deletes.repairs if deletes else None, obs)
        # Finishes a member's delete that died after its account's release by a census of its
        # organization's range (counting/org_recount.py).
        self._org_recounter = org_recounter or OrgRecounter(
            table_name,
            self._clients,
            OrgStore(table_name, self._clients, clock=clock),
            self._recounter.repairs,
            counter,
            grace_seconds=grace_seconds,
            clock=clock,
        )

    def _own_recounter(self, repairs: Repairs | None, obs: Observability | None) -> Recounter:
        # A repair never admits, so the counter store's default limit plays no part here.
        observed = obs or default_observability()
        counters = CounterStore(self._table, 0, self._clients, observed, Effects(clock=self._clock))
        return Recounter(
            self._table,
            counters,
            self._counter,
            Healer(self._table, self._clients, obs),
            self._clients,
            grace_seconds=self._grace,
            clock=self._clock,
            repairs=repairs,
            obs=obs,
        )

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
        self._expire_holds(outcome)
        cutoff, start = self._cutoff(older_than_seconds), None
        while True:
            if until is not None and until():
                outcome.finished = False
                return outcome
            page, start = self._pending_page(cutoff, start)
            self._apply_page(page, outcome)
            if start is None:
                return outcome

    def _expire_holds(self, outcome: SweepOutcome) -> None:
        """Every hold past its deadline released (resources/holds.py); what cannot be now (a
        store error) is found again by the next run."""
        try:
            outcome.holds_expired += self._recounter.repairs.holds().sweep()
        except (DomainError, ClientError, BotoCoreError) as error:
            self._obs.logger.warning("expired holds left to the next sweep", extra={"error": repr(error)})

    def _cutoff(self, older_than_seconds: float | None) -> str:
        grace = self._grace if older_than_seconds is None else older_than_seconds
        return iso_utc(self._clock() - grace)

    def _pending_page(
        self, cutoff: str, start: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        scan: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": PENDING_INDEX,
            # Census requests are due at once: nobody else will take them, and a census waits
            # for whatever is in flight in its range by itself (its fences).
            "FilterExpression": "pending_since < :cutoff OR begins_with(sk, :repair)",
            "ExpressionAttributeValues": {":cutoff": {"S": cutoff}, ":repair": {"S": REPAIR_PREFIX}},
            "Limit": PAGE_SIZE,
        }
        if start:
            scan["ExclusiveStartKey"] = start
        response = self._clients.dynamodb.scan(**scan)
        return [dict(item) for item in response.get("Items", [])], response.get("LastEvaluatedKey")

    def _apply_page(self, page: list[dict[str, Any]], outcome: SweepOutcome) -> None:
        outcome.pages += 1
        resources = [
            self._end_dead_resize(entry, outcome)
            for entry in page
            if _sort_key(entry).startswith(RESOURCE_PREFIX)
        ]
        resources = [self._finish_undo(item, outcome) for item in resources]
        resources = [self._finish_dead_delete(item, outcome) for item in resources]
        ops = [op for item in resources for op in ops_for_item(self._to_count(item))]
        outcome.found += len(ops)
        if ops:
            outcome.report.merge(self._counter.apply(ops))
        for item in resources:
            if _finished(item):
                outcome.cleared += self._clear_index(item)
        for entry in page:
            if is_org_request(entry):
                kind, range_id = requested_range(entry)
                self._take_org_census(parse_org_pk(entry["pk"]["S"]), kind, range_id, outcome)
            elif is_request(entry):
                kind, range_id = requested_range(entry)
                self._take_census(parse_account_pk(entry["pk"]["S"]), kind, range_id, outcome)
        self._finish_governance(page, outcome)
        self._finish_rebases(page, outcome)

    def _to_count(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A resource that still needs counting, as it stands (one GetItem; the index entry lacks
        ``hold_until``, and the count of a hold marks its counter ``holds_used``, as its
        admission would have: review 61)."""
        if not ops_for_item(entry):
            return entry
        return self._current(entry) or entry

    def _end_dead_resize(self, entry: dict[str, Any], outcome: SweepOutcome) -> dict[str, Any]:
        """A resource a resize holds is never counted (the resize's counter write moved eventual
        only if it was counted when claimed), so the stream path leaves its count here. If that
        resize's request died, it is ended first, at the size the counters hold (settled like
        any dead resize: resources/resize_settlement.py), and the resource is then counted as it
        stands. Returns the item as it is now (the index entry lacks the claim's sizes)."""
        if not items.resizing(entry):
            return entry
        account_id, rid = parse_account_pk(entry["pk"]["S"]), parse_kind_resource_sk(entry["sk"]["S"])[1]
        item = self._current(entry)
        if item is None or not items.resizing(item):
            return item or entry
        try:
            if not self._recounter.repairs.settle_stale_resize(account_id, rid, item):
                return item  # still running, or its range busy: the next sweep
        except (DomainError, ClientError, BotoCoreError):
            return item
        outcome.resizes_ended += 1
        return self._current(entry) or entry

    def _finish_undo(self, entry: dict[str, Any], outcome: SweepOutcome) -> dict[str, Any]:
        """A member's create left pending with its organization's admission counted: refused at
        its account with the undo unfinished, or dead between the two levels (its account's
        admission never made it live: the stream path would have). Once older than the grace
        period it is released at its organization and removed (resources/repairs.py). Returns
        the item as it is now."""
        if items.state_of(entry) != items.PENDING:
            return entry
        item = self._current(entry)
        if item is None or ("undoing" not in item and not items.org_counted(item)):
            return item or entry
        account_id, rid = parse_account_pk(item["pk"]["S"]), parse_kind_resource_sk(item["sk"]["S"])[1]
        try:
            if self._recounter.repairs.roll_back_stale_pending(
                account_id, rid, item
            ) or self._undone_by_census(item):
                outcome.pending_rolled_back += 1
                return {**item, "state": {"S": "gone"}}
        except (DomainError, ClientError, BotoCoreError):
            pass
        return item

    def _undone_by_census(self, item: dict[str, Any]) -> bool:
        """An undone create whose release at its organization nothing else can confirm (found
        marked, no note, its shard's last_release names another): its range's census decides,
        counting it as holding nothing there, and removes it (counting/org_recount.py). True if
        it is gone now."""
        org = items.org_of(item)
        if org is None or not self._org_recounter.dead_at_org(item):
            return False
        kind, rid = parse_kind_resource_sk(item["sk"]["S"])
        account_id = parse_account_pk(item["pk"]["S"])
        self._org_recounter.settle_range(org, kind, range_of(rid), accounts=(account_id,))
        return self._current(item) is None

    def _finish_dead_delete(self, entry: dict[str, Any], outcome: SweepOutcome) -> dict[str, Any]:
        """A claimed resource in the index (a member's delete whose account's release the stream
        path saw, ``account_released``: counting/eventual.py): finished past the grace period if
        its request died (a takeover, resources/repairs.py, which releases at its organization).
        Returns the item as it is now."""
        if items.state_of(entry) != items.DELETING:
            return entry
        item = self._current(entry)
        if item is None or items.state_of(item) != items.DELETING:
            return item or {**entry, "state": {"S": "gone"}}
        account_id, rid = parse_account_pk(item["pk"]["S"]), parse_kind_resource_sk(item["sk"]["S"])[1]
        try:
            if self._finish_claim(account_id, rid, item):
                outcome.deletes_finished += 1
                return {**item, "state": {"S": "gone"}}
        except (DomainError, ClientError, BotoCoreError):
            pass
        return item

    def _finish_claim(self, account_id: str, rid: str, item: dict[str, Any]) -> bool:
        """A stale claim finished: by its organization's census where only that can tell
        (below), else taken over (resources/repairs.py). True if it is gone now."""
        if items.left_to_census(item):  # its account's level: the census of its range decides
            kind = parse_kind_resource_sk(item["sk"]["S"])[0]
            self._recounter.recount_range(account_id, range_of(rid), fix=True, kind=kind)
            return self._current(item) is None
        if self._finish_by_census(item):
            return self._current(item) is None
        return self._recounter.repairs.finish_stale_delete(account_id, rid, item)

    def _finish_by_census(self, item: dict[str, Any]) -> bool:
        """A member's delete that died after its account's release, whose organization's release
        nothing can confirm (no note, its shard's last_release names another): its range's
        census decides (counting/org_recount.py). True if the census was taken."""
        org = items.org_of(item)
        if org is None or not self._org_recounter.dead_at_org(item) or "org_released" in item:
            return False
        kind, rid = parse_kind_resource_sk(item["sk"]["S"])
        account_id = parse_account_pk(item["pk"]["S"])
        shard = self._clients.dynamodb.get_item(  # that one shard item (a few hundred bytes)
            TableName=self._table,
            Key=org_counter_key(org, kind=kind, shard=items.org_shard(item)),
            ConsistentRead=True,
        ).get("Item")
        released = member_token(account_id, rid, items.incarnation_of(item))
        if shard is not None and CounterState.from_item(shard).last_release == released:
            return False  # it applied: the takeover just removes the claim
        self._org_recounter.settle_range(org, kind, range_of(rid), accounts=(account_id,))
        return True

    def _current(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        found = self._clients.dynamodb.get_item(
            TableName=self._table, Key={"pk": entry["pk"], "sk": entry["sk"]}, ConsistentRead=True
        ).get("Item")
        return None if found is None else dict(found)

    def _finish_governance(self, page: list[dict[str, Any]], outcome: SweepOutcome) -> None:
        """Limit changes whose history a process did not get to write, and events it did not get
        to publish (governance/): both wait in the PendingIndex."""
        if self._changes is None:
            return
        waiting = [OutboxEvent.of(entry) for entry in page if OUTBOX in entry]
        if waiting:
            outcome.events_published += self._changes.publish(waiting)
        for entry in page:
            key = {"pk": entry["pk"], "sk": entry["sk"]}
            if _holds_limits(entry) and self._changes.complete_pending(key):
                outcome.changes_recorded += 1

    def _finish_rebases(self, page: list[dict[str, Any]], outcome: SweepOutcome) -> None:
        """A split counter's rebase whose process died (its record waits in the PendingIndex):
        finished from its record (counters/split.py). Until then creates of that kind finish it
        themselves; this is for a kind nobody creates."""
        for entry in page:
            pk, sk = str(entry["pk"]["S"]), _sort_key(entry)
            if not (pk.startswith(ORG_PREFIX) and sk.startswith(REBASE_PREFIX)):
                continue
            record = self._current(entry)
            if record is None:
                continue
            splits = org_split_counter(self._table, self._clients, self._obs, Effects(clock=self._clock))
            try:
                splits.finish(parse_org_pk(pk), sk[len(REBASE_PREFIX) :], record)
            except (DomainError, ClientError, BotoCoreError):
                continue
            outcome.rebases_finished += 1

    def _take_census(self, account_id: str, kind: str, range_id: str, outcome: SweepOutcome) -> None:
        """Recount a requested range and drop the request once settled (else it stays for the
        next run: the range was busy, or a delete in it is still running)."""

        def census() -> bool:
            result, actions = self._recounter.recount_range(account_id, range_id, fix=True, kind=kind)
            outcome.pending_rolled_back += sum(1 for action in actions if action.startswith("rolled back"))
            return result.settled

        self._take(
            self._requests.of(account_id, range_id, kind=kind),
            census,
            partial(self._requests.settle, account_id, range_id, kind=kind),
            outcome,
            whose={"account_id": account_id, "kind": kind, "range": range_id},
        )

    def _take_org_census(self, org_id: str, kind: str, range_id: str, outcome: SweepOutcome) -> None:
        """The census of an organization's range a repair asked for (recount_requests.py), the
        request dropped once it settled (else it stays for the next run)."""
        seen = self._requests.of_org(org_id, range_id, kind=kind)
        self._take(
            seen,
            lambda: self._org_recounter.settle_range(org_id, kind, range_id, accounts=seen.accounts).settled,
            partial(self._requests.settle_org, org_id, range_id, kind=kind),
            outcome,
            whose={"org_id": org_id, "kind": kind, "range": range_id},
        )

    def _take(
        self,
        seen: Seen,
        census: Callable[[], bool],
        settle: Callable[[Seen], bool],
        outcome: SweepOutcome,
        *,
        whose: dict[str, str],
    ) -> None:
        """A requested census (``seen``: the request as read before it), taken, and the request
        settled once the census settled. A census that fails (a store error) leaves its request
        for the next run, and the run goes on: one that kept failing must not stop the requests,
        resources and records behind it in the index, run after run (review 62)."""
        if not seen.n:
            return
        try:
            settled = census()
        except (DomainError, ClientError, BotoCoreError) as error:
            # (whose: an organization's census that keeps failing holds its seats, an operator's
            # to see; review 63: 9a72da9 logged both alike, with neither owner nor range)
            what = "an organization's" if "org_id" in whose else "an account's"
            self._obs.logger.warning(
                f"{what} census left to the next sweep", extra={**whose, "error": repr(error)}
            )
            outcome.ranges_unsettled += 1
            return
        if settled and settle(seen):
            outcome.ranges_recounted += 1
        else:
            outcome.ranges_unsettled += 1

    def _clear_index(self, entry: dict[str, Any]) -> int:
        """Take a resource that needs nothing more out of the index (the index entry may be stale:
        the write is conditional on the resource's own state: not resized since it was read, as a
        resize's claim is found through its entry, review 44; counted at every level if live)."""
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.update_item(
                    TableName=self._table,
                    Key={"pk": entry["pk"], "sk": entry["sk"]},
                    UpdateExpression="REMOVE pending_shard, pending_since",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(resize_request) AND "
                    "((counter_processed = :true AND (attribute_not_exists(org) OR org_counted = :true)) "
                    "OR #state <> :live)",
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
            op for item in resources if items.since(item, "created_at") < cutoff for op in ops_for_item(item)
        ]
        outcome.found += len(ops)
        if ops:
            outcome.report.merge(self._counter.apply(ops))
        repairs = self._recounter.repairs
        stale_pending: set[tuple[str, str, str]] = set()
        for item in resources:
            account_id, (kind, rid) = (
                parse_account_pk(item["pk"]["S"]),
                parse_kind_resource_sk(item["sk"]["S"]),
            )
            state = items.state_of(item)
            if state == items.PENDING and repairs.stale(item, "created_at"):
                stale_pending.add((account_id, kind, range_of(rid)))
            try:
                if state == items.DELETING and self._finish_claim(account_id, rid, item):
                    outcome.deletes_finished += 1
                elif state == items.LIVE and repairs.settle_stale_resize(account_id, rid, item):
                    outcome.resizes_ended += 1
            except (DomainError, ClientError, BotoCoreError):
                continue  # the store refused: the claim is still there for the next audit or recount
        # A create left pending: its range's census releases what the counter holds for it, then
        # removes it (counting/recount.py). Asked for durably first, so a census that cannot
        # settle now is taken by a later sweep.
        for account_id, kind, range_id in sorted(stale_pending):
            self._requests.put(account_id, range_id, "the audit found a create left pending", kind=kind)
            self._take_census(account_id, kind, range_id, outcome)

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


def _finished(item: dict[str, Any]) -> bool:
    """A resource's index entry has nothing left to do: counted at every level, or gone (and no
    member's create left pending at its organization, no delete claimed)."""
    if items.state_of(item) == items.PENDING:
        # a member's create left pending, or one whose count came too late (counting/eventual.py:
        # its C5 may still make it live, to be counted here; else its census removes it)
        return False
    if items.state_of(item) == items.DELETING:
        return False  # a delete still to finish (or still running): the next sweep looks again
    if items.resizing(item):
        return False  # a resize still to end (or still running): its entry is how it is found
    if items.state_of(item) != items.LIVE:
        return True
    return items.is_counted(item) and (items.org_of(item) is None or items.org_counted(item))


def _sort_key(entry: dict[str, Any]) -> str:
    return str(entry.get("sk", {}).get("S", ""))


def _holds_limits(entry: dict[str, Any]) -> bool:
    """A limit change's record item (governance/records.py), or, before record items, an item a
    limit change wrote its record on (a counter item, a plan, an account's plan)."""
    pk, sk = str(entry.get("pk", {}).get("S", "")), _sort_key(entry)
    return pk.startswith(CHANGE_PREFIX) or sk.startswith(COUNTER_PREFIX) or sk == PROFILE_SK or pk == PLANS_PK
