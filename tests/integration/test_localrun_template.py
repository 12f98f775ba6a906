"""localrun's template reader: everything comes from the template, unsupported things fail loudly."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest

from localrun.errors import TemplateError
from localrun.functions.environment import function_environment, lambda_variables, local_variables
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.iam_policies import function_log_group, function_policies, is_allowed
from localrun.stack.intrinsics import ResourceValues
from localrun.stack.provision import (
    EventBusResource,
    EventRuleResource,
    LocalResources,
    QueueResource,
    TableResource,
    function_identity,
)
from localrun.stack.template import (
    DEFAULT_TEMPLATE,
    DynamoDBStreamEvent,
    EventBusSpec,
    EventTarget,
    HttpApiEvent,
    ScheduleEvent,
    SqsEvent,
    load_template,
    rate_seconds,
)

pytestmark = pytest.mark.integration

BASE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Mode:
    Type: String
    Default: alpha
    AllowedValues: [alpha, beta]
  Size:
    Type: Number
    Default: 7
    MinValue: 1
Conditions:
  IsBeta: !Equals [!Ref Mode, beta]
Globals:
  Function:
    Runtime: python3.12
    Timeout: 4
    MemorySize: 512
    Layers: [arn:aws:lambda:us-east-1:123456789012:layer:shared:1]
    Environment:
      Variables:
        TABLE: !Ref Things
        MODE: !Ref Mode
        SHARED: from-globals
Resources:
  Things:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
      StreamSpecification: {StreamViewType: NEW_IMAGE}
  Dead:
    Type: AWS::SQS::Queue
  Work:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 45
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt Dead.Arn
        maxReceiveCount: 5
  Worker:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: code/
      Handler: pkg.worker.handle
      Timeout: 9
      Layers: [arn:aws:lambda:us-east-1:123456789012:layer:own:2]
      Environment:
        Variables:
          SHARED: from-function
          QUEUE: !Ref Work
          DEAD_ARN: !GetAtt Dead.Arn
          LABEL: !Sub "${AWS::StackName}-${Mode}-${Things}"
          PICK: !If [IsBeta, picked-beta, picked-alpha]
          GONE: !If [IsBeta, here, !Ref AWS::NoValue]
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Things.StreamArn
            StartingPosition: LATEST
            BatchSize: !Ref Size
            MaximumBatchingWindowInSeconds: 3
            MaximumRetryAttempts: 6
            BisectBatchOnFunctionError: false
            FunctionResponseTypes: [ReportBatchItemFailures]
            DestinationConfig:
              OnFailure:
                Destination: !GetAtt Dead.Arn
        Jobs:
          Type: SQS
          Properties:
            Queue: !GetAtt Work.Arn
            BatchSize: 4
        Tick:
          Type: Schedule
          Properties:
            Schedule: rate(2 hours)
        Route:
          Type: HttpApi
          Properties:
            Method: patch
            Path: /things/{thing_id}
"""


