"""Safe limit changes, each recorded in the same conditional write that makes it (records.py).

- An override (``PUT /accounts/{id}/limits/{kind}``, the legacy ``PUT .../limit``) or its removal:
  one conditional write of the kind's counter item. Below the kind's current use it is refused
  (LimitBelowUsage) unless forced, and the check is in the write's condition (``best_effort``
  and ``eventual`` at most the new limit), so no create can slip between the check and the change.
- A plan's limits (``PUT /plans/{id}``): one conditional write of the plan item, whatever the
  number of accounts on it (no per-account check: the history records it, and threshold events
  tell whom it affects as their use next changes).
- An account's plan (``PUT /accounts/{id}/plan``): refused if any kind the account uses would be
  under the new plan's limit (and has no override), unless forced; then one conditional write of
  the account's plan item. The check reads the account's counters first (one Query), so a create
  racing the move may still take a kind over: plan moves are operators' decisions, not admissions.

Each write carries the change's record and is conditional on no earlier record still waiting on
that item; a change that finds one completes it first. Completing writes the history item, puts
the change's event in the outbox (published at once, or later by the sweeper) and clears the
record. Who changed it is the caller's identity (the token's ``sub``, or the IAM principal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import CONDITION_FAILED, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.counters import CounterState
from hybrid_counter.counters.state import BEST_EFFORT, EVENTUAL, LIMIT
from hybrid_counter.errors import InProgress, LimitBelowUsage, ValidationError
from hybrid_counter.governance.publisher import LIMIT_CHANGED, OUTBOX, OutboxEvent
from hybrid_counter.governance.records import LIMIT_CHANGE, ChangeRecord, What
from hybrid_counter.keys import counter_key, counter_shard, iso_utc, pending_shard, plan_key, profile_key
from hybrid_counter.plans.store import DEFAULT_PLAN, Plan

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.effects import Effects
    from hybrid_counter.governance.history import HistoryStore
    from hybrid_counter.governance.publisher import EventPublisher
    from hybrid_counter.plans import Limits, PlanStore

Key = dict[str, dict[str, str]]
ATTEMPTS = 4


class LimitChanges:
    def __init__(
        self,
        table_name: str,
        clients: Clients,
        *,
        counters: CounterStore,
        plans: PlanStore,
        limits: Limits,
        history: HistoryStore,
        publisher: EventPublisher,
        effects: Effects,
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._counters = counters
        self._plans = plans
        self._limits = limits
        self._history = history
        self._publisher = publisher
        self._fx = effects
        self._retry = RetryPolicy()

    # ---- overrides ----------------------------------------------------------------------------------
    def set_override(self, account_id: str, kind: str, limit: int | None, *, force: bool, by: str) -> None:
        """Set (or, with None, remove) the account's override for the kind."""
        key = counter_key(account_id, kind=kind)
        for _ in range(ATTEMPTS):
            item = self._settled(key)
            state = CounterState.from_item(item)
            effective = limit if limit is not None else self._limits.plan_limit(account_id, kind)
            if not force and effective < state.used:
                raise LimitBelowUsage([(kind, effective, state.used)])
            what: What = "override" if limit is not None else "override_removed"
            record = self._record(what, state.limit, limit, force, by, account_id=account_id, kind=kind)
            if self._write_override(
                key, account_id, record, old=state.limit, new=limit, effective=effective, force=force
            ):
                self.complete(key, record)
                return
        raise InProgress("the limit kept changing while it was being set; retry the request")

    def _write_override(
        self,
        key: Key,
        account_id: str,
        record: ChangeRecord,
        *,
        old: int | None,
        new: int | None,
        effective: int,
        force: bool,
    ) -> bool:
        values: dict[str, Any] = {
            ":record": {"S": record.text()},
            ":shard": {"S": pending_shard(account_id, record.change_id, kind="limit")},
            ":since": {"S": record.at},
            ":counter_shard": {"S": counter_shard(account_id)},
        }
        names = {"#limit": LIMIT, "#change": LIMIT_CHANGE}
        sets = [
            "#change = :record",
            "pending_shard = :shard",
            "pending_since = :since",
            "counter_shard = if_not_exists(counter_shard, :counter_shard)",
        ]
        update = "SET " + ", ".join(sets)
        if new is not None:
            update = update.replace("SET ", "SET #limit = :new, ", 1)
            values[":new"] = {"N": str(new)}
        else:
            update += " REMOVE #limit"
        conditions = ["attribute_not_exists(#change)"]
        if old is None:
            conditions.append("attribute_not_exists(#limit)")
        else:
            conditions.append("#limit = :old")
            values[":old"] = {"N": str(old)}
        if not force:
            # The safety check, in the write itself: nothing can be admitted between the two.
            names.update({"#be": BEST_EFFORT, "#ev": EVENTUAL})
            values[":room"] = {"N": str(effective)}
            conditions.append("(attribute_not_exists(#be) OR #be <= :room)")
            conditions.append("(attribute_not_exists(#ev) OR #ev <= :room)")
        return self._conditional(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        )

    # ---- plans --------------------------------------------------------------------------------------
    def put_plan(self, plan_id: str, limits: dict[str, int], *, by: str) -> Plan:
        """Replace a plan's limits: one write, whatever the number of accounts on it."""
        key = plan_key(plan_id)
        for _ in range(ATTEMPTS):
            item = self._settled(key)
            old = self._plans.plan_of_item(plan_id, item)
            record = self._record(
                "plan_limits", old.limits if old else None, dict(limits), False, by, plan_id=plan_id
            )
            version = int(item.get("version", {}).get("N", "0")) if item else 0
            written: dict[str, Any] = {
                **key,
                "limits": {"M": {kind: {"N": str(limit)} for kind, limit in limits.items()}},
                "updated_at": {"S": record.at},
                "version": {"N": str(version + 1)},
                LIMIT_CHANGE: {"S": record.text()},
                "pending_shard": {"S": pending_shard("PLANS", record.change_id, kind="limit")},
                "pending_since": {"S": record.at},
            }
            condition, values = self._same_version(item, version)
            if self._put(written, condition, values):
                self.complete(key, record)
                self._limits.forget(plan_id=plan_id)
                return Plan(plan_id, dict(limits))
        raise InProgress("the plan kept changing while it was being written; retry the request")

    def assign_plan(self, account_id: str, plan_id: str, *, force: bool, by: str) -> None:
        """Move the account to another plan (refused below current use unless forced)."""
        plan = self._plans.get(plan_id)
        if plan is None:
            raise ValidationError(f"plan {plan_id} does not exist")
        key = profile_key(account_id)
        for _ in range(ATTEMPTS):
            item = self._settled(key)
            old = str(item["plan_id"]["S"]) if item and "plan_id" in item else DEFAULT_PLAN
            if not force:
                self._check_plan_fits(account_id, plan)
            record = self._record(
                "account_plan", old, plan_id, force, by, account_id=account_id, plan_id=plan_id
            )
            written: dict[str, Any] = {
                **key,
                "plan_id": {"S": plan_id},
                "updated_at": {"S": record.at},
                LIMIT_CHANGE: {"S": record.text()},
                "pending_shard": {"S": pending_shard(account_id, record.change_id, kind="plan")},
                "pending_since": {"S": record.at},
            }
            if item is None:
                condition, values = "attribute_not_exists(pk)", None
            else:
                condition = f"plan_id = :old AND attribute_not_exists({LIMIT_CHANGE})"
                values = {":old": {"S": old}}
            if self._put(written, condition, values):
                self.complete(key, record)
                self._limits.forget(account_id=account_id)
                return
        raise InProgress("the account's plan kept changing while it was being moved; retry the request")

    def _check_plan_fits(self, account_id: str, plan: Plan) -> None:
        below = [
            (kind, plan.limit_for(kind), state.used)
            for kind, state in sorted(self._counters.read_all(account_id).items())
            if state.limit is None and plan.limit_for(kind) < state.used
        ]
        if below:
            raise LimitBelowUsage(below)

    # ---- completing a change: its history, its event ------------------------------------------------
    def complete(self, key: Key, record: ChangeRecord) -> None:
        """Copy the record into history (once), publish its event, and take it off the item."""
        history_key = {"pk": {"S": record.history_pk}, "sk": {"S": record.history_sk}}
        event = (
            OutboxEvent(LIMIT_CHANGED, {"event_id": record.change_id, **record.to_json()}, history_key)
            if self._publisher.enabled
            else None
        )
        self._history.write(record, event)
        self._conditional(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=f"REMOVE {LIMIT_CHANGE}, pending_shard, pending_since",
                ConditionExpression=f"{LIMIT_CHANGE} = :record",
                ExpressionAttributeValues={":record": {"S": record.text()}},
            )
        )
        if event is not None:
            self.publish([event])

    def publish(self, events: list[OutboxEvent]) -> int:
        """Publish outbox events and take the published ones off the outbox; how many were."""
        published = self._publisher.publish(events)
        for event in published:
            self._conditional(
                lambda event=event: self._clients.dynamodb.update_item(
                    TableName=self._table,
                    Key=event.key,
                    UpdateExpression=f"REMOVE {OUTBOX}, pending_shard, pending_since",
                    ConditionExpression=f"{OUTBOX} = :event",
                    ExpressionAttributeValues={":event": {"S": event.text()}},
                )
            )
        return len(published)

    def complete_pending(self, key: Key) -> bool:
        """Complete the record an item still holds (the sweeper's part); True if it held one."""
        item = self._item(key)
        if item is None or LIMIT_CHANGE not in item:
            return False
        self.complete(key, ChangeRecord.of(str(item[LIMIT_CHANGE]["S"])))
        return True

    # ---- plumbing -----------------------------------------------------------------------------------
    def _settled(self, key: Key) -> dict[str, Any] | None:
        """The item, once no earlier change's record waits on it (completed here if one does)."""
        item = self._item(key)
        if item is not None and LIMIT_CHANGE in item:
            self.complete(key, ChangeRecord.of(str(item[LIMIT_CHANGE]["S"])))
            item = self._item(key)
        return item

    def _item(self, key: Key) -> dict[str, Any] | None:
        found = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return None if found is None else dict(found)

    def _record(
        self,
        what: What,
        old: Any,
        new: Any,
        force: bool,
        by: str,
        *,
        account_id: str | None = None,
        kind: str | None = None,
        plan_id: str | None = None,
    ) -> ChangeRecord:
        return ChangeRecord(
            change_id=self._fx.new_id()[:16],
            at=iso_utc(self._fx.clock()),
            by=by,
            what=what,
            old=old,
            new=new,
            force=force,
            account_id=account_id,
            kind=kind,
            plan_id=plan_id,
        )

    @staticmethod
    def _same_version(item: dict[str, Any] | None, version: int) -> tuple[str, dict[str, Any] | None]:
        if item is None:
            return "attribute_not_exists(pk)", None
        if "version" not in item:
            return f"attribute_not_exists(version) AND attribute_not_exists({LIMIT_CHANGE})", None
        return f"version = :v AND attribute_not_exists({LIMIT_CHANGE})", {":v": {"N": str(version)}}

    def _put(self, item: dict[str, Any], condition: str, values: dict[str, Any] | None) -> bool:
        args: dict[str, Any] = {"TableName": self._table, "Item": item, "ConditionExpression": condition}
        if values:
            args["ExpressionAttributeValues"] = values
        return self._conditional(lambda: self._clients.dynamodb.put_item(**args))

    def _conditional(self, call: Any) -> bool:
        """True if the conditional write applied, False if its condition refused it."""
        try:
            retry_conflicts(call, self._retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        return True
