"""The alarms reach someone, and the dashboard shows what the code really emits
(docs/operator-guide.md "Alarms, and what to do", "The dashboard")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.template import DEFAULT_TEMPLATE, load_template

PROJECT = Path(__file__).resolve().parents[2]
LAYER = PROJECT / "layers/counter/hybrid_counter"
ALARM_TARGET = {"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return load_yaml(DEFAULT_TEMPLATE)


def of_type(document: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: spec for name, spec in document["Resources"].items() if spec["Type"] == kind}


def dashboard(document: dict[str, Any]) -> dict[str, Any]:
    (spec,) = of_type(document, "AWS::CloudWatch::Dashboard").values()
    body = spec["Properties"]["DashboardBody"]["Fn::Sub"]
    return json.loads(body)


def emitted_metric_names() -> set[str]:
    """Every name the layer passes to Observability.count (a literal, or either side of an if)."""
    names: set[str] = set()
    for path in LAYER.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for call in re.finditer(r"obs\.count\(\s*([^,)]*)", text):
            names |= set(re.findall(r'"([A-Z][A-Za-z]+)"', call.group(1)))
    return names


def test_every_alarm_notifies_the_alarm_topic_when_it_fires_and_when_it_clears(document):
    alarms = of_type(document, "AWS::CloudWatch::Alarm")
    assert set(alarms) == {"OperatorQueueAlarm", "RetryQueueAgeAlarm", "StreamIteratorAgeAlarm"}
    for name, spec in alarms.items():
        assert spec["Properties"]["AlarmActions"] == [ALARM_TARGET], name
        assert spec["Properties"]["OKActions"] == [ALARM_TARGET], name


def test_the_stack_makes_an_encrypted_topic_only_when_none_is_given_and_subscribes_only_an_address(document):
    resources = document["Resources"]
    assert resources["AlarmTopic"]["Condition"] == "CreateAlarmTopic"
    assert resources["AlarmTopicKey"]["Condition"] == "CreateAlarmTopic"
    assert resources["AlarmTopic"]["Properties"]["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    # CloudWatch can publish to the encrypted topic only if the key lets it use the key
    statements = resources["AlarmTopicKey"]["Properties"]["KeyPolicy"]["Statement"]
    (cloudwatch,) = [s for s in statements if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert set(cloudwatch["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    subscription = resources["AlarmEmailSubscription"]
    assert subscription["Condition"] == "SubscribeAlarmEmail"
    assert subscription["Properties"]["TopicArn"] == ALARM_TARGET
    assert subscription["Properties"]["Protocol"] == "email"
    assert document["Parameters"]["AlarmTopicArn"]["Default"] == ""
    assert document["Parameters"]["AlarmEmail"]["Default"] == ""


@pytest.mark.parametrize(
    ("overrides", "creates_topic", "subscribes"),
    [
        ({}, True, False),
        ({"AlarmEmail": "oncall@example.com"}, True, True),
        ({"AlarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:pager"}, False, False),
        (
            {"AlarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:pager", "AlarmEmail": "a@b.example"},
            False,
            True,
        ),
    ],
)
def test_the_local_runtime_reads_the_template_whatever_the_alarm_parameters(
    overrides, creates_topic, subscribes
):
    template = load_template(parameter_overrides=overrides)
    where = "test"
    assert template.resolver.condition("CreateAlarmTopic", where) is creates_topic
    assert template.resolver.condition("SubscribeAlarmEmail", where) is subscribes
    # Nothing of the alarms' wiring is run locally: the stack's functions and queues are as ever
    assert {"ApiFunction", "StreamCounterFunction"} <= set(template.functions)
    assert {"RetryQueue", "OperatorQueue"} <= set(template.queues)


def test_the_dashboards_service_metrics_are_ones_the_code_emits_with_its_namespace_and_dimension(document):
    environment = document["Globals"]["Function"]["Environment"]["Variables"]
    namespace, service = environment["POWERTOOLS_METRICS_NAMESPACE"], environment["POWERTOOLS_SERVICE_NAME"]
    emitted = emitted_metric_names()
    assert {"ResourcesCreated", "LimitExceeded", "CreateThrottled"} <= emitted  # the scan finds them
    shown = [
        metric
        for widget in dashboard(document)["widgets"]
        if widget["type"] == "metric"
        for metric in widget["properties"]["metrics"]
    ]
    ours = [metric for metric in shown if metric[0] == namespace]
    assert ours
    assert {metric[0] for metric in shown} <= {namespace, "AWS/Lambda", "AWS/SQS", "AWS/DynamoDB"}
    for metric in ours:
        # EMF lines of observability.Observability.count: one dimension, service
        assert metric[1] in emitted, metric
        assert metric[2:4] == ["service", service], metric


def test_the_dashboard_shows_admissions_refusals_throttles_stream_lag_and_queues(document):
    widgets = dashboard(document)["widgets"]
    names = {
        (metric[1], metric[3])
        for w in widgets
        if w["type"] == "metric"
        for metric in w["properties"]["metrics"]
    }
    assert ("ResourcesCreated", "hybrid-counter") in names
    assert ("LimitExceeded", "hybrid-counter") in names
    assert {("CreateThrottled", "hybrid-counter"), ("ResizeThrottled", "hybrid-counter")} <= names
    assert ("IteratorAge", "${StreamCounterFunction}") in names
    assert {
        ("ApproximateNumberOfMessagesVisible", "${RetryQueue.QueueName}"),
        ("ApproximateNumberOfMessagesVisible", "${OperatorQueue.QueueName}"),
    } <= names
    (alarms,) = [w for w in widgets if w["type"] == "alarm"]
    assert sorted(alarms["properties"]["alarms"]) == sorted(
        f"${{{name}.Arn}}" for name in of_type(document, "AWS::CloudWatch::Alarm")
    )
    # Refusals by resource kind come from the access log, whose fields the query reads
    (refusals,) = [w for w in widgets if w["type"] == "log"]
    query = refusals["properties"]["query"]
    assert query.startswith("SOURCE '${HttpApiAccessLogGroup}'")
    log_format = document["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["Format"]
    for field in ("status", "routeKey", "path"):
        assert f'"{field}":' in log_format
        assert field in query


def test_every_substitution_in_the_dashboard_names_something_of_the_template(document):
    body = of_type(document, "AWS::CloudWatch::Dashboard")["OperationsDashboard"]["Properties"][
        "DashboardBody"
    ]
    known = set(document["Resources"]) | set(document["Parameters"]) | {"AWS::Region", "AWS::StackName"}
    for name in re.findall(r"\$\{([^}]+)\}", body["Fn::Sub"]):
        assert name.split(".")[0] in known, name
