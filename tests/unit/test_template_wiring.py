"""template.yaml wires the failure paths as the design needs (a typo here fails silently on AWS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybrid_counter.counting.replay import BatchInfo
from localrun.errors import TemplateError
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.template import (
    DEFAULT_TEMPLATE,
    DynamoDBStreamEvent,
    HttpApiEvent,
    SqsEvent,
    Template,
    load_template,
)

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template()


def stream_event(template: Template) -> DynamoDBStreamEvent:
    (event,) = template.functions["StreamCounterFunction"].events_of(DynamoDBStreamEvent)
    return event


def test_stream_mapping_reports_partial_failures_with_the_exact_enum_value(template):
    assert stream_event(template).function_response_types == ("ReportBatchItemFailures",)


def test_stream_mapping_retries_are_bounded_bisected_and_end_in_the_retry_queue(template):
    event = stream_event(template)
    assert 0 <= event.maximum_retry_attempts <= 10
    assert event.bisect_batch_on_function_error is True
    assert event.on_failure_queue == "RetryQueue"
    # Three records per create: a full batch fills one counting transaction (99 counts), no more.
    assert event.batch_size == 3 * 100
    assert template.tables[event.table].stream_view_type == "NEW_AND_OLD_IMAGES"


def test_retry_queue_redrives_to_the_operator_queue_and_outlasts_its_consumer(template):
    retry = template.queues["RetryQueue"]
    assert retry.dead_letter_queue == "OperatorQueue"
    assert retry.max_receive_count is not None
    assert retry.max_receive_count >= 2
    (event,) = template.functions["RetryQueueFunction"].events_of(SqsEvent)
    assert event.queue == "RetryQueue"
    assert event.function_response_types == ("ReportBatchItemFailures",)
    consumer_timeout = template.functions["RetryQueueFunction"].timeout
    assert int(retry.attributes["VisibilityTimeout"]) >= 6 * consumer_timeout


def test_sparse_indexes_for_the_sweeper_the_healer_and_org_usage(template):
    table = template.tables["ResourcesTable"]
    indexes = {index["IndexName"]: index for index in table.global_secondary_indexes}
    assert set(indexes) == {
        "PendingIndex",
        "CounterIndex",
        "OrgUsageIndex",
        "HoldIndex",
        "OrgHoldIndex",
        "OverKindIndex",
        "OverIndex",
        "EventsIndex",
    }
    keys = {name: [k["AttributeName"] for k in index["KeySchema"]] for name, index in indexes.items()}
    assert keys == {
        "PendingIndex": ["pending_shard", "pending_since"],
        "CounterIndex": ["counter_shard", "pk"],
        "OrgUsageIndex": ["org_kind", "eventual"],
        "HoldIndex": ["hold_account", "hold_until"],
        "OrgHoldIndex": ["hold_org", "hold_until"],
        "OverKindIndex": ["over_kind", "over_since"],
        "OverIndex": ["over_all", "over_since"],
        "EventsIndex": ["events_day", "events_at"],
    }
    # Who is near a limit: only what the threshold transaction writes, so no counter write
    # (which changes none of these) writes either index (governance/usage_over.py).
    assert indexes["OverKindIndex"]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["over_used", "over_limit"],
    }
    assert indexes["OverIndex"]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["over_kind", "over_used", "over_limit"],
    }
    # The event log: only what the take-off of a published event writes (governance/event_log.py).
    assert indexes["EventsIndex"]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["events_log"],
    }
    # Expiry (the sweeper, a refused admission) acts on what the projection holds of a hold.
    assert indexes["HoldIndex"]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["resource_id", "kind", "units", "state", "incarnation"],
    }
    # (a refusal at an organization: its members' holds, the same, the account read from the pk)
    assert indexes["OrgHoldIndex"]["Projection"] == indexes["HoldIndex"]["Projection"]
    # An organization's top accounts are read from the keys alone (the account is the table's pk).
    assert indexes["OrgUsageIndex"]["Projection"]["ProjectionType"] == "KEYS_ONLY"
    # The sweeper reads what it acts on from the projection, not one GetItem per entry.
    assert indexes["PendingIndex"]["Projection"] == {
        "ProjectionType": "INCLUDE",
        "NonKeyAttributes": ["state", "incarnation", "counter_processed", "units", "resize_request", "event"],
    }
    assert indexes["CounterIndex"]["Projection"]["ProjectionType"] == "KEYS_ONLY"


def test_pending_creates_expire_by_ttl(template):
    assert template.tables["ResourcesTable"].ttl_attribute == "expires_at"


def test_every_function_handler_file_exists_and_pending_grace_exceeds_api_timeout(template):
    for function in template.functions.values():
        assert function.handler_path.is_file(), function.handler_path
        assert function.runtime == "python3.12"
    grace = int(template.parameter_values["PendingGraceSeconds"])
    assert grace > template.functions["ApiFunction"].timeout


def test_api_sample_events_match_routes_in_the_template(template):
    routes = {
        f"{event.method.upper()} {event.path}"
        for event in template.functions["ApiFunction"].events_of(HttpApiEvent)
    }
    api_events = sorted((PROJECT / "events").glob("api_*.json"))
    # One sample event per route (sam local invoke runs each), and every route has one
    covered = {json.loads(path.read_text())["routeKey"] for path in api_events}
    assert covered <= routes, sorted(covered - routes)
    assert routes - covered <= {"GET /openapi.json"}, sorted(routes - covered)


def test_retry_queue_sample_event_carries_an_on_failure_record():
    event = json.loads((PROJECT / "events" / "retry_queue_on_failure_record.json").read_text())
    (record,) = event["Records"]
    info = BatchInfo.from_failure_record(json.loads(record["body"]))
    assert int(info.start) <= int(info.end)
    assert info.stream_arn.startswith("arn:aws:dynamodb:")


def test_quota_event_parameters_have_the_documented_defaults_and_bounds(template):
    assert {
        name: template.parameter_values[name]
        for name in ("EventBusName", "UsageThresholds", "ThresholdHysteresisPercent", "HistoryRetentionDays")
    } == {
        "EventBusName": "",
        "UsageThresholds": "80,100",
        "ThresholdHysteresisPercent": "5",
        "HistoryRetentionDays": "0",
    }
    # CloudFormation refuses these at deploy time; localrun applies the same constraints.
    for name, value in [("UsageThresholds", "50, 75.5,100"), ("EventBusName", "ops.events_bus-1")]:
        assert load_template(parameter_overrides={name: value}).parameter_values[name] == value
    for name, value in [
        ("UsageThresholds", ""),
        ("UsageThresholds", "80;100"),
        ("UsageThresholds", "eighty"),
        ("EventBusName", "arn:aws:events:us-east-1:123456789012:event-bus/x"),
        ("ThresholdHysteresisPercent", "51"),
        ("ThresholdHysteresisPercent", "-1"),
        ("HistoryRetentionDays", "-1"),
    ]:
        with pytest.raises(TemplateError):
            load_template(parameter_overrides={name: value})


def test_the_bus_is_named_the_same_everywhere_it_is_used():
    """The bus the functions are told, the rule reads, the roles grant and the outputs name is one bus:
    the same expression in each place (a divergence would publish where nobody listens, or be denied)."""
    raw = load_yaml(DEFAULT_TEMPLATE)
    resources, outputs = raw["Resources"], raw["Outputs"]
    bus_name = raw["Globals"]["Function"]["Environment"]["Variables"]["EVENT_BUS_NAME"]
    assert bus_name == {"Fn::If": ["CreateEventBus", {"Ref": "QuotaEventBus"}, {"Ref": "EventBusName"}]}
    assert resources["QuotaEventsToQueue"]["Properties"]["EventBusName"] == bus_name
    assert outputs["EventBusName"]["Value"] == bus_name
    bus_arn = outputs["EventBusArn"]["Value"]
    assert bus_arn["Fn::If"][:2] == ["CreateEventBus", {"Fn::GetAtt": ["QuotaEventBus", "Arn"]}]
    grants = {
        logical_id: [
            statement["Resource"]
            for policy in resource["Properties"]["Policies"]
            for statement in policy["PolicyDocument"]["Statement"]
            if statement["Action"] == "events:PutEvents"
        ]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::IAM::Role"
    }
    assert grants == {
        "ApiFunctionExecutionRole": [bus_arn],
        "StreamCounterFunctionExecutionRole": [bus_arn],
        "RetryQueueFunctionExecutionRole": [],
        "SweeperFunctionExecutionRole": [bus_arn],
    }
    assert resources["QuotaEventBus"] == {
        "Type": "AWS::Events::EventBus",
        "Condition": "CreateEventBus",
        "Properties": {"Name": {"Fn::Sub": "${AWS::StackName}-quota-events"}},
    }
    assert outputs["QuotaEventsQueueUrl"]["Value"] == {"Ref": "QuotaEventsQueue"}


def test_every_quota_event_reaches_the_events_queue(template):
    rule = template.event_rules["QuotaEventsToQueue"]
    assert rule.event_pattern == {"source": ["hybrid-counter"]}
    assert [target.queue for target in rule.targets] == ["QuotaEventsQueue"]
    assert template.queue_policies["QuotaEventsQueuePolicy"].queues == ("QuotaEventsQueue",)
    assert template.event_buses["QuotaEventBus"].name == f"{template.stack_name}-quota-events"
