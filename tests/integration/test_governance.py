"""Limits people can govern (issue 19): safe changes, a history of every change, and exactly one
event per threshold crossing, against DynamoDB Local and moto's EventBridge (a real bus, a rule,
an SQS queue the events arrive in: no stub of EventBridge).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from benchmarks.capacity import item_size
from hybrid_counter.aws import Clients
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import LimitBelowUsage
from hybrid_counter.governance.thresholds import Thresholds, ThresholdWatcher
from hybrid_counter.keys import account_pk, counter_key, org_pk, plan_key, profile_key
from hybrid_counter.resources import ResourceService
from localrun.stack.aws_clients import client
from tests.explorer.scheduler import Race
from tests.faults import ProcessDied, injected

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bus(stack) -> dict[str, Any]:
    """A bus on moto with a rule sending everything from hybrid-counter to a queue."""
    events, sqs = client("events", stack.sqs_url), client("sqs", stack.sqs_url)
    name = f"quota-events-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=name)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="to-queue", EventBusName=name, EventPattern=json.dumps({"source": ["hybrid-counter"]})
    )
    events.put_targets(Rule="to-queue", EventBusName=name, Targets=[{"Id": "queue", "Arn": queue_arn}])
    return {"name": name, "queue_url": queue_url, "events": events, "sqs": sqs}


@pytest.fixture
def gov_clients(clients, stack) -> Clients:
    return replace(clients, events=client("events", stack.sqs_url))


@pytest.fixture
def gov_settings(settings, bus):
    return replace(
        settings, event_bus_name=bus["name"], usage_thresholds=(80, 100), threshold_hysteresis_percent=5
    )


@pytest.fixture
def gov(gov_settings, gov_clients) -> ResourceService:
    return ResourceService(gov_settings, gov_clients)


@pytest.fixture
def watcher(gov, gov_settings, gov_clients) -> ThresholdWatcher:
    return watcher_of(gov, gov_settings, gov_clients)


def watcher_of(service: ResourceService, settings, clients) -> ThresholdWatcher:
    return ThresholdWatcher(
        settings.table_name,
        Thresholds(settings.usage_thresholds, settings.threshold_hysteresis_percent),
        limits=service.limits,
        changes=service.changes,
        clients=clients,
        obs=service._obs,
        enabled=True,
        sleep=lambda _: None,
    )


def drain_events(bus: dict[str, Any], account: str, wait: float = 0.5) -> list[dict[str, Any]]:
    """Every event of the account that reached the queue (consumed)."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        got = bus["sqs"].receive_message(QueueUrl=bus["queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=0)
        for message in got.get("Messages", []):
            body = json.loads(message["Body"])
            bus["sqs"].delete_message(QueueUrl=bus["queue_url"], ReceiptHandle=message["ReceiptHandle"])
            if body["detail"].get("account_id") == account:
                found.append(body)
        if not got.get("Messages"):
            time.sleep(0.05)
    return found