def write_template(tmp_path: Path, text: str = BASE, name: str = "template.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


def local_resources(stack: str) -> LocalResources:
    return LocalResources(
        stack_name=stack,
        tables={"Things": TableResource("Things", f"{stack}-Things", "arn:table", "arn:table/stream/1")},
        queues={
            "Work": QueueResource("Work", f"{stack}-Work", "http://q/work", "arn:aws:sqs:us-east-1:1:work"),
            "Dead": QueueResource("Dead", f"{stack}-Dead", "http://q/dead", "arn:aws:sqs:us-east-1:1:dead"),
        },
        functions={"Worker": function_identity(stack, "Worker", None)},
    )


def test_throwaway_template_is_described_from_its_own_values(tmp_path: Path) -> None:
    template = load_template(write_template(tmp_path), stack_name="st1")

    assert template.parameter_values == {"Mode": "alpha", "Size": "7"}
    table = template.tables["Things"]
    assert table.key_schema == ({"AttributeName": "id", "KeyType": "HASH"},)
    assert table.stream_view_type == "NEW_IMAGE"
    assert table.billing_mode == "PAY_PER_REQUEST"
    work = template.queues["Work"]
    assert work.attributes == {"VisibilityTimeout": "45"}
    assert (work.dead_letter_queue, work.max_receive_count) == ("Dead", 5)

    worker = template.functions["Worker"]
    assert worker.code_uri == (tmp_path / "code").resolve()
    assert worker.handler_path == (tmp_path / "code" / "pkg" / "worker.py").resolve()
    assert (worker.handler_module, worker.handler_function) == ("pkg.worker", "handle")
    assert (worker.timeout, worker.memory_size) == (9, 512)  # own Timeout wins, MemorySize from Globals
    # Globals lists are appended, maps merged with the function winning per key.
    assert len(worker.layers) == 2
    assert worker.environment["SHARED"] == "from-function"

    (stream,) = worker.events_of(DynamoDBStreamEvent)
    assert stream == DynamoDBStreamEvent(
        name="Stream",
        table="Things",
        starting_position="LATEST",
        batch_size=7,  # !Ref Size
        maximum_batching_window_seconds=3.0,
        maximum_retry_attempts=6,
        bisect_batch_on_function_error=False,
        parallelization_factor=1,
        function_response_types=("ReportBatchItemFailures",),
        on_failure_queue="Dead",
        enabled=True,
    )
    (jobs,) = worker.events_of(SqsEvent)
    assert (jobs.queue, jobs.batch_size, jobs.report_batch_item_failures) == ("Work", 4, False)
    (tick,) = worker.events_of(ScheduleEvent)
    assert tick.interval_seconds == 7200.0
    (route,) = worker.events_of(HttpApiEvent)
    assert (route.method, route.path, route.route_key) == (
        "PATCH",
        "/things/{thing_id}",
        "PATCH /things/{thing_id}",
    )


def test_environment_resolves_against_local_resources_and_parameters(tmp_path: Path) -> None:
    template = load_template(write_template(tmp_path), stack_name="st2", parameter_overrides={"Mode": "beta"})
    resources = local_resources("st2")
    resolver = template.resolver.with_resources(resources.values())

    environment = template.functions["Worker"].resolved_environment(resolver)

    assert environment == {
        "TABLE": "st2-Things",
        "MODE": "beta",
        "SHARED": "from-function",
        "QUEUE": "http://q/work",
        "DEAD_ARN": "arn:aws:sqs:us-east-1:1:dead",
        "LABEL": "st2-beta-st2-Things",
        "PICK": "picked-beta",
        "GONE": "here",
    }
    alpha = load_template(write_template(tmp_path), stack_name="st2")
    alpha_env = alpha.functions["Worker"].resolved_environment(
        alpha.resolver.with_resources(resources.values())
    )
    assert alpha_env["PICK"] == "picked-alpha"
    assert "GONE" not in alpha_env  # AWS::NoValue removes the variable


def test_project_template_settings_come_from_the_yaml() -> None:
    raw = load_yaml(DEFAULT_TEMPLATE)
    template = load_template(stack_name="any-stack")

    for logical_id, resource in raw["Resources"].items():
        if resource["Type"] == "AWS::DynamoDB::Table":
            assert template.tables[logical_id].key_schema == tuple(resource["Properties"]["KeySchema"])
        if resource["Type"] == "AWS::SQS::Queue":
            redrive = resource["Properties"].get("RedrivePolicy")
            queue = template.queues[logical_id]
            if redrive:
                assert queue.dead_letter_queue == redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
                assert queue.max_receive_count == redrive["maxReceiveCount"]
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        function = template.functions[logical_id]
        props = resource["Properties"]
        assert function.handler == props["Handler"]
        assert function.timeout == props.get("Timeout", raw["Globals"]["Function"].get("Timeout", 3))
        for name, event in props.get("Events", {}).items():
            described = next(item for item in function.events if item.name == name)
            settings: dict[str, Any] = event["Properties"]
            if event["Type"] == "DynamoDB":
                assert isinstance(described, DynamoDBStreamEvent)
                assert described.batch_size == settings.get("BatchSize", 100)
                assert described.maximum_retry_attempts == settings.get("MaximumRetryAttempts", -1)
                assert described.bisect_batch_on_function_error == settings.get(
                    "BisectBatchOnFunctionError", False
                )
                assert described.table == settings["Stream"]["Fn::GetAtt"][0]
            elif event["Type"] == "SQS":
                assert isinstance(described, SqsEvent)
                assert described.queue == settings["Queue"]["Fn::GetAtt"][0]
                assert described.batch_size == settings.get("BatchSize", 10)
            elif event["Type"] == "HttpApi":
                assert isinstance(described, HttpApiEvent)
                assert (described.method, described.path) == (settings["Method"].upper(), settings["Path"])


def test_parameter_overrides_are_validated(tmp_path: Path) -> None:
    path = write_template(tmp_path)
    with pytest.raises(TemplateError, match="not one of"):
        load_template(path, parameter_overrides={"Mode": "gamma"})
    with pytest.raises(TemplateError, match="below its MinValue"):
        load_template(path, parameter_overrides={"Size": "0"})
    with pytest.raises(TemplateError, match="unknown parameter"):
        load_template(path, parameter_overrides={"Nope": "1"})


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("rate(2 hours)", "cron(0 12 * * ? *)", "only rate"),
        ("BisectBatchOnFunctionError: false", "ParallelizationFactor: 2", "ParallelizationFactor 2"),
        ("  Dead:\n    Type: AWS::SQS::Queue", "  Dead:\n    Type: AWS::Kinesis::Stream", "not supported"),
        ("Method: patch", "Method: patch\n            PayloadFormatVersion: '1.0'", "PayloadFormatVersion"),
        ("Runtime: python3.12", "Runtime: nodejs20.x", "cannot run"),
        (
            "Destination: !GetAtt Dead.Arn",
            "Destination: arn:aws:sqs:us-east-1:1:elsewhere",
            "must be !GetAtt",
        ),
        ("BatchSize: 4", "BatchSize: 4\n            Mystery: 1", "does not support Mystery"),
        ("StartingPosition: LATEST", "StartingPosition: AT_TIMESTAMP", "TRIM_HORIZON or LATEST"),
    ],
)
def test_unsupported_features_fail_with_a_clear_message(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(TemplateError, match=message):
        load_template(write_template(tmp_path, replace(BASE, old, new)))


def test_stream_event_needs_a_table_with_a_stream(tmp_path: Path) -> None:
    text = replace(BASE, "      StreamSpecification: {StreamViewType: NEW_IMAGE}\n", "")
    with pytest.raises(TemplateError, match="no StreamSpecification"):
        load_template(write_template(tmp_path, text))


def test_rate_expressions() -> None:
    assert rate_seconds("rate(1 minute)") == 60
    assert rate_seconds("rate(5 minutes)") == 300
    assert rate_seconds("rate(1 day)") == 86400
    with pytest.raises(TemplateError):
        rate_seconds("rate(1 minutes)")
    with pytest.raises(TemplateError):
        rate_seconds("rate(0 minutes)")


def test_each_function_sees_its_own_variables_and_lambdas_not_the_runtimes(tmp_path: Path) -> None:
    own = {"TABLE": "t1", "AWS_REGION": "eu-west-9"}  # a reserved name: Lambda's value wins
    defined = lambda_variables(
        function_name="st-Worker",
        memory_size=512,
        handler="pkg.worker.handle",
        task_root=tmp_path / "code",
        interpreter=tmp_path / "bin" / "python3.12",
    )
    local = local_variables("http://127.0.0.1:1", "http://127.0.0.1:2")
    environment = function_environment(own, defined, local, {"EXTRA": "x"})

    assert environment["TABLE"] == "t1"
    assert environment["AWS_REGION"] == "us-east-1"
    assert environment["EXTRA"] == "x"
    assert environment["AWS_LAMBDA_FUNCTION_NAME"] == "st-Worker"
    assert environment["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "512"
    assert environment["_HANDLER"] == "pkg.worker.handle"
    assert environment["LAMBDA_TASK_ROOT"] == str(tmp_path / "code")
    assert environment["AWS_EXECUTION_ENV"] == "AWS_Lambda_python3.12"
    assert environment["PATH"].startswith(f"{tmp_path / 'bin'}:")
    assert environment["AWS_ENDPOINT_URL_DYNAMODB"] == "http://127.0.0.1:1"
    assert environment["AWS_ENDPOINT_URL_SQS"] == "http://127.0.0.1:2"
    assert environment["AWS_ENDPOINT_URL_EVENTBRIDGE"] == "http://127.0.0.1:2"  # moto serves both
    # Nothing of this process's own environment comes along.
    assert "HOME" not in environment
    assert "VIRTUAL_ENV" not in environment
    assert "PYTHONPATH" not in environment


def test_short_form_tags_load_as_long_form(tmp_path: Path) -> None:
    path = tmp_path / "tags.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            A: !Ref Thing
            B: !GetAtt Thing.Arn
            C: !Sub "${Thing}-x"
            D: !If [Cond, !Ref X, !GetAtt [Y, Arn]]
            E: !Select [0, !Split [",", "a,b"]]
            """
        )
    )
    assert load_yaml(path) == {
        "A": {"Ref": "Thing"},
        "B": {"Fn::GetAtt": ["Thing", "Arn"]},
        "C": {"Fn::Sub": "${Thing}-x"},
        "D": {"Fn::If": ["Cond", {"Ref": "X"}, {"Fn::GetAtt": ["Y", "Arn"]}]},
        "E": {"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]},
    }


def test_resource_values_are_what_intrinsics_see(tmp_path: Path) -> None:
    template = load_template(write_template(tmp_path), stack_name="st3")
    resolver = template.resolver.with_resources({"Things": ResourceValues("tbl", {"Arn": "arn:t"})})
    assert resolver.resolve({"Fn::Sub": "${Things.Arn}/index/X"}, "test") == "arn:t/index/X"
    assert (
        resolver.resolve({"Fn::Join": ["-", [{"Ref": "Things"}, {"Ref": "AWS::Region"}]]}, "t")
        == "tbl-us-east-1"
    )
    with pytest.raises(TemplateError, match="not available locally"):
        resolver.resolve({"Fn::GetAtt": ["Things", "StreamArn"]}, "test")


ROLE_RESOURCES = """\
  WorkerLogs:
    Type: AWS::Logs::LogGroup
    Properties:
      RetentionInDays: 7
  WorkerRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Statement:
          - {Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: sts:AssumeRole}
      ManagedPolicyArns: [arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]
      Policies:
        - PolicyName: own
          PolicyDocument:
            Statement:
              - Effect: Allow
                Action: [dynamodb:GetRecords]
                Resource: !GetAtt Things.StreamArn
              - Effect: Allow
                Action: logs:PutLogEvents
                Resource: !Sub "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${WorkerLogs}:log-stream:*"
  WorkerExtra:
    Type: AWS::IAM::Policy
    Properties:
      PolicyName: extra
      Roles: [!Ref WorkerRole]
      PolicyDocument:
        Statement:
          - {Effect: Allow, Action: sqs:ReceiveMessage, Resource: !GetAtt Work.Arn}
"""


def test_a_function_with_its_own_role_has_that_roles_permissions_and_nothing_sam_would_add(
    tmp_path: Path,
) -> None:
    text = replace(
        BASE,
        "      Timeout: 9\n",
        "      Timeout: 9\n      Role: !GetAtt WorkerRole.Arn\n      LoggingConfig: {LogGroup: !Ref WorkerLogs}\n",
    )
    template = load_template(write_template(tmp_path, text + ROLE_RESOURCES), stack_name="st9")
    assert template.log_groups["WorkerLogs"].log_group_name is None
    resources = replace_log_groups(local_resources("st9"), {"WorkerLogs": "st9-WorkerLogs"})
    assert resources.values()["WorkerLogs"] == ResourceValues(
        "st9-WorkerLogs", {"Arn": "arn:aws:logs:us-east-1:123456789012:log-group:st9-WorkerLogs:*"}
    )
    resolver = template.resolver.with_resources(resources.values())
    statements = function_policies(template, resolver, "Worker")
    assert function_log_group(template, resolver, "Worker") == "st9-WorkerLogs"

    # The role's inline policy, its managed policy and the AWS::IAM::Policy that names it...
    stream = "logs:PutLogEvents", "arn:aws:logs:us-east-1:123456789012:log-group:st9-WorkerLogs:log-stream:s"
    assert is_allowed(statements, *stream) is not None
    assert is_allowed(statements, "dynamodb:GetRecords", "arn:table/stream/1") is not None
    assert is_allowed(statements, "sqs:ReceiveMessage", "arn:aws:sqs:us-east-1:1:work") is not None
    assert {s.source for s in statements if not s.own} == {"managed:AWSLambdaBasicExecutionRole (template)"}
    # ...and nothing SAM adds to the roles it generates: no event source or on-failure grants.
    assert is_allowed(statements, "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:dead") is None
    assert is_allowed(statements, "sqs:DeleteMessage", "arn:aws:sqs:us-east-1:1:work") is None
    assert is_allowed(statements, "xray:PutTraceSegments", "*") is None

    unknown = replace(text, "Role: !GetAtt WorkerRole.Arn", "Role: arn:aws:iam::123456789012:role/elsewhere")
    template = load_template(write_template(tmp_path, unknown + ROLE_RESOURCES), stack_name="st9")
    with pytest.raises(TemplateError, match="only !GetAtt <AWS::IAM::Role of this template>"):
        function_policies(template, resolver, "Worker")


def replace_log_groups(resources: LocalResources, names: dict[str, str]) -> LocalResources:
    return dataclasses.replace(resources, log_group_names=names)


EVENT_RESOURCES = """\
  Bus:
    Type: AWS::Events::EventBus
    Properties:
      Name: !Sub "${AWS::StackName}-${Mode}-bus"
      Description: ignored locally
  ToWork:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: !If [IsBeta, !Ref Bus, elsewhere]
      EventPattern: {source: [me], detail-type: [!Ref Mode]}
      Targets:
        - Id: work
          Arn: !GetAtt Work.Arn
          RetryPolicy: {MaximumRetryAttempts: 2}
  WorkPolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref Work]
      PolicyDocument:
        Statement:
          - {Effect: Allow, Principal: {Service: events.amazonaws.com}, Action: sqs:SendMessage,
             Resource: !GetAtt Work.Arn, Condition: {ArnEquals: {aws:SourceArn: !GetAtt ToWork.Arn}}}
"""


def test_event_buses_rules_and_queue_policies_are_described_and_resolved_once_provisioned(
    tmp_path: Path,
) -> None:
    path = write_template(tmp_path, BASE + EVENT_RESOURCES)
    template = load_template(path, stack_name="st4", parameter_overrides={"Mode": "beta"})

    assert template.event_buses == {"Bus": EventBusSpec("Bus", "st4-beta-bus")}
    rule = template.event_rules["ToWork"]
    assert (rule.rule_name, rule.targets) == (None, (EventTarget("work", "Work"),))
    assert template.queue_policies["WorkPolicy"].queues == ("Work",)
    # The rule's bus, pattern and the policy stay expressions until the resources exist
    resources = dataclasses.replace(
        local_resources("st4"),
        event_buses={"st4-beta-bus": EventBusResource("st4-beta-bus", "arn:bus", "Bus")},
        event_rules={
            "ToWork": EventRuleResource("ToWork", "st4-ToWork", "arn:rule", "st4-beta-bus", ("Work",))
        },
    )
    resolver = template.resolver.with_resources(resources.values())
    assert resolver.resolve(rule.event_bus, "t") == "st4-beta-bus"
    assert resolver.resolve(rule.event_pattern, "t") == {"source": ["me"], "detail-type": ["beta"]}
    assert resolver.resolve({"Fn::GetAtt": ["Bus", "Arn"]}, "t") == "arn:bus"
    assert resolver.resolve({"Fn::GetAtt": ["Bus", "Name"]}, "t") == "st4-beta-bus"
    policy = resolver.resolve(template.queue_policies["WorkPolicy"].policy_document, "t")
    assert policy["Statement"][0]["Condition"] == {"ArnEquals": {"aws:SourceArn": "arn:rule"}}
    with pytest.raises(TemplateError, match="!Ref ToWork is not emulated locally"):
        resolver.resolve({"Ref": "ToWork"}, "t")
    # Without the bus's condition, the rule names a bus the template does not create
    alpha = load_template(path, stack_name="st4")
    assert alpha.resolver.resolve(alpha.event_rules["ToWork"].event_bus, "t") == "elsewhere"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("Arn: !GetAtt Work.Arn\n", "Arn: arn:aws:sns:us-east-1:1:topic\n", "must be !GetAtt"),
        ("Arn: !GetAtt Work.Arn\n", "Arn: !GetAtt Worker.Arn\n", "not an SQS queue of this template"),
        ("RetryPolicy: {MaximumRetryAttempts: 2}", "InputPath: $.detail", "does not support InputPath"),
        (
            "EventPattern: {source: [me], detail-type: [!Ref Mode]}",
            "ScheduleExpression: rate(1 hour)",
            "does not support ScheduleExpression",
        ),
        (
            "EventPattern: {source: [me], detail-type: [!Ref Mode]}",
            "Description: no pattern",
            "only rules with an EventPattern",
        ),
        ("EventBusName: !If", "State: DISABLED\n      EventBusName: !If", "State 'DISABLED' is not emulated"),
        ("Queues: [!Ref Work]", "Queues: [https://sqs.example/q]", "must be !Ref"),
        ("      Description: ignored locally\n", "      Policy: {}\n", "does not support Policy"),
    ],
)
def test_unsupported_eventbridge_features_fail_with_a_clear_message(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(TemplateError, match=message):
        load_template(write_template(tmp_path, replace(BASE + EVENT_RESOURCES, old, new)))
