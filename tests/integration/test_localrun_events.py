"""Quota events on the local stack from template.yaml: the bus, the rule and QuotaEventsQueue on moto.

An event is put on the bus as the domain puts it (boto3 `events.put_events`, configured by nothing
but a function's own environment) and arrives in QuotaEventsQueue through the stack's rule, on
moto's EventBridge and SQS: no stub in between. Each test runs its own stack (own bus, rule and
queue) on the session's endpoints, so events other tests cause never reach these queues.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_counter.ops.events_tail import TailOptions, tail
from localrun.__main__ import banner, write_state
from localrun.functions.call_recorder import attach, least_privilege_report
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.stack.aws_clients import client as aws_client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TAIL = ("events", "tail", "--wait", "1")
PUBLISHERS = ("ApiFunction", "StreamCounterFunction", "SweeperFunction")

# What the domain does in a function: boto3 finds region, credentials and endpoint in the environment.
PUT_EVENTS = """\
import json, os, sys
import boto3
entries = json.loads(sys.argv[1])
for entry in entries:
    entry["EventBusName"] = os.environ["EVENT_BUS_NAME"]
answer = boto3.client("events").put_events(Entries=entries)
print(json.dumps({"failed": answer["FailedEntryCount"], "endpoint": boto3.client("events").meta.endpoint_url}))
"""


@pytest.fixture(scope="module")
def own_stack(stack: LocalRuntime) -> Iterator[LocalRuntime]:
    # The gateway too (port 0, nothing warmed): the state file and the banner name the API.
    options = RuntimeOptions.driven(
        f"hc-ev-{uuid.uuid4().hex[:6]}", endpoints=stack.endpoints, start_http=True
    )
    with LocalRuntime(options) as runtime:
        yield runtime


def client(runtime: LocalRuntime, service: str) -> Any:
    """A client of moto (SQS, EventBridge) with the local stack's dummy credentials."""
    return aws_client(service, runtime.events_url)


