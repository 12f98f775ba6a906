"""Safe limit changes, each made once and recorded once, whatever is lost (records.py).

- An override (``PUT /accounts/{id}/limits/{kind}``, the legacy ``PUT .../limit``) or its removal:
  one conditional write of the kind's counter item. Below the kind's current use it is refused
  (LimitBelowUsage) unless forced, and the check is in the write's condition (``best_effort``
  and ``eventual`` at most the new limit), so no create can slip between the check and the
  change. Removing one is judged by the plan's limit as stored, read inside the check (not
  through this process's cache, which may be behind another process's change of the plan), and
  written only while the plan still has that limit (its version: review 49).
- A plan's limits (``PUT /plans/{id}``): one conditional write of the plan item, whatever the
  number of accounts on it (no per-account check: the history records it, and threshold events
  tell whom it affects as their use next changes).
- An account's plan (``PUT /accounts/{id}/plan``): refused if any kind the account uses would be
  under the new plan's limit (and has no override), unless forced; then one transaction: the
  account's plan item (its ``plan_moves`` + 1), while the new plan still has the limits it was
  judged by (review 49), and the move's mark on each of its kinds' counter items (``plan_of``,
  ``plan_move``), each written only while that kind's use fits the new limit or has an override.
  An admission judged by a plan is conditional on the mark it read, so from the move's answer on
  every process judges by the new plan (plans/limits.py), and no create slips between the check
  and the move. (An account with more than MAX_MARKS kinds to mark moves without the marks: seen
  within PlanCacheSeconds, its check read before the write, as every move before the marks.)

A request that changes nothing (the value is already the one asked for: a repeat, a removal of
an override that is not there) writes, records and publishes nothing. A change keeps one change
id for the whole request, so when its write applies and the response is lost (botocore's resend
is then refused by the change's own condition) it finds itself named on the item, or already in
history, and completes that change instead of making a second one. Each change is completed
(in history) before the next change of the same item is made, and the next change's write is
conditional on the item still naming the change it completed: three writes a change (its record
item, the change, its history item), and reads of the item and of the history of the change it
names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import (
    CONDITION_FAILED,
    RetryPolicy,
    error_code,
    retry_conflicts,
    transact_conditionally,
)
from hybrid_counter.counters import CounterState
from hybrid_counter.counters.state import BEST_EFFORT, EVENTUAL, LIMIT, PLAN_MOVE, PLAN_OF, PLAN_VERSION
from hybrid_counter.errors import InProgress, LimitBelowUsage, NotFound, ValidationError
from hybrid_counter.governance.event_log import take_off
from hybrid_counter.governance.publisher import LIMIT_CHANGED, OUTBOX, OutboxEvent
from hybrid_counter.governance.records import LIMIT_CHANGE, ChangeRecord, What, record_key
from hybrid_counter.keys import (
    EPOCHS_PER_INCARNATION,
    HISTORY_PREFIX,
    ORG_INCARNATIONS_KEY,
    ORG_PREFIX,
    PLANS_PK,
    counter_key,
    counter_shard,
    epoch_of,
    iso_utc,
    org_counter_key,
    org_creation_key,
    org_key,
    parse_account_pk,
    parse_org_pk,
    pending_shard,
    plan_key,
    profile_key,
)
from hybrid_counter.orgs.counters import org_counters
from hybrid_counter.plans.store import DEFAULT_PLAN, Plan

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.effects import Effects
    from hybrid_counter.governance.history import HistoryStore
    from hybrid_counter.governance.publisher import EventPublisher
    from hybrid_counter.plans import Limits, PlanStore

Key = dict[str, dict[str, str]]
Guard = tuple[str, dict[str, str], dict[str, Any]]  # a condition added to a write, its names and values
Check = dict[str, Any]  # a transaction's action on another item (a ConditionCheck, or an Update)
ATTEMPTS = 4
# Kinds whose counter items a plan move marks in its own transaction (DynamoDB's 100 actions: the
# profile's write, its record's check, the new plan's and the old plan's, and these); an account
# with more moves as before the marks, seen within PlanCacheSeconds
MAX_MARKS = 96


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
        event_log_days: int = 7,
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._counters = counters
        self._plans = plans
        self._limits = limits
        self._history = history
        self._publisher = publisher
        self._fx = effects
        self._log_days = event_log_days
        self._retry = RetryPolicy()

    # ---- overrides ----------------------------------------------------------------------------------
    def set_override(self, account_id: str, kind: str, limit: int | None, *, force: bool, by: str) -> None:
        """Set (or, with None, remove) the account's override for the kind."""
        self._override(
            counter_key(account_id, kind=kind),
            kind,
            limit,
            force=force,
            by=by,
            plan_of=lambda: self._account_plan(account_id, kind),
            ids={"account_id": account_id},
            counter_index=account_id,
        )

    def set_org_override(
        self,
        org_id: str,
        kind: str,
        limit: int | None,
        *,
        force: bool,
        by: str,
        guard: Callable[[int], Guard] | None = None,
    ) -> None:
        """Set (or, with None, remove) the organization's override for the kind (on its counter
        item, shard 0: its admissions are conditional on it, as an account's are on its own).
        ``guard``: for a change that is not forced, called with the limit it makes effective
        before each attempt; the condition it returns is added to the write (a split counter's
        allowances laid out for that limit first: resources/org_level.py lower_first)."""
        self._override(
            org_counter_key(org_id, kind=kind),
            kind,
            limit,
            force=force,
            by=by,
            plan_of=lambda: self._org_plan(org_id, kind),
            ids={"org_id": org_id},
            counter_index=None,
            # a split counter's use is its shards' (the check in the write covers shard 0 only;
            # the guard keeps the other shards within the limit until it is laid out)
            used_of=lambda state: self._org_used(org_id, kind, state),
            guard=guard,
            # its organization still there (not being deleted) when the override is written: an
            # override written after DELETE /orgs would outlive it (review of its governance)
            owner=lambda: _holder_check(self._table, org_key(org_id), None, exists=True),
            owner_gone=lambda: self._org_gone(org_id),
        )

    def _account_plan(self, account_id: str, kind: str) -> tuple[int, list[Check]]:
        """The account's plan's limit as stored, and the checks that it is still its plan, with
        the limits it was read with."""
        stored = self._limits.stored_plan(account_id, kind)
        return stored.limit, [
            _holder_check(self._table, profile_key(account_id), stored.plan_id, exists=False),
            _plan_check(self._table, stored.plan_id, stored.plan),
        ]

    def _org_plan(self, org_id: str, kind: str) -> tuple[int, list[Check]]:
        """The organization's plan's limit as stored, and the checks that it is still its plan,
        with the limits it was read with (and that the organization is still there)."""
        stored = self._limits.stored_org_plan(org_id, kind)
        if stored is None:
            raise NotFound(f"organization {org_id} not found")
        return stored.limit, [
            _holder_check(self._table, org_key(org_id), stored.plan_id, exists=True),
            _plan_check(self._table, stored.plan_id, stored.plan),
        ]

    def _org_gone(self, org_id: str) -> Exception | None:
        """Why an organization's change was refused, if it is no longer there to change."""
        item = self._item(org_key(org_id))
        if item is None:
            return NotFound(f"organization {org_id} not found")
        if "deleting" in item:
            return InProgress("the organization is being deleted; retry the request")
        return None

    def _org_used(self, org_id: str, kind: str, state: CounterState) -> int:
        if not state.in_a_split:
            return state.used
        shards = org_counters(self._clients, self._table, org_id).get(kind)
        return state.used if shards is None else shards.used

    def _override(
        self,
        key: Key,
        kind: str,
        limit: int | None,
        *,
        force: bool,
        by: str,
        plan_of: Callable[[], tuple[int, list[Check]]],
        ids: dict[str, str],
        counter_index: str | None,
        used_of: Callable[[CounterState], int] | None = None,
        guard: Callable[[int], Guard] | None = None,
        owner: Callable[[], Check] | None = None,
        owner_gone: Callable[[], Exception | None] | None = None,
    ) -> None:
        change = self._new_change()
        for _ in range(ATTEMPTS):
            item, named = self._settled(key)
            state = CounterState.from_item(item)
            if state.limit == limit:
                return  # nothing changes (a repeat, or no override to remove): nothing recorded
            owned = [] if owner is None else [owner()]
            if limit is not None:
                effective, checks = limit, owned
            else:
                # Judged by the plan as stored, and written only while it is still that plan: a
                # plan move in between (itself judged on this override being there) refuses the
                # write, and it is judged again (review of the organization's governance); and
                # only while the plan still has the limits it was judged by: a PUT /plans that
                # lowered it in between went unseen, and the removal landed below use unforced
                # (review 49). A forced removal may land below use: no fence on either.
                effective, plan_checks = plan_of()
                checks = plan_checks if not force else owned
            used = state.used if used_of is None else used_of(state)
            if not force and effective < used:
                raise LimitBelowUsage([(kind, effective, used)])
            guarded = guard(effective) if guard is not None and not force else None
            what: What = "override" if limit is not None else "override_removed"
            record = self._record(
                self._after(change, named), what, state.limit, limit, force=force, by=by, kind=kind, **ids
            )
            write = partial(
                self._write_override,
                key,
                counter_index,
                record,
                named=named,
                old=state.limit,
                new=limit,
                effective=effective,
                force=force,
                guard=guarded,
                checks=checks,
            )
            if self._made(key, record, write):
                return
            if owner_gone is not None and (gone := owner_gone()) is not None:
                raise gone
        raise InProgress("the limit kept changing while it was being set; retry the request")

    def _write_override(
        self,
        key: Key,
        counter_index: str | None,
        record: ChangeRecord,
        *,
        named: str | None,
        old: int | None,
        new: int | None,
        effective: int,
        force: bool,
        guard: Guard | None = None,
        checks: list[Check],
        also: list[Check],
    ) -> bool:
        """The override's one write, in a transaction with ``also`` (its record item still
        there) and ``checks`` (other items' conditions)."""
        values: dict[str, Any] = {":change": {"S": record.name}}
        names = {"#limit": LIMIT, "#change": LIMIT_CHANGE}
        sets = ["#change = :change"]
        if counter_index is not None:  # an account's counter item is listed in CounterIndex
            values[":counter_shard"] = {"S": counter_shard(counter_index)}
            sets.append("counter_shard = if_not_exists(counter_shard, :counter_shard)")
        if new is not None:
            sets.insert(0, "#limit = :new")
            values[":new"] = {"N": str(new)}
        update = "SET " + ", ".join(sets) + ("" if new is not None else " REMOVE #limit")
        conditions = [_still_named(named, values)]
        if old is None:
            conditions.append("attribute_not_exists(#limit)")
        else:
            conditions.append("#limit = :old")
            values[":old"] = {"N": str(old)}
        if not force:
            conditions.append(_use_within(effective, names, values))
        if guard is not None:
            condition, guard_names, guard_values = guard
            conditions.append(f"({condition})")
            names.update(guard_names)
            values.update(guard_values)
        write: dict[str, Any] = {
            "TableName": self._table,
            "Key": key,
            "UpdateExpression": update,
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        return self._written(write, [*also, *checks])

    # ---- plans --------------------------------------------------------------------------------------
    def put_plan(self, plan_id: str, limits: dict[str, int], *, by: str) -> Plan:
        """Replace a plan's limits: one write, whatever the number of accounts on it."""
        key = plan_key(plan_id)
        change = self._new_change()
        for _ in range(ATTEMPTS):
            item, named = self._settled(key)
            old = self._plans.plan_of_item(plan_id, item)
            if item is not None and old is not None and old.limits == limits:
                return old  # the plan already has these limits: nothing recorded
            record = self._record(
                self._after(change, named),
                "plan_limits",
                old.limits if old else None,
                dict(limits),
                force=False,
                by=by,
                plan_id=plan_id,
            )
            version = int(item.get("version", {}).get("N", "0")) if item else 0
            written: dict[str, Any] = {
                **key,
                "limits": {"M": {kind: {"N": str(limit)} for kind, limit in limits.items()}},
                "updated_at": {"S": record.at},
                "version": {"N": str(version + 1)},
                LIMIT_CHANGE: {"S": record.name},
            }
            # The version fences every change since the read, the one named there included.
            condition, values = self._same_version(item, version)
            if self._made(key, record, partial(self._put, written, condition, values)):
                self._limits.forget(plan_id=plan_id)
                return Plan(plan_id, dict(limits))
        raise InProgress("the plan kept changing while it was being written; retry the request")

    def assign_plan(self, account_id: str, plan_id: str, *, force: bool, by: str) -> None:
        """Move the account to another plan (refused below current use unless forced)."""
        key = profile_key(account_id)
        change = self._new_change()
        for _ in range(ATTEMPTS):
            plan = self._target_plan(plan_id)  # each attempt judges by the plan as it is now
            item, named = self._settled(key)
            old = str(item["plan_id"]["S"]) if item and "plan_id" in item else DEFAULT_PLAN
            if old == plan_id:
                self._limits.forget(account_id=account_id)
                return  # already on it: nothing recorded
            counters = self._counters.read_all(account_id)
            relied = [] if force else _fits(plan, counters)
            moves = int(item["plan_moves"]["N"]) if item and "plan_moves" in item else 0
            registered = set(item["kinds"]["SS"]) if item and "kinds" in item else set()
            marks = self._plan_marks(
                account_id, counters, old, plan, moves + 1, judged=not force, registered=registered
            )
            record = self._record(
                self._after(change, named),
                "account_plan",
                old,
                plan_id,
                force=force,
                by=by,
                account_id=account_id,
                plan_id=plan_id,
            )
            # An update, not a put: the item also holds the account's organization and kinds.
            values: dict[str, Any] = {
                ":new": {"S": plan_id},
                ":at": {"S": record.at},
                ":name": {"S": record.name},
                ":moves": {"N": str(moves + 1)},
            }
            if item is None or "plan_id" not in item:
                condition = "attribute_not_exists(plan_id)"
            else:
                values[":old"] = {"S": old}
                condition = "plan_id = :old"
            if moves:
                values[":moved"] = {"N": str(moves)}
                condition += " AND plan_moves = :moved"
            else:
                condition += " AND attribute_not_exists(plan_moves)"
            if marks:
                # and the kinds registered as read, each marked: a kind's first create registers
                # it before it writes anything, so one judged before the move and admitted after
                # finds its item marked (review 83: a kind no plan named as the move read them)
                if registered:
                    values[":registered"] = {"N": str(len(registered))}
                    condition += " AND size(kinds) = :registered"
                else:
                    condition += " AND attribute_not_exists(kinds)"
            condition += f" AND {_still_named(named, values, LIMIT_CHANGE)}"
            # each counter item marked with the move in the same write, its use judged there
            # (_plan_marks); without the marks (too many kinds), as before: the overrides relied
            # on checked, the counters read before it
            checks = marks or [
                _override_check(self._table, counter_key(account_id, kind=kind)) for kind in relied
            ]
            checks += self._judged_by(plan_id, plan, judged=not force)
            write = partial(
                self._update,
                key,
                f"SET plan_id = :new, plan_moves = :moves, updated_at = :at, {LIMIT_CHANGE} = :name",
                condition,
                values,
                checks=checks,
            )
            if self._made(key, record, write):
                self._limits.forget(account_id=account_id)
                return
        raise InProgress("the account's plan kept changing while it was being moved; retry the request")

    def _plan_marks(
        self,
        account_id: str,
        counters: Mapping[str, CounterState],
        old: str,
        plan: Plan,
        move: int,
        *,
        judged: bool,
        registered: set[str],
    ) -> list[Check]:
        """The move's mark on each counter item an admission may judge by the plan: every kind
        with an item, registered (a first create judged before the move and admitted after it
        finds its item marked), or of the old plan or the new (an item made where there is none:
        a process that cached the old plan judges such a kind by it in usage; a create reads the
        profile at a kind's first admission, OrgLevel.membership). Each
        written only below ``move`` (a later move's mark stays), and (``judged``) only while the
        kind's use is within the new plan's limit or it has an override (LimitBelowUsage judged
        in the write itself: an admission between the read and the move refuses the move, which
        reads again). [] where they would not fit in the move's transaction (MAX_MARKS kinds):
        the move is then seen within PlanCacheSeconds, as a move was before its marks."""
        before = self._plans.get(old)
        kinds = sorted({*counters, *registered, *(before.limits if before else {}), *plan.limits})
        if len(kinds) > MAX_MARKS:
            return []
        # and the old plan still as read: a kind it gains before the move is written is marked
        # by the next attempt (review 80: left unmarked, and a process that cached the account's
        # profile judged it by the old plan after the move's answer)
        marks: list[Check] = [_plan_check(self._table, old, before)]
        for kind in kinds:
            values: dict[str, Any] = {
                ":plan": {"S": plan.plan_id},
                ":move": {"N": str(move)},
                ":version": {"N": str(plan.version)},
            }
            condition = "(attribute_not_exists(#move) OR #move < :move)"
            names = {"#plan": PLAN_OF, "#move": PLAN_MOVE, "#version": PLAN_VERSION}
            if judged:
                names["#limit"] = LIMIT
                within = _use_within(plan.limit_for(kind), names, values)
                condition += f" AND (attribute_exists(#limit) OR ({within}))"
            marks.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": counter_key(account_id, kind=kind),
                        "UpdateExpression": "SET #plan = :plan, #move = :move, #version = :version",
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                }
            )
        return marks

    def put_org(self, org_id: str, plan_id: str, *, force: bool, by: str) -> bool:
        """Create the organization on a plan, or move it to another (refused where a kind it
        uses, with no override of its own, would be over the new plan's limit, unless forced).
        True if it was created."""
        key = org_key(org_id)
        change = self._new_change()
        for _ in range(ATTEMPTS):
            plan = self._target_plan(plan_id)  # each attempt judges by the plan as it is now
            item, named = self._settled(key)
            old = str(item["plan_id"]["S"]) if item and "plan_id" in item else None
            if old == plan_id:
                return False  # already on it: nothing recorded
            judged = not force and item is not None  # a creation has no use to judge
            relied = self._check_org_plan_fits(org_id, plan) if judged else []
            record = self._record(
                self._after(change, named),
                "org_plan",
                old,
                plan_id,
                force=force,
                by=by,
                org_id=org_id,
                plan_id=plan_id,
            )
            values: dict[str, Any] = {
                ":new": {"S": plan_id},
                ":at": {"S": record.at},
                ":name": {"S": record.name},
            }
            created = ""
            above: list[Check] = []
            if old is None:
                condition = "attribute_not_exists(plan_id)"
                # its split counter's epochs start above any a deleted organization of the id
                # reached (counters/split.py): a rebase of the old one never lands on this one.
                # Drawn for this attempt, and written only above the last creation of the id: a
                # number drawn before another creation of the id and its deletion came between
                # would start below that one's epochs (review 34)
                created = ", epoch_base = :base"
                base = self._incarnation() * EPOCHS_PER_INCARNATION
                values[":base"] = {"N": str(base)}
                above = [self._creation_above(org_id, base)]
            else:
                values[":old"] = {"S": old}
                condition = "plan_id = :old"
            condition += f" AND {_still_named(named, values, LIMIT_CHANGE)}"
            # not once its deletion began: that completes the history its items name, then
            # removes them (a move written after would be dropped with them)
            condition += " AND attribute_not_exists(deleting)"
            # plan_moves orders views of its plan (a split counter's basis, counters/split.py)
            values[":one"] = {"N": "1"}
            update = (
                "SET plan_id = :new, updated_at = :at, created_at = if_not_exists(created_at, :at), "
                f"{LIMIT_CHANGE} = :name{created} ADD plan_moves :one"
            )
            checks = [_override_check(self._table, org_counter_key(org_id, kind=kind)) for kind in relied]
            checks += above + self._judged_by(plan_id, plan, judged=judged)
            if self._made(key, record, partial(self._update, key, update, condition, values, checks=checks)):
                self._limits.forget(org_id=org_id)
                return old is None
            # A move refused by DELETE /orgs: 503 while its mark stands; once the deletion is done
            # the id is free, and the next attempt creates it (as a PUT after the 204 would), not 404
            if item is not None and isinstance(gone := self._org_gone(org_id), InProgress):
                raise gone
        raise InProgress("the organization kept changing while its plan was being set; retry the request")

    def _target_plan(self, plan_id: str) -> Plan:
        """The plan an owner is moved to, as stored now (ValidationError: there is none)."""
        plan = self._plans.get(plan_id)
        if plan is None:
            raise ValidationError(f"plan {plan_id} does not exist")
        return plan

    def _judged_by(self, plan_id: str, plan: Plan, *, judged: bool) -> list[Check]:
        """The check a plan move adds when it was judged by the target plan's limits: written
        only while the plan still has them. Read once before the retries and never fenced, a
        PUT /plans lowering the plan between the judgement and the write went unseen and the
        move landed below use unforced (review 49); refused, the move reads and judges again. A
        forced move, or a creation, judged nothing by them: no check."""
        return [_plan_check(self._table, plan_id, plan)] if judged else []

    def _creation_above(self, org_id: str, base: int) -> Check:
        """The transaction's write of the id's last creation number, refused unless ``base`` is
        above it (a refusal: the next attempt reads the organization again and draws again)."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": org_creation_key(org_id),
                "UpdateExpression": "SET epoch_base = :base",
                "ConditionExpression": "attribute_not_exists(epoch_base) OR epoch_base < :base",
                "ExpressionAttributeValues": {":base": {"N": str(base)}},
            }
        }

    def _incarnation(self) -> int:
        """A number no organization created before had (one ADD on a control item per creation:
        an operator's call). Not the clock: two hosts' clocks could put a new organization's
        epochs below those of the deleted one of its id."""
        added = retry_conflicts(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=ORG_INCARNATIONS_KEY,
                UpdateExpression="ADD n :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
                ReturnValues="UPDATED_NEW",
            ),
            self._retry,
        )
        return int(added["Attributes"]["n"]["N"])

    def _check_org_plan_fits(self, org_id: str, plan: Plan) -> list[str]:
        # A split kind's use is its shards' uses summed, as its override's check (_org_used) and
        # its admissions count it; its total()'s larger summed counter can be below that where
        # one shard's eventual is above its best_effort (review 79)
        shard_sets = org_counters(self._clients, self._table, org_id)
        states = {kind: shards.total() for kind, shards in shard_sets.items()}
        return _fits(plan, states, used={kind: shards.used for kind, shards in shard_sets.items()})

    # ---- making a change once -----------------------------------------------------------------------
    def _made(self, key: Key, record: ChangeRecord, write: Callable[..., bool]) -> bool:
        """Write the change's record item, then the change itself; True once the change is made
        (by this write, or by an earlier attempt of it whose response was lost) and completed.
        False: another change came first; the caller judges again on the item as it is now (a
        record item left behind is the sweeper's to remove: a change it names never happened).
        The change is written only while its record item is there (``also``, in the same
        transaction): once the sweeper took a record past the grace period for one whose request
        died, a request that had only stalled cannot make its change after all, with nothing
        left to put it in history if it then dies (review 42)."""
        self._put_record(key, record)
        if write(also=[_record_check(self._table, record)]):
            self.complete(record)
            return True
        # (A lost response: botocore's resend carries the transaction's client token, and DynamoDB
        # answers it as the write that applied; a refusal is looked into all the same.)
        found = self._item(key) or {}
        if found.get(LIMIT_CHANGE, {}).get("S") == record.name:
            self.complete(record)  # ours applied, and was refused again by its own condition
            return True
        return self._history.exists(record)  # ours applied, and the next change completed it

    def _put_record(self, key: Key, record: ChangeRecord) -> None:
        retry_conflicts(
            lambda: self._clients.dynamodb.put_item(
                TableName=self._table,
                Item={
                    **record_key(record.change_id),
                    "record": {"S": record.text()},
                    "changes_pk": key["pk"],
                    "changes_sk": key["sk"],
                    "pending_shard": {"S": pending_shard(key["pk"]["S"], record.change_id, kind="limit")},
                    "pending_since": {"S": record.at},
                },
            ),
            self._retry,
        )

    # ---- completing a change: its history, its event ------------------------------------------------
    def complete(self, record: ChangeRecord) -> None:
        """Copy the record into history (once) and publish its event while it is still in the
        outbox on the history item (a publish twice is the same event id, which consumers dedupe
        on; one that fails stays for the sweeper)."""
        history_key = {"pk": {"S": record.history_pk}, "sk": {"S": record.history_sk}}
        event = (
            OutboxEvent(LIMIT_CHANGED, {"event_id": record.change_id, **record.to_json()}, history_key)
            if self._publisher.enabled
            else None
        )
        written = self._history.write(record, event) or (
            event is not None and self._history.outbox_of(record) is not None
        )
        if event is not None and written:
            self.publish([event])

    def publish(self, events: list[OutboxEvent]) -> int:
        """Publish outbox events and take the published ones off the outbox; how many were.
        The take-off also puts the event in the log (event_log.py), in the same conditional
        update: only the first take-off of an event finds it in the outbox, so the log has each
        published event once, and never one that was not published."""
        published = self._publisher.publish(events)
        for event in published:
            logged = take_off(event, self._fx.clock(), log_days=self._log_days)
            self._conditional(
                lambda event=event, logged=logged: self._clients.dynamodb.update_item(
                    TableName=self._table,
                    Key=event.key,
                    UpdateExpression=(
                        f"SET {', '.join(logged.sets)} REMOVE {OUTBOX}, pending_shard, pending_since"
                    ),
                    ConditionExpression=f"{OUTBOX} = :event",
                    ExpressionAttributeValues={":event": {"S": event.text()}, **logged.values},
                )
            )
        return len(published)

    def complete_pending(self, key: Key) -> bool:
        """The sweeper's part, for a record item older than the grace period: its change, if the
        changed item still names it, is completed; then the record item, whose work is done (or
        whose change never happened: its request died between its two writes), is removed. True
        if a change was completed here. (An item that holds a whole record, from before record
        items, is completed and cleared.)"""
        item = self._item(key)
        if item is None:
            return False
        if "record" not in item:
            return self._settled_legacy(key, item)
        record = ChangeRecord.of(str(item["record"]["S"]))
        changed_key = {"pk": item["changes_pk"], "sk": item["changes_sk"]}
        removal: dict[str, Any] = {
            "TableName": self._table,
            "Key": key,
            "ConditionExpression": "#record = :record",
            "ExpressionAttributeNames": {"#record": "record"},
            "ExpressionAttributeValues": {":record": {"S": record.text()}},
        }
        completed = False
        for _ in range(2):
            changed = self._item(changed_key) or {}
            if changed.get(LIMIT_CHANGE, {}).get("S") == record.name:
                if not self._history.exists(record):
                    self.complete(record)
                    completed = True
                self._conditional(lambda: self._clients.dynamodb.delete_item(**removal))
                return completed
            # Never made, as far as this read goes: removed only while the changed item still
            # does not name it, so a write that lands between the read and the removal (its
            # record's check passed) is completed here instead (review 44)
            if self._transact_conditional(
                [{"Delete": removal}, _not_named_check(self._table, changed_key, record)]
            ):
                return completed
        return completed

    def complete_named(self, item: dict[str, Any]) -> None:
        """Complete the change the item names, if any and not in history yet (before the item is
        deleted: the sweeper completes a change only while an item names it)."""
        if LIMIT_CHANGE in item:
            self._settled({"pk": item["pk"], "sk": item["sk"]})

    # ---- plumbing -----------------------------------------------------------------------------------
    def _settled(self, key: Key) -> tuple[dict[str, Any] | None, str | None]:
        """The item and the change it names, once that change is in history (completed here
        if it is not): the next change of the item is conditional on its naming that one."""
        item = self._item(key)
        named = (item or {}).get(LIMIT_CHANGE, {}).get("S")
        if item is None or named is None:
            return item, None
        if named.startswith("{"):  # before record items: the record itself, completed and cleared
            self._settled_legacy(key, item)
            return self._settled(key)
        if self._history.exists_at(history_pk_of(key), named):
            return item, named
        stored = self._item(record_key(named.rpartition("#")[2]))
        if stored is not None:
            self.complete(ChangeRecord.of(str(stored["record"]["S"])))
        # (no record: it is removed only once its change is in history, so that history has
        # expired, HistoryRetentionDays: completed long ago. This refused every later change of
        # the item, and DELETE /orgs, for good: review of the day's changes)
        return item, named

    def _settled_legacy(self, key: Key, item: dict[str, Any]) -> bool:
        """An item naming a change by its whole record (before record items)."""
        named = item.get(LIMIT_CHANGE, {}).get("S")
        if not named or not named.startswith("{"):
            return False
        self.complete(ChangeRecord.of(named))
        self._conditional(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=f"REMOVE {LIMIT_CHANGE}, pending_shard, pending_since",
                ConditionExpression=f"{LIMIT_CHANGE} = :change",
                ExpressionAttributeValues={":change": {"S": named}},
            )
        )
        return True

    def _item(self, key: Key) -> dict[str, Any] | None:
        found = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return None if found is None else dict(found)

    def _new_change(self) -> str:
        """The id of one request's change: kept through its retries."""
        return self._fx.new_id()[:16]

    def _after(self, change_id: str, named: str | None) -> tuple[str, str]:
        """The change as this attempt makes it: its time now, and after the change the item
        names, which it will follow. An attempt is made only once the one before is known not to
        have applied, so its place in history is where it applies: after every change it follows,
        whatever the clocks (a request's start time put a retry behind a change made before it:
        review of the organization's governance)."""
        now = self._fx.clock()
        if named is not None and not named.startswith("{"):
            now = max(now, epoch_of(named.rpartition("#")[0]) + 0.001)
        return change_id, iso_utc(now)

    @staticmethod
    def _record(
        change: tuple[str, str],
        what: What,
        old: Any,
        new: Any,
        *,
        force: bool,
        by: str,
        account_id: str | None = None,
        kind: str | None = None,
        plan_id: str | None = None,
        org_id: str | None = None,
    ) -> ChangeRecord:
        change_id, at = change
        return ChangeRecord(
            org_id=org_id,
            change_id=change_id,
            at=at,
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
        return "version = :v", {":v": {"N": str(version)}}

    def _put(
        self, item: dict[str, Any], condition: str, values: dict[str, Any] | None, *, also: list[Check]
    ) -> bool:
        args: dict[str, Any] = {"TableName": self._table, "Item": item, "ConditionExpression": condition}
        if values:
            args["ExpressionAttributeValues"] = values
        if also:
            return self._transact_conditional([{"Put": args}, *also])
        return self._conditional(lambda: self._clients.dynamodb.put_item(**args))

    def _update(
        self,
        key: Key,
        update: str,
        condition: str,
        values: dict[str, Any],
        checks: list[Check] | None = None,
        *,
        also: list[Check],
    ) -> bool:
        write: dict[str, Any] = {
            "TableName": self._table,
            "Key": key,
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        return self._written(write, [*also, *(checks or [])])

    def _written(self, write: dict[str, Any], checks: list[Check]) -> bool:
        """One conditional UpdateItem; with conditions on other items, a transaction of them all."""
        if checks:
            return self._transact_conditional([{"Update": write}, *checks])
        return self._conditional(lambda: self._clients.dynamodb.update_item(**write))

    def _transact_conditional(self, actions: list[dict[str, Any]]) -> bool:
        """A change's write with a condition on another item: True if it applied, False if a
        condition refused it (aws.transact_conditionally: retried on conflicts with creates and
        the stream path, which write the same counter items)."""
        return transact_conditionally(self._clients.dynamodb, actions, self._retry) is None

    def _conditional(self, call: Any) -> bool:
        """True if the conditional write applied, False if its condition refused it."""
        try:
            retry_conflicts(call, self._retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        return True


def _fits(
    plan: Plan, counters: dict[str, CounterState], *, used: Mapping[str, int] | None = None
) -> list[str]:
    """LimitBelowUsage where a kind used, without an override, would be over the plan's limit;
    else the kinds whose override the move relies on (used over the plan's limit): the move is
    written only while they still have one. ``used``: a kind's use where its state's is not it
    (a split organization's kind)."""
    use = {
        kind: state.used if used is None else used.get(kind, state.used) for kind, state in counters.items()
    }
    below = [
        (kind, plan.limit_for(kind), use[kind])
        for kind, state in sorted(counters.items())
        if state.limit is None and plan.limit_for(kind) < use[kind]
    ]
    if below:
        raise LimitBelowUsage(below)
    return [kind for kind in sorted(counters) if plan.limit_for(kind) < use[kind]]


def _use_within(limit: int, names: dict[str, str], values: dict[str, Any]) -> str:
    """The condition that a counter item's use (both counters) is within ``limit``: a change's
    LimitBelowUsage judged in its own write, so nothing is admitted between the two."""
    names.update({"#be": BEST_EFFORT, "#ev": EVENTUAL})
    values[":room"] = {"N": str(limit)}
    return "(attribute_not_exists(#be) OR #be <= :room) AND (attribute_not_exists(#ev) OR #ev <= :room)"


def _holder_check(table: str, key: Key, plan_id: str | None, *, exists: bool) -> Check:
    """The condition on the item that holds an owner's plan (an account's profile, an
    organization's item): on that plan still (``plan_id``), there and not being deleted
    (``exists``: an organization)."""
    conditions = ["attribute_exists(pk)", "attribute_not_exists(deleting)"] if exists else []
    check: dict[str, Any] = {"TableName": table, "Key": key}
    if plan_id is not None:
        check["ExpressionAttributeValues"] = {":plan": {"S": plan_id}}
        same = "plan_id = :plan"
        conditions.append(f"(attribute_not_exists(plan_id) OR {same})" if plan_id == DEFAULT_PLAN else same)
    check["ConditionExpression"] = " AND ".join(conditions)
    return {"ConditionCheck": check}


def _plan_check(table: str, plan_id: str, plan: Plan | None) -> Check:
    """The condition that a plan still has the limits a change was judged by (review 49): its
    version as read (put_plan bumps it with every change of its limits, from 1); no item while
    there was none (the built-in default, never written); no version while there was none (an
    item written before versions, read as version 0)."""
    check: dict[str, Any] = {"TableName": table, "Key": plan_key(plan_id)}
    if plan is None or not plan.stored:
        check["ConditionExpression"] = "attribute_not_exists(pk)"
    elif plan.version == 0:
        check["ConditionExpression"] = "attribute_not_exists(version)"
    else:
        check["ConditionExpression"] = "version = :v"
        check["ExpressionAttributeValues"] = {":v": {"N": str(plan.version)}}
    return {"ConditionCheck": check}


def _not_named_check(table: str, key: Key, record: ChangeRecord) -> Check:
    """The condition that an item does not name a change (complete_pending)."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key,
            "ConditionExpression": "attribute_not_exists(#change) OR #change <> :name",
            "ExpressionAttributeNames": {"#change": LIMIT_CHANGE},
            "ExpressionAttributeValues": {":name": {"S": record.name}},
        }
    }


def _record_check(table: str, record: ChangeRecord) -> Check:
    """The condition that a change's record item is still there (changes.py _made)."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": record_key(record.change_id),
            "ConditionExpression": "attribute_exists(pk)",
        }
    }


def _override_check(table: str, key: Key) -> Check:
    """The condition that a counter item still has its override."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key,
            "ConditionExpression": "attribute_exists(#limit)",
            "ExpressionAttributeNames": {"#limit": LIMIT},
        }
    }


def _still_named(named: str | None, values: dict[str, Any], attribute: str = "#change") -> str:
    """The condition that the changed item still names the change it named when read (the one
    completed before this change: no other change came between)."""
    if named is None:
        return f"attribute_not_exists({attribute})"
    values[":named"] = {"S": named}
    return f"{attribute} = :named"


def history_pk_of(key: Key) -> str:
    """Where the changes of this item are recorded (records.py)."""
    pk, sk = key["pk"]["S"], key["sk"]["S"]
    if pk == PLANS_PK:
        return f"{HISTORY_PREFIX}PLAN#{sk}"
    if pk.startswith(ORG_PREFIX):
        return f"{HISTORY_PREFIX}ORG#{parse_org_pk(pk)}"
    return f"{HISTORY_PREFIX}ACCOUNT#{parse_account_pk(pk)}"
