"""template.yaml's security settings, and the local model of them checked against the real SAM transform.

The SAM transform (SAM CLI's own interpreter in .tools, which `make test` installs) says which
role each function runs as, what is in it, and how each route is authorized; the
least-privilege check and the local gateway must agree with it, in both AuthModes.

Least privilege: each function runs as its own role (an AWS::IAM::Role of the template), which
gets no managed policy (AWS's are on "*": AWSLambdaDynamoDBExecutionRole reads every stream of
the account, AWSLambdaSQSQueueExecutionRole every queue) and names only this stack's resources.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from localrun.gateway.auth import GatewayAuth
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.iam_policies import (
    Statement,
    broad_grants,
    function_log_group,
    function_policies,
    is_allowed,
)
from localrun.stack.intrinsics import ResourceValues
from localrun.stack.template import ACCOUNT_ID, REGION, HttpApiEvent, Template, load_template

PROJECT = Path(__file__).resolve().parents[2]
SAM_PYTHON = PROJECT / ".tools" / "bin" / "python"

# The only actions a role may allow on Resource "*": their rows in the Service Authorization
# Reference name no resource type, so IAM evaluates them against "*" and nothing narrower
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsx-ray.html).
# Lambda needs both for Tracing: Active
# (https://docs.aws.amazon.com/lambda/latest/dg/services-xray.html).
NO_RESOURCE_TYPE_ACTIONS = frozenset({"xray:PutTraceSegments", "xray:PutTelemetryRecords"})
LOG_STREAM_ACTIONS = frozenset({"logs:CreateLogStream", "logs:PutLogEvents"})
_OWN_LOG_STREAMS = re.compile(
    r"arn:\$\{AWS::Partition\}:logs:\$\{AWS::Region\}:\$\{AWS::AccountId\}:log-group:\$\{(\w+)\}:log-stream:\*"
)


QUOTA_BUS_ARN = "arn:aws:events:r:1:event-bus/bus"
# The functions whose code publishes quota events (events:PutEvents); no other may.
PUBLISHERS = frozenset({"ApiFunction", "StreamCounterFunction", "SweeperFunction"})


def local_template(**overrides: str) -> tuple[Template, Any]:
    template = load_template(parameter_overrides=overrides)
    fake = {
        "ResourcesTable": ResourceValues(
            "t", {"Arn": "arn:aws:dynamodb:r:1:table/t", "StreamArn": "arn:aws:dynamodb:r:1:table/t/stream/s"}
        ),
        "RetryQueue": ResourceValues("u", {"Arn": "arn:aws:sqs:r:1:retry", "QueueName": "retry"}),
        "OperatorQueue": ResourceValues("v", {"Arn": "arn:aws:sqs:r:1:operator", "QueueName": "operator"}),
        "QuotaEventsQueue": ResourceValues("w", {"Arn": "arn:aws:sqs:r:1:events", "QueueName": "events"}),
        "QuotaEventBus": ResourceValues("bus", {"Arn": QUOTA_BUS_ARN, "Name": "bus"}),
        "QuotaEventsToQueue": ResourceValues(None, {"Arn": "arn:aws:events:r:1:rule/bus/to-queue"}),
        **{logical_id: ResourceValues(f"lg-{logical_id}") for logical_id in template.log_groups},
    }
    return template, template.resolver.with_resources(fake)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def log_stream_arn(group: str, stream: str = "2030/01/01/fn[$LATEST]0123abcd") -> str:
    return f"arn:aws:logs:{REGION}:{ACCOUNT_ID}:log-group:{group}:log-stream:{stream}"


@pytest.fixture(scope="module", params=["jwt", "iam"])
def transformed(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    if not SAM_PYTHON.exists():
        pytest.skip("SAM CLI is not installed in .tools (make test installs it)")
    done = subprocess.run(
        [
            str(SAM_PYTHON),
            str(PROJECT / "tests/tools/sam_transform.py"),
            str(PROJECT / "template.yaml"),
            f"AuthMode={request.param}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return request.param, json.loads(done.stdout)


def test_each_role_is_modelled_with_no_managed_policy_and_no_wildcard_beyond_the_documented_two():
    template, resolver = local_template()
    groups = {}
    for logical_id in template.functions:
        groups[logical_id] = function_log_group(template, resolver, logical_id)
        statements = function_policies(template, resolver, logical_id)
        assert statements, logical_id
        found = broad_grants(statements, star_actions=NO_RESOURCE_TYPE_ACTIONS, log_group=groups[logical_id])
        assert found == [], logical_id
    # Each function logs to a log group of its own, which the template creates (with a retention);
    # the only other log group is the HTTP API's access log.
    assert sorted(str(group) for group in groups.values()) == sorted(
        f"lg-{logical_id}" for logical_id in template.log_groups if logical_id != "HttpApiAccessLogGroup"
    )
    assert "HttpApiAccessLogGroup" in template.log_groups


def test_the_broad_grant_check_flags_managed_policies_wildcards_and_other_groups_logs():
    def own(actions: tuple[str, ...], resource: str) -> Statement:
        return Statement(actions, (resource,), "template")

    def flagged(*statements: Statement) -> list[str]:
        return broad_grants(statements, star_actions=NO_RESOURCE_TYPE_ACTIONS, log_group="mine")

    xray = own(tuple(NO_RESOURCE_TYPE_ACTIONS), "*")
    streams = own(tuple(LOG_STREAM_ACTIONS), log_stream_arn("mine", "*"))
    assert flagged(xray, streams) == []
    assert flagged(Statement(("dynamodb:GetRecords",), ("*",), "managed:AWSLambdaDynamoDBExecutionRole"))
    assert flagged(own(("xray:PutTraceSegments", "dynamodb:ListStreams"), "*"))
    assert flagged(own(("sqs:ReceiveMessage",), "*"))
    assert flagged(own(("logs:PutLogEvents",), log_stream_arn("another", "*")))
    assert flagged(own(("logs:CreateLogGroup",), log_stream_arn("mine", "*")))
    assert flagged(own(("dynamodb:GetItem",), "arn:aws:dynamodb:r:1:table/*"))
    assert flagged(own(("dynamodb:*",), "arn:aws:dynamodb:r:1:table/t"))


def test_each_function_runs_as_its_own_role_with_no_managed_policy_as_deployed(transformed):
    """The transformed template (what CloudFormation gets): no role SAM generated, none with a
    managed policy, "*" only for the documented actions, logs only in the function's own group;
    and the local model reads each role as it is deployed."""
    _, output = transformed
    resources = output["Resources"]
    template, resolver = local_template()
    for resource_id, resource in resources.items():
        assert resource["Type"] not in {"AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"}, resource_id
        assert "ManagedPolicyArns" not in resource.get("Properties", {}), resource_id
    roles = set()
    for logical_id in template.functions:
        function = resources[logical_id]["Properties"]
        ((role_id, attribute),) = [function["Role"]["Fn::GetAtt"]]
        role = resources[role_id]
        assert (role["Type"], attribute) == ("AWS::IAM::Role", "Arn"), logical_id
        roles.add(role_id)
        own_group = function["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[own_group]["Type"] == "AWS::Logs::LogGroup", logical_id
        assert "RetentionInDays" in resources[own_group]["Properties"], logical_id
        statements = [
            s for policy in role["Properties"]["Policies"] for s in policy["PolicyDocument"]["Statement"]
        ]
        for statement in statements:
            assert statement["Effect"] == "Allow", (logical_id, statement)
            assert not {"NotAction", "NotResource", "Condition"} & set(statement), (logical_id, statement)
            actions = set(as_list(statement["Action"]))
            for resource in as_list(statement["Resource"]):
                if resource == "*":
                    assert actions <= NO_RESOURCE_TYPE_ACTIONS, (logical_id, statement)
                elif "*" in json.dumps(resource) or "?" in json.dumps(resource):
                    text = resource.get("Fn::Sub", "") if isinstance(resource, dict) else resource
                    match = _OWN_LOG_STREAMS.fullmatch(text)
                    assert match is not None, (logical_id, statement)
                    assert match.group(1) == own_group, (logical_id, statement)
                    assert actions <= LOG_STREAM_ACTIONS, (logical_id, statement)
        modelled = [sorted(s.actions) for s in function_policies(template, resolver, logical_id)]
        assert modelled == [sorted(as_list(s["Action"])) for s in statements], logical_id
    assert len(roles) == len(template.functions)


def test_the_local_gateway_authorizes_each_route_as_the_transformed_api_does(transformed):
    mode, output = transformed
    body = output["Resources"]["HttpApi"]["Properties"]["Body"]
    expected = {
        f"{method.upper()} {path}": operation.get("security", [])
        for path, item in body["paths"].items()
        for method, operation in item.items()
    }
    template = load_template(parameter_overrides={"AuthMode": mode})
    events = [e for f in template.functions.values() for e in f.events_of(HttpApiEvent)]
    auth = GatewayAuth.from_template(template.http_apis["HttpApi"].auth, events, lambda _: "http://issuer")
    for route_key, security in expected.items():
        ((name, scopes),) = security[0].items()
        local = auth.routes[route_key]
        assert (local.kind, list(local.scopes)) == (
            {"NONE": "NONE", "AWS_IAM": "AWS_IAM"}.get(name, "JWT"),
            scopes,
        ), route_key
    if mode == "jwt":
        scheme = body["components"]["securitySchemes"]["TokenAuthorizer"]["x-amazon-apigateway-authorizer"]
        (authorizer,) = auth.jwt_authorizers
        assert list(authorizer.audiences) == scheme["jwtConfiguration"]["audience"]
        assert scheme["identitySource"] == "$request.header.Authorization"


def test_the_table_is_retained_and_protected_unless_a_test_stack_says_otherwise(transformed):
    _, output = transformed
    table = output["Resources"]["ResourcesTable"]
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert "JwtModeNeedsAnIssuer" in output["Rules"]


def test_failure_queues_keep_messages_14_days_and_the_events_queue_4():
    template, _ = local_template()
    for queue in template.queues.values():
        days = 4 if queue.logical_id == "QuotaEventsQueue" else 14
        assert queue.attributes["MessageRetentionPeriod"] == str(days * 24 * 3600), queue.logical_id


@pytest.mark.parametrize("given_bus", ["", "shared-bus"])
def test_the_publishers_may_put_events_on_the_quota_bus_and_on_no_other(given_bus: str) -> None:
    # Given the stack's own bus, or one named by EventBusName (its ARN built from the name)
    template, resolver = local_template(EventBusName=given_bus)
    bus_arn = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:event-bus/{given_bus}" if given_bus else QUOTA_BUS_ARN
    default_bus = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:event-bus/default"
    assert ("QuotaEventBus" in template.event_buses) == (not given_bus)
    for logical_id, function in template.functions.items():
        statements = function_policies(template, resolver, logical_id)
        # Then each function is told that bus, and only the publishers may put events, there only
        assert function.resolved_environment(resolver)["EVENT_BUS_NAME"] == (given_bus or "bus"), logical_id
        allowed = is_allowed(statements, "events:PutEvents", bus_arn)
        assert (allowed is not None) == (logical_id in PUBLISHERS), logical_id
        assert is_allowed(statements, "events:PutEvents", default_bus) is None, logical_id
        assert is_allowed(statements, "events:PutRule", bus_arn) is None, logical_id


def _if_bus_created(value: Any) -> Any:
    """A Fn::If on CreateEventBus as CloudFormation evaluates it with the default (empty) EventBusName."""
    if isinstance(value, dict) and list(value) == ["Fn::If"] and value["Fn::If"][0] == "CreateEventBus":
        return value["Fn::If"][1]
    return value


def test_quota_events_are_wired_as_deployed(transformed):
    """The transformed template: every function is told the bus, the publishers' roles grant
    PutEvents on its ARN, and the rule delivers to the queue whose policy admits that rule only."""
    _, output = transformed
    resources = output["Resources"]
    assert resources["QuotaEventBus"]["Condition"] == "CreateEventBus"
    template, _ = local_template()
    for logical_id in template.functions:
        variables = resources[logical_id]["Properties"]["Environment"]["Variables"]
        assert _if_bus_created(variables["EVENT_BUS_NAME"]) == {"Ref": "QuotaEventBus"}, logical_id
        assert {"USAGE_THRESHOLDS", "THRESHOLD_HYSTERESIS_PERCENT", "HISTORY_RETENTION_DAYS"} <= set(
            variables
        )
        role = resources[resources[logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]]
        grants = [
            _if_bus_created(statement["Resource"])
            for policy in role["Properties"]["Policies"]
            for statement in policy["PolicyDocument"]["Statement"]
            if "events:PutEvents" in as_list(statement["Action"])
        ]
        assert grants == ([{"Fn::GetAtt": ["QuotaEventBus", "Arn"]}] if logical_id in PUBLISHERS else [])
    rule = resources["QuotaEventsToQueue"]["Properties"]
    assert _if_bus_created(rule["EventBusName"]) == {"Ref": "QuotaEventBus"}
    assert rule["EventPattern"] == {"source": ["hybrid-counter"]}
    assert [target["Arn"] for target in rule["Targets"]] == [{"Fn::GetAtt": ["QuotaEventsQueue", "Arn"]}]
    policy = resources["QuotaEventsQueuePolicy"]["Properties"]
    assert policy["Queues"] == [{"Ref": "QuotaEventsQueue"}]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert (statement["Effect"], statement["Principal"], statement["Action"]) == (
        "Allow",
        {"Service": "events.amazonaws.com"},
        "sqs:SendMessage",
    )
    assert statement["Resource"] == {"Fn::GetAtt": ["QuotaEventsQueue", "Arn"]}
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["QuotaEventsToQueue", "Arn"]}}
    }
    queue = resources["QuotaEventsQueue"]["Properties"]
    assert (queue["SqsManagedSseEnabled"], queue["MessageRetentionPeriod"]) == (True, 4 * 24 * 3600)


def test_the_policy_model_matches_actions_and_resources_as_iam_does():
    template, resolver = local_template()
    statements = function_policies(template, resolver, "ApiFunction")
    assert is_allowed(statements, "dynamodb:getitem", "arn:aws:dynamodb:r:1:table/t") is not None
    assert is_allowed(statements, "dynamodb:Scan", "arn:aws:dynamodb:r:1:table/t") is None
    assert is_allowed(statements, "dynamodb:GetItem", "arn:aws:dynamodb:r:1:table/other") is None
    assert is_allowed(statements, "logs:PutLogEvents", log_stream_arn("lg-ApiFunctionLogGroup")) is not None
    assert is_allowed(statements, "logs:PutLogEvents", log_stream_arn("lg-SweeperFunctionLogGroup")) is None
    assert is_allowed(statements, "logs:CreateLogGroup", "arn:aws:logs:r:1:log-group:x") is None
    assert is_allowed(statements, "xray:PutTraceSegments", "*") is not None
    stream = function_policies(template, resolver, "StreamCounterFunction")
    assert is_allowed(stream, "dynamodb:GetRecords", "arn:aws:dynamodb:r:1:table/t/stream/s") is not None
    assert is_allowed(stream, "dynamodb:GetRecords", "arn:aws:dynamodb:r:1:table/other/stream/s") is None
    assert is_allowed(stream, "dynamodb:ListStreams", "*") is None
    # history items and threshold events (their outbox) are written by the stream path
    assert is_allowed(stream, "dynamodb:PutItem", "arn:aws:dynamodb:r:1:table/t") is not None
    assert is_allowed(stream, "sqs:SendMessage", "arn:aws:sqs:r:1:retry") is not None
    assert is_allowed(stream, "sqs:SendMessage", "arn:aws:sqs:r:1:operator") is None
    retry = function_policies(template, resolver, "RetryQueueFunction")
    assert is_allowed(retry, "sqs:ReceiveMessage", "arn:aws:sqs:r:1:retry") is not None
    assert is_allowed(retry, "sqs:ReceiveMessage", "arn:aws:sqs:r:1:operator") is None
    assert is_allowed(retry, "sqs:ChangeMessageVisibility", "arn:aws:sqs:r:1:retry") is None


def test_the_http_api_writes_an_access_log_line_per_request_without_headers():
    # Given the template as written
    document = load_yaml(PROJECT / "template.yaml")
    resources = document["Resources"]
    # When its HTTP API's access log settings are read
    settings = resources["HttpApi"]["Properties"]["AccessLogSettings"]
    # Then they go to the stack's own log group, with a retention, as one JSON object a line
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["HttpApiAccessLogGroup", "Arn"]}
    assert resources["HttpApiAccessLogGroup"]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    line = json.loads(settings["Format"])
    # with the request id API Gateway requires, who called, and never a header (a token is one)
    assert line["requestId"] == "$context.requestId"
    assert {"sub", "principal", "status", "routeKey"} <= set(line)
    assert not any("header" in value.lower() for value in line.values())
