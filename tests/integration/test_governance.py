"""Limits people can govern (issue 19): safe changes, a history of every change, and exactly one
event per threshold crossing, against DynamoDB Local and moto's EventBridge (a real bus, a rule,
an SQS queue the events arrive in: no stub of EventBridge).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import LimitBelowUsage
from hybrid_counter.governance.thresholds import Thresholds, ThresholdWatcher
from hybrid_counter.keys import counter_key
from hybrid_counter.resources import ResourceService
from localrun.stack.aws_clients import client
from tests.explorer.scheduler import Race
from tests.faults import injected

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
        race.until(first, "UpdateItem")  # the change, with its record
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
        race.until(first, "UpdateItem")
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
    item = gov_clients.dynamodb.get_item(TableName=gov_settings.table_name, Key=counter_key(account))["Item"]
    assert "limit_change" not in item
    assert "pending_shard" not in item


def test_a_refused_change_leaves_no_history(gov, account):
    for n in range(3):
        gov.create(account, f"r{n}", {})
    with pytest.raises(LimitBelowUsage):
        gov.set_limit(account, 1, by="ops")
    assert gov.account_history(account).items == []


def test_a_lost_response_of_the_history_write_records_it_once(gov, account, gov_clients):
    with injected(gov_clients.dynamodb, "PutItem", when="after"):
        gov.set_limit(account, 4, by="ops")
    assert len(gov.account_history(account).items) == 1


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