def put_from_function(runtime: LocalRuntime, function: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """put_events in a process whose environment is exactly that function's."""
    done = subprocess.run(
        [sys.executable, "-c", PUT_EVENTS, json.dumps(entries)],
        env=runtime.function_environment(function),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def tail_all(runtime: LocalRuntime) -> list[dict[str, Any]]:
    out = io.StringIO()
    tail(client(runtime, "sqs"), runtime.queue_urls["QuotaEventsQueue"], TailOptions(wait_seconds=1), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def queue_depth(runtime: LocalRuntime) -> int:
    attributes = client(runtime, "sqs").get_queue_attributes(
        QueueUrl=runtime.queue_urls["QuotaEventsQueue"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def test_the_stack_creates_its_bus_the_rule_into_the_queue_and_tells_every_function(
    own_stack: LocalRuntime,
) -> None:
    bus = f"{own_stack.template.stack_name}-quota-events"
    events, sqs = client(own_stack, "events"), client(own_stack, "sqs")
    assert own_stack.event_bus_arns == {bus: events.describe_event_bus(Name=bus)["Arn"]}
    for function in own_stack.resources.functions:
        environment = own_stack.function_environment(function)
        assert environment["EVENT_BUS_NAME"] == bus, function
        assert environment["AWS_ENDPOINT_URL_EVENTBRIDGE"] == own_stack.events_url, function
        assert {name: environment[name] for name in ("USAGE_THRESHOLDS", "THRESHOLD_HYSTERESIS_PERCENT")} == {
            "USAGE_THRESHOLDS": "80,100",
            "THRESHOLD_HYSTERESIS_PERCENT": "5",
        }
        assert environment["HISTORY_RETENTION_DAYS"] == "0"

    (rule,) = events.list_rules(EventBusName=bus)["Rules"]
    assert json.loads(rule["EventPattern"]) == {"source": ["hybrid-counter"]}
    assert rule["Arn"] == own_stack.resources.event_rules["QuotaEventsToQueue"].arn
    queue_url = own_stack.queue_urls["QuotaEventsQueue"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    ((target_arn, target_id),) = [
        (target["Arn"], target["Id"])
        for target in events.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus)["Targets"]
    ]
    assert (target_arn, target_id) == (attributes["QueueArn"], "QuotaEventsQueue")
    assert attributes["MessageRetentionPeriod"] == str(4 * 24 * 3600)
    # The queue policy, recorded (moto does not enforce it): EventBridge may send, for this rule only.
    (statement,) = json.loads(attributes["Policy"])["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert (statement["Action"], statement["Resource"]) == ("sqs:SendMessage", attributes["QueueArn"])
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": rule["Arn"]}}


@pytest.mark.parametrize("function", PUBLISHERS)
def test_an_event_put_from_a_functions_environment_arrives_in_the_queue_through_the_rule(
    own_stack: LocalRuntime, function: str
) -> None:
    # Given events as the domain publishes them, and one from another source
    marker = uuid.uuid4().hex
    detail = {"account_id": "a1", "kind": "resources", "threshold": 80, "marker": marker}
    entries = [
        {"Source": "hybrid-counter", "DetailType": "Quota Threshold Reached", "Detail": json.dumps(detail)},
        {"Source": "somebody-else", "DetailType": "Quota Threshold Reached", "Detail": json.dumps({"x": 1})},
        {
            "Source": "hybrid-counter",
            "DetailType": "Quota Limit Changed",
            "Detail": json.dumps({"marker": marker}),
        },
    ]

    # When the function's environment puts them on its EVENT_BUS_NAME
    answer = put_from_function(own_stack, function, entries)

    # Then the call reached moto, and the rule delivered this service's events, and only those
    assert answer == {"failed": 0, "endpoint": own_stack.events_url}
    received = tail_all(own_stack)
    # (a standard queue: in any order)
    assert sorted((line["detail-type"], json.dumps(line["detail"], sort_keys=True)) for line in received) == [
        ("Quota Limit Changed", json.dumps({"marker": marker})),
        ("Quota Threshold Reached", json.dumps(detail, sort_keys=True)),
    ]
    assert all(line["time"].endswith("Z") for line in received)
    assert queue_depth(own_stack) == 0  # printed, so deleted


def test_hybrid_counter_ops_events_tail_reads_the_local_runtimes_queue(
    own_stack: LocalRuntime, tmp_path: Path
) -> None:
    # Given the state file `make dev` writes, and an event published as the domain does
    state_file = tmp_path / "runtime.json"
    write_state(own_stack, state_file)
    state = json.loads(state_file.read_text())
    bus = f"{own_stack.template.stack_name}-quota-events"
    assert (state["event_bus_name"], state["events_queue_url"], state["events_url"]) == (
        bus,
        own_stack.queue_urls["QuotaEventsQueue"],
        own_stack.events_url,
    )
    assert f"event bus       {bus}  ({own_stack.event_bus_arns[bus]})" in banner(own_stack)
    marker = uuid.uuid4().hex
    entry = {
        "Source": "hybrid-counter",
        "DetailType": "Quota Limit Changed",
        "Detail": json.dumps({"m": marker}),
    }
    assert put_from_function(own_stack, "SweeperFunction", [entry])["failed"] == 0

    # When the operator tool tails it (--local: everything from the state file)
    done = subprocess.run(
        [sys.executable, "-m", "hybrid_counter.ops.cli", "--local", "--local-state", str(state_file), *TAIL],
        env={key: value for key, value in os.environ.items() if not key.startswith("AWS_ENDPOINT_URL")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    # Then it printed the event as one JSON line and took it off the queue
    (line,) = done.stdout.splitlines()
    assert {key: value for key, value in json.loads(line).items() if key != "time"} == {
        "detail-type": "Quota Limit Changed",
        "detail": {"m": marker},
    }
    assert queue_depth(own_stack) == 0


def test_a_bus_given_by_EventBusName_is_published_on_and_the_only_bus_the_roles_allow(
    stack: LocalRuntime, tmp_path: Path
) -> None:
    # Given a stack told to publish on an existing bus (locally: created as its stand-in)
    shared = f"shared-{uuid.uuid4().hex[:6]}"
    options = RuntimeOptions.driven(
        f"hc-evb-{uuid.uuid4().hex[:6]}",
        endpoints=stack.endpoints,
        parameter_overrides={"EventBusName": shared},
    )
    with LocalRuntime(options) as runtime:
        shared_arn = client(runtime, "events").describe_event_bus(Name=shared)["Arn"]
        assert runtime.event_bus_arns == {shared: shared_arn}
        assert runtime.resources.event_buses[shared].logical_id is None  # no QuotaEventBus
        assert runtime.resources.event_rules["QuotaEventsToQueue"].event_bus == shared
        assert runtime.function_environment("ApiFunction")["EVENT_BUS_NAME"] == shared

        # When a function's environment publishes, and every function's calls are recorded
        marker = uuid.uuid4().hex
        entry = {
            "Source": "hybrid-counter",
            "DetailType": "Quota Threshold Cleared",
            "Detail": json.dumps({"m": marker}),
        }
        assert put_from_function(runtime, "ApiFunction", [entry])["failed"] == 0
        for function in runtime.resources.functions:
            events = attach(client(runtime, "events"), runtime.resources.functions[function].name, tmp_path)
            events.put_events(Entries=[{**entry, "EventBusName": shared}])
            events.put_events(Entries=[{**entry, "EventBusName": "default"}])

        # Then the event arrived, and the roles allow PutEvents on the given bus (by its ARN) only
        assert {"detail-type": "Quota Threshold Cleared", "detail": {"m": marker}} in [
            {key: line[key] for key in ("detail-type", "detail")} for line in tail_all(runtime)
        ]
        report = least_privilege_report(runtime, tmp_path)
        denied = {(request.function, request.action, request.resource) for request in report.denied}
        default_bus = shared_arn.rsplit("/", 1)[0] + "/default"
        assert denied == {
            *((function, "events:PutEvents", default_bus) for function in runtime.resources.functions),
            ("RetryQueueFunction", "events:PutEvents", shared_arn),
        }