def crossings(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(Reached|Cleared, threshold) of each distinct crossing (deduped on event_id, as consumers do)."""
    seen: dict[str, tuple[str, int]] = {}
    for event in events:
        detail = event["detail"]
        if event["detail-type"].startswith("Quota Threshold"):
            seen[detail["event_id"]] = (event["detail-type"].rsplit(" ", 1)[1], detail["threshold"])
    return [seen[key] for key in sorted(seen, key=lambda k: int(k.split("/")[2]))]


def pump(stream, counter, watcher, account: str, *, times: int = 1) -> list[dict[str, Any]]:
    records = stream.records_for(account)
    for _ in range(times):
        assert process_stream_batch(records, counter, watcher).failed_sequence_numbers == []
    return records


# ---- 1. safe limit changes ----------------------------------------------------------------------


def test_lowering_a_limit_below_use_is_refused_unless_forced_and_the_history_says_who(gov, account, bus):
    # Given limit 10 (an override) and 8 resources
    gov.set_limit(account, 10, by="ops-alice")
    for n in range(8):
        gov.create(account, f"r{n}", {})
    # When an operator lowers it to 5 without force
    with pytest.raises(LimitBelowUsage) as refused:
        gov.set_limit(account, 5, by="ops-bob")
    # Then it is refused naming the limit and the use, and nothing changed
    assert refused.value.below == [("resources", 5, 8)]
    assert gov.usage(account).limit == 10
    assert [r["new"] for r in gov.account_history(account).items] == [10]
    # When forced, it applies, and the history shows who, when, 10 -> 5, forced, newest first
    gov.set_limit(account, 5, force=True, by="ops-bob")
    assert gov.usage(account).limit == 5
    latest, first = gov.account_history(account).items
    assert (latest["by"], latest["old"], latest["new"], latest["force"]) == ("ops-bob", 10, 5, True)
    assert (first["by"], first["old"], first["new"], first["force"]) == ("ops-alice", None, 10, False)
    assert latest["at"] >= first["at"]
    # And lowering removed nothing: creates are refused until deletes bring it under
    assert gov.usage(account).used == 8
    events = [e for e in drain_events(bus, account) if e["detail-type"] == "Quota Limit Changed"]
    assert sorted(e["detail"]["new"] for e in events) == [5, 10]


def test_no_create_slips_between_the_safety_check_and_the_limit_change(gov, account, clients):
    # Given limit 10 and 5 resources, and an operator lowering it to 5 whose check has just read
    gov.set_limit(account, 10, by="ops")
    for n in range(5):
        gov.create(account, f"r{n}", {})
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        lower = race.start("lower to 5", lambda: gov.set_limit(account, 5, by="ops"))
        race.until(lower, "GetItem", count=1)
        # When a create is admitted before the change is written
        race.run("create", lambda: gov.create(account, "late", {}))
        race.finish(lower)
    # Then the change is refused (the check is in the write's condition), never applied below use
    assert isinstance(lower.error, LimitBelowUsage)
    assert gov.usage(account).limit == 10


def test_moving_an_account_to_a_plan_below_its_use_names_the_kinds_unless_forced(gov, account):
    gov.put_plan("tiny", {"resources": 2, "seats": 0}, by="ops")
    for n in range(3):
        gov.create(account, f"r{n}", {})
    with pytest.raises(LimitBelowUsage) as refused:
        gov.assign_plan(account, "tiny", by="ops")
    assert refused.value.below == [("resources", 2, 3)]
    assert gov.usage(account).plan_id == "default"
    gov.assign_plan(account, "tiny", force=True, by="ops")
    assert gov.usage(account).plan_id == "tiny"
    (move,) = gov.account_history(account).items
    assert (move["what"], move["old"], move["new"], move["force"]) == (
        "account_plan",
        "default",
        "tiny",
        True,
    )


def test_a_plans_change_is_recorded_in_the_plans_history(gov):
    plan = f"plan-{uuid.uuid4().hex[:6]}"
    gov.put_plan(plan, {"projects": 3}, by="ops")
    gov.put_plan(plan, {"projects": 10, "seats": 5}, by="ops")
    items = gov.plan_history(plan).items
    assert [(i["old"], i["new"]) for i in items] == [
        ({"projects": 3}, {"projects": 10, "seats": 5}),
        (None, {"projects": 3}),
    ]


# ---- 2. a change is never without its history, nor history without its change ---------------------


def test_a_change_whose_process_died_before_its_history_is_recorded_by_the_next_change(gov, account, clients):
    # Given a change that wrote itself (with its record) and died before writing its history
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first = race.start("set 7", lambda: gov.set_limit(account, 7, by="ops-dead"))
        race.until(first, "TransactWriteItems")  # the change, with the check of its record
        race.step(first, fault="crash")
    assert gov.usage(account).limit == 7
    assert gov.account_history(account).items == []
    # When the next change of the same item comes, it records the earlier one first
    gov.set_limit(account, 9, by="ops")
    # Then both are in history, once each, in order
    assert [(r["by"], r["new"]) for r in gov.account_history(account).items] == [("ops", 9), ("ops-dead", 7)]


def test_the_sweeper_records_a_change_its_process_left_unrecorded(
    gov, gov_settings, gov_clients, account, counter
):
    with Race(gov_clients.dynamodb, gov_clients.dynamodb_single_attempt) as race:
        first = race.start("set 7", lambda: gov.set_limit(account, 7, by="ops-dead"))
        race.until(first, "TransactWriteItems")
        race.step(first, fault="crash")
    later = time.time() + gov_settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        gov_settings.table_name,
        counter,
        gov_settings.pending_grace_seconds,
        gov_clients,
        clock=lambda: later,
        changes=gov.changes,
    )
    assert sweeper.sweep().changes_recorded >= 1
    assert [(r["by"], r["new"]) for r in gov.account_history(account).items] == [("ops-dead", 7)]
    # and the change's record item, its work done, is gone (the counter item names the change,
    # which is in history, until the next change: nothing else waits on it)
    item = gov_clients.dynamodb.get_item(TableName=gov_settings.table_name, Key=counter_key(account))["Item"]
    assert "pending_shard" not in item
    assert record_items(gov_settings, gov_clients, account, "none") == []


def test_a_refused_change_leaves_no_history(gov, account):
    for n in range(3):
        gov.create(account, f"r{n}", {})
    with pytest.raises(LimitBelowUsage):
        gov.set_limit(account, 1, by="ops")
    assert gov.account_history(account).items == []


def test_a_lost_response_of_the_history_write_records_it_once(gov, account, gov_clients, bus):
    with injected(gov_clients.dynamodb, "PutItem", when="after", where=writes_history):
        gov.set_limit(account, 4, by="ops")
    assert len(gov.account_history(account).items) == 1
    # and its event was still published at once, from the history item's outbox
    assert len(limit_events(drain_events(bus, account))) == 1


# ---- one change, one record, one event id, whatever is lost (issue 23, items 6 to 9) ---------------

# An IAM caller's identity, as API Gateway gives it: a role session's ARN (long names).
CALLER = (
    "arn:aws:sts::123456789012:assumed-role/"
    + "hybrid-counter-operators-"
    + "r" * 39
    + "/operator-session-"
    + "s" * 46
)


def limit_events(events: list[dict[str, Any]], by: str | None = None) -> set[str]:
    """The distinct event ids of the Quota Limit Changed events (consumers dedupe on event_id),
    of the changes ``by`` made if given."""
    return {
        e["detail"]["event_id"]
        for e in events
        if e["detail-type"] == "Quota Limit Changed" and by in (None, e["detail"].get("by"))
    }


def plan_events(bus: dict[str, Any], plan_id: str) -> set[str]:
    found = set()
    for _ in range(10):
        got = bus["sqs"].receive_message(QueueUrl=bus["queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=0)
        for message in got.get("Messages", []):
            body = json.loads(message["Body"])
            bus["sqs"].delete_message(QueueUrl=bus["queue_url"], ReceiptHandle=message["ReceiptHandle"])
            detail = body["detail"]
            if body["detail-type"] == "Quota Limit Changed" and (detail.get("plan_id"), detail.get("by")) == (
                plan_id,
                CALLER,
            ):
                found.add(body["detail"]["event_id"])
        if not got.get("Messages"):
            time.sleep(0.05)
    return found


@dataclass(frozen=True)
class Change:
    """One kind of limit change: how to make it, which request is the change's own write (by
    what it writes, whatever else the implementation writes around it), and where it is recorded."""

    make: Callable[[ResourceService, str, str], Any]
    write: Callable[[str, str], tuple[str, Callable[[dict[str, Any]], bool]]]  # (account, plan)
    history: Callable[[ResourceService, str, str], list[dict[str, Any]]]
    events: Callable[[dict[str, Any], str, str], set[str]]


def _on_plan(gov: ResourceService, account: str, plan: str) -> None:
    gov.put_plan(plan, {"seats": 10}, by="setup")
    gov.put_plan(f"{plan}-b", {"seats": 12}, by="setup")
    gov.assign_plan(account, plan, force=True, by="setup")


def writes_key(key: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """The UpdateItem or PutItem of this item, or a transaction that writes it (a change is
    written in a transaction with a check of its record item: changes.py _made)."""

    def written(body: dict[str, Any]) -> bool:
        return (body.get("Key") or {k: body.get("Item", {}).get(k) for k in ("pk", "sk")}) == key

    return lambda body: (
        written(body)
        or any(
            written(action[verb])
            for action in body.get("TransactItems", [])
            for verb in ("Update", "Put")
            if verb in action
        )
    )


def writes_history(body: dict[str, Any]) -> bool:
    return str(body.get("Item", {}).get("pk", {}).get("S", "")).startswith("HISTORY#")


CHANGES = {
    "override": Change(
        lambda gov, account, plan: gov.set_limit(account, 7, kind="seats", by=CALLER),
        lambda account, plan: ("TransactWriteItems", writes_key(counter_key(account, kind="seats"))),
        lambda gov, account, plan: [r for r in gov.account_history(account).items if r["by"] == CALLER],
        lambda bus, account, plan: limit_events(drain_events(bus, account), CALLER),
    ),
    "plan_limits": Change(
        lambda gov, account, plan: gov.put_plan(plan, {"seats": 7}, by=CALLER),
        lambda account, plan: ("TransactWriteItems", writes_key(plan_key(plan))),
        lambda gov, account, plan: [r for r in gov.plan_history(plan).items if r["by"] == CALLER],
        lambda bus, account, plan: plan_events(bus, plan),
    ),
    "account_plan": Change(
        lambda gov, account, plan: gov.assign_plan(account, f"{plan}-b", by=CALLER),
        lambda account, plan: ("TransactWriteItems", writes_key(profile_key(account))),
        lambda gov, account, plan: [r for r in gov.account_history(account).items if r["by"] == CALLER],
        lambda bus, account, plan: limit_events(drain_events(bus, account), CALLER),
    ),
}


@pytest.fixture
def plan() -> str:
    return f"p-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_change_whose_response_is_lost_is_one_change_with_one_record_and_one_event_id(
    gov, gov_clients, account, plan, bus, change
):
    # Given an account on a plan
    _on_plan(gov, account, plan)
    drain_events(bus, account, wait=0.2)
    plan_events(bus, plan)
    # When the change's write applies and its response is lost (botocore resends it, and the
    # resend is refused by the change's own condition)
    operation, where = change.write(account, plan)
    with injected(gov_clients.dynamodb, operation, when="after", where=where) as fault:
        change.make(gov, account, plan)
    assert fault.fired == 1
    # Then it is one change: one history entry, one event id
    assert len(change.history(gov, account, plan)) == 1
    assert len(change.events(bus, account, plan)) == 1


def test_a_change_whose_response_is_lost_while_another_change_follows_is_not_made_again(
    gov, gov_clients, account
):
    # Given an override change whose write applies and whose response is lost
    gov.set_limit(account, 5, kind="seats", by="setup")
    with Race(gov_clients.dynamodb, gov_clients.dynamodb_single_attempt) as race:
        first = race.start("set 7", lambda: gov.set_limit(account, 7, kind="seats", by="first"))
        race.until(first, "PutItem")  # its record item
        assert race.next_call(first) == "TransactWriteItems"
        race.step(first, fault="lost")  # the change applies; botocore will resend it
        # When another change of the same override is made before the first hears back
        race.run("set 9", lambda: gov.set_limit(account, 9, kind="seats", by="second"))
        race.finish(first)
    assert first.error is None
    # Then the first is one change (7), the second follows it (9), and nothing undid the second
    assert gov.usage(account).kinds["seats"].limit == 9
    changes = [(r["by"], r["old"], r["new"]) for r in gov.account_history(account).items]
    assert changes == [("second", 7, 9), ("first", 5, 7), ("setup", None, 5)]


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_change_retried_by_its_caller_is_recorded_once(gov, account, plan, bus, change):
    _on_plan(gov, account, plan)
    drain_events(bus, account, wait=0.2)
    plan_events(bus, plan)
    # When the caller sends the same change twice (its first answer was lost on the way back)
    change.make(gov, account, plan)
    change.make(gov, account, plan)
    # Then the second changed nothing and recorded nothing
    (entry,) = change.history(gov, account, plan)
    assert entry["old"] != entry["new"]
    assert len(change.events(bus, account, plan)) == 1


@pytest.mark.parametrize("finisher", ["retry", "next change", "sweeper"])
@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_change_whose_process_died_before_its_completion_is_recorded_once(
    gov, gov_settings, gov_clients, account, plan, bus, counter, change, finisher
):
    _on_plan(gov, account, plan)
    drain_events(bus, account, wait=0.2)
    plan_events(bus, plan)
    # Given a change that was made and whose process died as it wrote its history
    with (
        injected(gov_clients.dynamodb, "PutItem", when="crash", where=writes_history),
        pytest.raises(ProcessDied),
    ):
        change.make(gov, account, plan)
    assert change.history(gov, account, plan) == []
    # When the caller retries it, or another change of the same item comes, or the sweeper runs
    if finisher == "retry":
        change.make(gov, account, plan)
    elif finisher == "next change":
        gov.set_limit(account, 8, kind="seats", by="next")
        gov.put_plan(plan, {"seats": 8}, by="next")
        gov.assign_plan(account, plan, force=True, by="next")
    else:
        later = time.time() + gov_settings.pending_grace_seconds + 1
        Sweeper(
            gov_settings.table_name,
            counter,
            gov_settings.pending_grace_seconds,
            gov_clients,
            clock=lambda: later,
            changes=gov.changes,
        ).sweep()
    # Then it is in history once, with one event id; every change named on an item is in
    # history; the sweeper has removed the record items whose work is done
    assert len(change.history(gov, account, plan)) == 1
    assert len(change.events(bus, account, plan)) == 1
    assert unrecorded_changes(gov, gov_settings, gov_clients, account, plan) == []
    if finisher == "sweeper":
        assert record_items(gov_settings, gov_clients, account, plan) == []


def unrecorded_changes(gov, settings, clients, account: str, plan: str) -> list[str]:
    """The changes items of this account and plan name that are not in history."""
    recorded = {
        f"{r['at']}#{r['change_id']}"
        for r in [
            *gov.account_history(account).items,
            *gov.plan_history(plan).items,
            *gov.plan_history(f"{plan}-b").items,
        ]
    }
    named = []
    for key in (
        counter_key(account, kind="seats"),
        profile_key(account),
        plan_key(plan),
        plan_key(f"{plan}-b"),
    ):
        item = clients.dynamodb.get_item(TableName=settings.table_name, Key=key, ConsistentRead=True).get(
            "Item"
        )
        if item and "limit_change" in item:
            named.append(str(item["limit_change"]["S"]))
    return [name for name in named if name not in recorded]


def record_items(settings, clients, account: str, plan: str) -> list[str]:
    """Record items of this account's or plan's changes still in the table."""
    pages = clients.dynamodb.get_paginator("scan").paginate(
        TableName=settings.table_name,
        FilterExpression="begins_with(pk, :change) AND (contains(#record, :account) OR contains(#record, :plan))",
        ExpressionAttributeNames={"#record": "record"},
        ExpressionAttributeValues={
            ":change": {"S": "CHANGE#"},
            ":account": {"S": account},
            ":plan": {"S": f'"{plan}"'},
        },
    )
    return [str(r["pk"]["S"]) for page in pages for r in page["Items"]]


def test_removing_an_override_that_is_not_there_records_and_publishes_nothing(gov, account, bus):
    # When an override that does not exist is removed (a DELETE repeated, or never set)
    gov.remove_limit(account, kind="seats", by=CALLER)
    gov.remove_limit(account, kind="seats", by=CALLER)
    # Then nothing was recorded or published (the API still answers 204: it is idempotent)
    assert gov.account_history(account).items == []
    assert limit_events(drain_events(bus, account)) == set()


def test_removing_an_override_is_judged_by_the_plan_as_stored_not_as_cached(
    gov_settings, gov_clients, account, plan
):
    # Given two API processes, an account on a plan of 10 seats with an override of 6, 5 used
    first = ResourceService(gov_settings, gov_clients)
    second = ResourceService(gov_settings, gov_clients)
    first.put_plan(plan, {"seats": 10})
    first.assign_plan(account, plan, force=True)
    first.set_limit(account, 6, kind="seats")
    first.create(account, "team", {}, kind="seats", units=5)
    assert first.usage(account).kinds["seats"].limit == 6  # the first process caches the plan
    # When the second lowers the plan to 3, and the first removes the override, unforced
    second.put_plan(plan, {"seats": 3})
    # Then the removal is refused: under the plan as it is now, 5 used is over 3
    with pytest.raises(LimitBelowUsage) as refused:
        first.remove_limit(account, kind="seats")
    assert refused.value.below == [("seats", 3, 5)]
    assert first.usage(account).kinds["seats"].limit_source == "override"


def test_the_counter_item_stays_under_1_kb_in_every_state_at_the_longest_ids(
    gov_settings, gov_clients, stream, counter
):
    # Given the longest ids (64 characters) and an IAM role session as the caller
    account, kind, rid = "a" * 63 + "1", "k" * 64, "r" * 64
    service = ResourceService(gov_settings, gov_clients)
    service.set_limit(account, 10, kind=kind, by=CALLER)
    # And every token the item keeps at its longest: an admission, a resize, a release; the
    # stream path's counts and the threshold state it keeps (80 and 100 % reached)
    service.create(account, "x", {}, rid, kind=kind, units=2)
    service.resize(account, rid, 3, kind=kind)
    service.create(account, "y", {}, "s" * 64, kind=kind, units=7)
    service.delete(account, rid, kind=kind)
    service.create(account, "z", {}, "t" * 64, kind=kind, units=3)
    watcher = watcher_of(service, gov_settings, gov_clients)
    assert process_stream_batch(stream.records_for(account), counter, watcher).failed_sequence_numbers == []
    # And a change's record waiting on it (its process died before completing it)
    with (
        injected(gov_clients.dynamodb, "PutItem", when="crash", where=writes_history),
        pytest.raises(ProcessDied),
    ):
        service.set_limit(account, 12, kind=kind, by=CALLER)
    key = counter_key(account, kind=kind)
    item = gov_clients.dynamodb.get_item(TableName=gov_settings.table_name, Key=key, ConsistentRead=True)[
        "Item"
    ]
    assert "limit_change" in item
    assert "alert_seq" in item
    # And, for a long-lived item, each range's counters and version grown large
    big = {f"v{r:x}": 10**12 for r in range(16)} | {f"b{r:x}": 10**9 for r in range(16)}
    big |= {f"e{r:x}": 10**9 for r in range(16)}
    gov_clients.dynamodb.update_item(
        TableName=gov_settings.table_name,
        Key=key,
        UpdateExpression="SET " + ", ".join(f"#{n} = :{n}" for n in big),
        ExpressionAttributeNames={f"#{n}": n for n in big},
        ExpressionAttributeValues={f":{n}": {"N": str(v)} for n, v in big.items()},
    )
    item = gov_clients.dynamodb.get_item(TableName=gov_settings.table_name, Key=key, ConsistentRead=True)[
        "Item"
    ]
    # Then it is under 1 KB, and a write of it costs one write unit
    assert item_size(item) < 1024, item_size(item)
    consumed = gov_clients.dynamodb.update_item(
        TableName=gov_settings.table_name,
        Key=key,
        UpdateExpression="ADD probe :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
        ReturnConsumedCapacity="TOTAL",
    )["ConsumedCapacity"]["CapacityUnits"]
    assert consumed == 1.0


# ---- 3. exactly one event per crossing --------------------------------------------------------------


def test_the_done_means_sequence_gives_exactly_its_events(gov, account, stream, counter, watcher, bus):
    # Given limit 10
    gov.set_limit(account, 10, by="ops")
    pump(stream, counter, watcher, account)
    drain_events(bus, account)
    # When 8 are created: one Reached at 80
    ids = [gov.create(account, "r", {})[0].resource_id for _ in range(8)]
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == [("Reached", 80)]
    # 2 more: one Reached at 100
    ids += [gov.create(account, "r", {})[0].resource_id for _ in range(2)]
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == [("Reached", 100)]
    # Deletes down to 9 (90 %, below 95): Cleared 100; down to 7 (70 %, below 75): Cleared 80
    gov.delete(account, ids.pop())
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == [("Cleared", 100)]
    for _ in range(2):
        gov.delete(account, ids.pop())
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == [("Cleared", 80)]
    # Back to 8: Reached 80 once; then oscillating between 8 and 9 (inside the hysteresis): none
    ids.append(gov.create(account, "r", {})[0].resource_id)
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == [("Reached", 80)]
    for _ in range(3):
        extra = gov.create(account, "r", {})[0].resource_id
        pump(stream, counter, watcher, account)
        gov.delete(account, extra)
        pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == []


def test_a_crossing_is_recorded_once_however_its_records_are_delivered(
    gov, account, stream, counter, watcher, bus, gov_settings, gov_clients
):
    # Given limit 5 and 4 creates (80 %), whose records are then delivered every way they can be
    gov.set_limit(account, 5, by="ops")
    for _ in range(4):
        gov.create(account, "r", {})
    records = stream.records_for(account)
    # twice in order, then bisected halves, then shuffled, then by two workers at once
    for _ in range(2):
        assert process_stream_batch(records, counter, watcher).failed_sequence_numbers == []
    half = len(records) // 2
    process_stream_batch(records[:half], counter, watcher)
    process_stream_batch(records[half:], counter, watcher)
    process_stream_batch(list(reversed(records)), counter, watcher)
    other = watcher_of(ResourceService(gov_settings, gov_clients), gov_settings, gov_clients)
    workers = [
        threading.Thread(target=process_stream_batch, args=(records, counter, w)) for w in (watcher, other)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    # Then one crossing, one event id (published once here: nothing failed)
    events = [e for e in drain_events(bus, account) if e["detail-type"].startswith("Quota Threshold")]
    assert crossings(events) == [("Reached", 80)]
    assert len(events) == 1


def test_a_failed_publish_blocks_no_counting_and_the_sweeper_publishes_it_later(
    gov, account, stream, counter, watcher, bus, gov_settings, gov_clients
):
    gov.set_limit(account, 5, by="ops")
    for _ in range(4):
        gov.create(account, "r", {})
    records = stream.records_for(account)
    # When EventBridge refuses every publish while the batch is counted
    with injected(gov_clients.events, "PutEvents", error="InternalException", times=100):
        outcome = process_stream_batch(records, counter, watcher)
    # Then counting went on (the batch succeeded) and the crossing waits in the outbox
    assert outcome.failed_sequence_numbers == []
    assert gov.usage(account).eventual == 4
    assert crossings(drain_events(bus, account)) == []
    # And the sweeper publishes it once EventBridge is back
    later = time.time() + gov_settings.pending_grace_seconds + 1
    sweep = Sweeper(
        gov_settings.table_name,
        counter,
        gov_settings.pending_grace_seconds,
        gov_clients,
        clock=lambda: later,
        changes=gov.changes,
    ).sweep()
    assert sweep.events_published >= 1
    assert crossings(drain_events(bus, account)) == [("Reached", 80)]


def test_an_override_that_moves_an_account_across_a_threshold_emits_the_crossing(
    gov, account, stream, counter, watcher, bus
):
    gov.set_limit(account, 10, by="ops")
    for _ in range(6):
        gov.create(account, "r", {})
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == []
    gov.set_limit(account, 7, by="ops")  # 6 of 7: 86 %
    pump(stream, counter, watcher, account)
    assert crossings(drain_events(bus, account)) == [("Reached", 80)]


def test_without_a_bus_nothing_is_kept_or_published(settings, clients, account, stream, counter):
    plain = ResourceService(settings, clients)
    plain.set_limit(account, 2, by="ops")
    plain.create(account, "r", {})
    plain.create(account, "s", {})
    silent = watcher_of(plain, settings, clients)
    silent._enabled = False
    assert process_stream_batch(stream.records_for(account), counter, silent).failed_sequence_numbers == []
    found = clients.dynamodb.query(
        TableName=settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
        ExpressionAttributeValues={":pk": {"S": f"ACCOUNT#{account}"}, ":e": {"S": "EVENT#"}},
    )
    assert found["Items"] == []


# ---- an organization's crossings: its counter item, or its shards summed -----------------------
@dataclass
class EventfulOrg:
    gov: ResourceService
    stream: Any
    counter: Any
    watcher: ThresholdWatcher
    bus: dict[str, Any]
    shards: int

    def __post_init__(self) -> None:
        self.org_id, plan = f"org-{uuid.uuid4().hex[:8]}", f"plan-{uuid.uuid4().hex[:8]}"
        self.members = [f"m{n}-{uuid.uuid4().hex[:8]}" for n in range(2)]
        self.gov.put_plan(plan, {"seats": 10})
        self.gov.put_org(self.org_id, plan, shards=self.shards)
        for member in self.members:
            self.gov.set_limit(member, 100, kind="seats")  # 10 seats of 100: no account crossing
            self.gov.add_member(self.org_id, member)
        self.ids: list[tuple[str, str]] = []

    def create(self, n: int) -> None:
        for _ in range(n):
            member = self.members[len(self.ids) % 2]
            self.ids.append((member, self.gov.create(member, "r", {}, kind="seats")[0].resource_id))

    def delete(self, n: int) -> None:
        for _ in range(n):
            member, rid = self.ids.pop()
            self.gov.delete(member, rid, kind="seats")

    def pump(self, *, times: int = 1) -> None:
        for pk in [account_pk(m) for m in self.members] + [org_pk(self.org_id)]:
            records = self.stream.records_of(pk)
            for _ in range(times):
                assert process_stream_batch(records, self.counter, self.watcher).failed_sequence_numbers == []

    def events(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            got = self.bus["sqs"].receive_message(QueueUrl=self.bus["queue_url"], MaxNumberOfMessages=10)
            for message in got.get("Messages", []):
                body = json.loads(message["Body"])
                self.bus["sqs"].delete_message(
                    QueueUrl=self.bus["queue_url"], ReceiptHandle=message["ReceiptHandle"]
                )
                if body["detail"].get("org_id") == self.org_id:
                    found.append(body)
            if not got.get("Messages"):
                time.sleep(0.05)
        return found


@pytest.mark.parametrize("shards", [1, 4])
def test_an_organizations_crossings_are_events_of_its_own_split_or_not(
    gov, stream, counter, watcher, bus, shards
):
    # Given an organization of 10 seats over `shards` counter items, two members of 100 each
    org = EventfulOrg(gov, stream, counter, watcher, bus, shards)
    # When its members create 8: one Reached at 80, of scope organization, naming it
    org.create(8)
    org.pump(times=2)  # every record delivered twice
    events = [e for e in org.events() if e["detail-type"].startswith("Quota Threshold")]
    assert crossings(events) == [("Reached", 80)]
    assert len(events) == 1
    detail = events[0]["detail"]
    assert (detail["scope"], detail["org_id"], detail["used"], detail["limit"]) == (
        "organization",
        org.org_id,
        8,
        10,
    )
    assert "account_id" not in detail
    # And the near-limit list names it (a split organization's row comes from its ALERT# item)
    rows = [
        r for r in gov.usage_over(threshold=80, kind="seats", page_size=100).rows if r.owner == org.org_id
    ]
    assert [(r.scope, r.kind, r.threshold, r.used, r.limit) for r in rows] == [
        ("organization", "seats", 80, 8, 10)
    ]
    # 2 more: one Reached at 100; then down to 7 (below 75 %): Cleared 100 and Cleared 80
    org.create(2)
    org.pump()
    assert crossings(org.events()) == [("Reached", 100)]
    org.delete(3)
    org.pump()
    assert sorted(crossings(org.events())) == [("Cleared", 80), ("Cleared", 100)]  # one transition
    assert not [
        r for r in gov.usage_over(threshold=80, kind="seats", page_size=100).rows if r.owner == org.org_id
    ]


def reached_80_then_split(gov, stream, counter, watcher, bus) -> EventfulOrg:
    """An organization of 10 seats on one counter item that reached 80 % (8 seats, its stream
    batch delivered once), then split over 4 items."""
    org = EventfulOrg(gov, stream, counter, watcher, bus, 1)
    org.create(8)
    org.pump()
    assert crossings(org.events()) == [("Reached", 80)]
    gov.set_org_shards(org.org_id, 4)
    return org


def test_an_organization_split_after_a_crossing_does_not_announce_it_again(
    gov, stream, counter, watcher, bus
):
    # Given an organization of 10 seats on one counter item that reached 80 % (8 seats)
    # When it is split over 4 items and its members create a ninth seat, then a tenth
    org = reached_80_then_split(gov, stream, counter, watcher, bus)
    org.create(1)
    org.pump()
    # Then 80 % is not reached again (the split state starts from the item's), and 100 % is once
    assert crossings(org.events()) == []

    def listed() -> list[tuple[int, int]]:
        rows = gov.usage_over(threshold=80, kind="seats", page_size=100).rows
        return [(r.threshold, r.used) for r in rows if r.owner == org.org_id]

    # And the near-limit list names it once (its ALERT# item took over shard 0's row)
    assert listed() == [(80, 9)]
    org.create(1)
    org.pump(times=2)
    assert crossings(org.events()) == [("Reached", 100)]
    assert listed() == [(100, 10)]
