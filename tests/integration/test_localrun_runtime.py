"""localrun against the real DynamoDB Local and moto server, with stub handlers.

One set of endpoints and one runtime serve the module; the runtime runs a throwaway
template whose settings differ from the project's, so nothing can pass by accident
through hard-coded values. Each test installs its own wrappers around the stub
handlers and leaves the runtime idle.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from localrun import (
    FunctionError,
    FunctionTimeoutError,
    LambdaContext,
    LocalEndpoints,
    LocalRuntime,
    RuntimeOptions,
    TemplateError,
)
from localrun.errors import EndpointError
from localrun.stack.endpoints import find_dynamodb_local_jar

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TEMPLATE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Flavour:
    Type: String
    Default: plain
Globals:
  Function:
    Runtime: python3.12
    Timeout: 20
    Environment:
      Variables:
        ITEMS_TABLE: !Ref ItemsTable
        WORK_QUEUE: !Ref WorkQueue
        FLAVOUR: !Ref Flavour
Resources:
  ItemsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions:
        - {AttributeName: id, AttributeType: S}
        - {AttributeName: group, AttributeType: S}
      KeySchema: [{AttributeName: id, KeyType: HASH}]
      GlobalSecondaryIndexes:
        - IndexName: ByGroup
          KeySchema: [{AttributeName: group, KeyType: HASH}]
          Projection: {ProjectionType: KEYS_ONLY}
      StreamSpecification: {StreamViewType: NEW_AND_OLD_IMAGES}
  BisectTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
      StreamSpecification: {StreamViewType: NEW_IMAGE}
  FailureQueue:
    Type: AWS::SQS::Queue
  BisectFailureQueue:
    Type: AWS::SQS::Queue
  WorkDeadLetters:
    Type: AWS::SQS::Queue
  WorkQueue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 300
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt WorkDeadLetters.Arn
        maxReceiveCount: 2
  Api:
    Type: AWS::Serverless::HttpApi
    Properties:
      DefaultRouteSettings: {ThrottlingBurstLimit: 1000, ThrottlingRateLimit: 1000}
      RouteSettings:
        "GET /limited": {ThrottlingBurstLimit: 2, ThrottlingRateLimit: 0.01}
  ApiFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: echo.handler
      MemorySize: 321
      Events:
        Put:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: PUT, Path: "/things/{thing_id}/parts/{part_id}"}
        Get:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: "/things/{thing_id}"}
        Fixed:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: "/things/special"}
        Limited:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: "/limited"}
  SleepyFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: sleepy.handler
      Events:
        Sleepy:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: "/sleepy", TimeoutInMillis: 300}
  ProbeFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: probe.handler
      Events:
        Probe:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: "/probe"}
  LifecycleFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: lifecycle.handler
      Timeout: 2
      Environment:
        Variables:
          LIFECYCLE_ONLY: "mine"
  BrokenFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: broken.handler
  MissingFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: noop.nothing
  StreamFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: noop.handler
      Events:
        Items:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt ItemsTable.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            MaximumBatchingWindowInSeconds: 0
            MaximumRetryAttempts: 2
            BisectBatchOnFunctionError: false
            FunctionResponseTypes: [ReportBatchItemFailures]
            DestinationConfig:
              OnFailure:
                Destination: !GetAtt FailureQueue.Arn
  BisectFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: noop.handler
      Events:
        Items:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt BisectTable.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            MaximumRetryAttempts: 1
            BisectBatchOnFunctionError: true
            FunctionResponseTypes: [ReportBatchItemFailures]
            DestinationConfig:
              OnFailure:
                Destination: !GetAtt BisectFailureQueue.Arn
  QueueFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: noop.handler
      Events:
        Work:
          Type: SQS
          Properties:
            Queue: !GetAtt WorkQueue.Arn
            BatchSize: 5
            FunctionResponseTypes: [ReportBatchItemFailures]
  TickFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: noop.handler
      Events:
        Tick:
          Type: Schedule
          Properties:
            Schedule: rate(3 minutes)
  Bus:
    Type: AWS::Events::EventBus
    Properties:
      Name: !Sub "${AWS::StackName}-bus-${Flavour}"
  ProbeEvents:
    Type: AWS::SQS::Queue
  ProbesToQueue:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: !Ref Bus
      EventPattern:
        source: [lr-probe]
        detail-type: [Probe]
      Targets:
        - {Id: probes, Arn: !GetAtt ProbeEvents.Arn}
  ProbeEventsPolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref ProbeEvents]
      PolicyDocument:
        Statement:
          - Effect: Allow
            Principal: {Service: events.amazonaws.com}
            Action: sqs:SendMessage
            Resource: !GetAtt ProbeEvents.Arn
            Condition: {ArnEquals: {aws:SourceArn: !GetAtt ProbesToQueue.Arn}}
  PublishFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: stubs/
      Handler: publish.handler
      Environment:
        Variables:
          BUS: !Ref Bus
          BUS_ARN: !GetAtt Bus.Arn
"""

ECHO_HANDLER = """\
import json
import os


def handler(event, context):
    if event.get("rawQueryString") == "raw=1":
        return {"plain": True}
    return {
        "statusCode": 201,
        "headers": {"content-type": "application/json", "x-echo": "yes"},
        "cookies": ["c1=v1", "c2=v2"],
        "body": json.dumps({
            "event": event,
            "function_name": context.function_name,
            "function_version": context.function_version,
            "invoked_function_arn": context.invoked_function_arn,
            "memory_limit_in_mb": context.memory_limit_in_mb,
            "aws_request_id": context.aws_request_id,
            "log_group_name": context.log_group_name,
            "remaining_ms": context.get_remaining_time_in_millis(),
            "env": {
                name: os.environ.get(name)
                for name in ("ITEMS_TABLE", "WORK_QUEUE", "FLAVOUR", "AWS_REGION", "LIFECYCLE_ONLY", "HOME")
            },
        }),
    }
"""

NOOP_HANDLER = """\
def handler(event, context):
    return None
"""

# Answers 409 if another invocation runs in the same environment. The busy flag lives on a
# library module, as Powertools keeps the current event on a class: state that copies of the
# handler module in one process would still share.
PROBE_HANDLER = """\
import threading
import time
import uuid

ENVIRONMENT = uuid.uuid4().hex


def handler(event, context):
    if getattr(threading, "probe_busy", False):
        return {"statusCode": 409, "body": "two invocations overlapped in one environment"}
    threading.probe_busy = True
    try:
        time.sleep(0.05)
        return {"statusCode": 200, "body": ENVIRONMENT}
    finally:
        threading.probe_busy = False
"""

LIFECYCLE_HANDLER = """\
import os
import time


def handler(event, context):
    action = event.get("action")
    if action == "sleep":
        time.sleep(event["seconds"])
        open(event["then_touch"], "w").close()
    elif action == "raise":
        raise ValueError("asked to fail")
    elif action == "exit":
        os._exit(3)
    elif action == "unserialisable":
        return {"value": object()}
    variables = ("AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "LAMBDA_TASK_ROOT", "LIFECYCLE_ONLY")
    return {
        "pid": os.getpid(),
        "remaining_ms": context.get_remaining_time_in_millis(),
        "env": {name: os.environ.get(name) for name in variables},
    }
"""

# Publishes as code on Lambda does: boto3 configured by nothing but the environment.
PUBLISH_HANDLER = """\
import json
import os

import boto3


def handler(event, context):
    events = boto3.client("events")
    answer = events.put_events(Entries=[
        {"EventBusName": os.environ["BUS"], "Source": source, "DetailType": "Probe", "Detail": json.dumps(event)}
        for source in ("lr-probe", "not-a-probe")
    ])
    return {"failed": answer["FailedEntryCount"], "endpoint": events.meta.endpoint_url, "bus_arn": os.environ["BUS_ARN"]}
"""

BROKEN_HANDLER = """\
raise RuntimeError("cannot initialise")
"""

SLEEPY_HANDLER = """\
import time


def handler(event, context):
    time.sleep(2)
    open(event["queryStringParameters"]["touch"], "w").close()
    return {"statusCode": 200, "body": "finally"}
"""

ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
ISO_MILLIS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoints() -> Iterator[LocalEndpoints]:
    with LocalEndpoints() as running:
        yield running


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("localrun-app")
    (root / "template.yaml").write_text(TEMPLATE)
    (root / "stubs").mkdir()
    (root / "stubs" / "echo.py").write_text(ECHO_HANDLER)
    (root / "stubs" / "noop.py").write_text(NOOP_HANDLER)
    (root / "stubs" / "probe.py").write_text(PROBE_HANDLER)
    (root / "stubs" / "lifecycle.py").write_text(LIFECYCLE_HANDLER)
    (root / "stubs" / "broken.py").write_text(BROKEN_HANDLER)
    (root / "stubs" / "sleepy.py").write_text(SLEEPY_HANDLER)
    (root / "stubs" / "publish.py").write_text(PUBLISH_HANDLER)
    return root


@pytest.fixture(scope="module")
def runtime(endpoints: LocalEndpoints, project: Path) -> Iterator[LocalRuntime]:
    options = RuntimeOptions(
        port=0,
        stack_name="lr-test",
        parameter_overrides={"Flavour": "spicy"},
        endpoints=endpoints,
        template_path=project / "template.yaml",
        retry_backoff_seconds=0.02,
        max_retry_backoff_seconds=0.1,
        schedule_interval_seconds=0.3,
        failure_visibility_seconds=0,
        max_environments=4,
        warm_http_environments=0,  # here concurrency starts environments; warm-up has its own test
    )
    with LocalRuntime(options) as running:
        yield running
    assert os.environ.get("ITEMS_TABLE") is None  # the runtime never sets its functions' variables here


class Recorder:
    """Wraps stub handlers; records every event and answers with `respond(event)`."""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self.events: dict[str, list[Any]] = {}
        self._unwrap: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def wrap(self, function: str, respond: Callable[[Any], Any] = lambda event: None) -> list[Any]:
        events = self.events.setdefault(function, [])

        def wrapper(
            event: Any, context: LambdaContext, call_next: Callable[[Any, LambdaContext], Any]
        ) -> Any:
            with self._lock:
                events.append(event)
            return respond(event)

        self._unwrap.append(self.runtime.wrap_function(function, wrapper))
        return events

    def close(self) -> None:
        for unwrap in self._unwrap:
            unwrap()


@pytest.fixture
def recorder(runtime: LocalRuntime) -> Iterator[Recorder]:
    recorder = Recorder(runtime)
    recorder.wrap("TickFn")  # keeps the fast schedule quiet
    yield recorder
    runtime.resume_stream()
    try:
        runtime.wait_until_idle(timeout=30)
    finally:
        recorder.close()


def ddb(runtime: LocalRuntime) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=runtime.dynamodb_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def sqs(runtime: LocalRuntime) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=runtime.sqs_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def put_items(runtime: LocalRuntime, table: str, ids: list[str]) -> None:
    client = ddb(runtime)
    for item_id in ids:
        client.put_item(TableName=runtime.table_names[table], Item={"id": {"S": item_id}, "n": {"N": "1"}})


def paused_writes(runtime: LocalRuntime, table: str, ids: list[str]) -> None:
    """Write items while the stream is paused, so that they arrive as one batch on resume."""
    runtime.pause_stream()
    before = runtime.stream_backlog()
    put_items(runtime, table, ids)
    deadline = time.monotonic() + 10
    while runtime.stream_backlog() < before + len(ids):
        assert time.monotonic() < deadline, "records were not read while paused"
        time.sleep(0.02)
    runtime.resume_stream()


def ids_of(event: dict[str, Any]) -> list[str]:
    return [record["dynamodb"]["Keys"]["id"]["S"] for record in event["Records"]]


def seqs_of(event: dict[str, Any]) -> list[str]:
    return [record["dynamodb"]["SequenceNumber"] for record in event["Records"]]


def receive_all(runtime: LocalRuntime, queue: str, expected: int) -> list[dict[str, Any]]:
    client = sqs(runtime)
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while len(messages) < expected and time.monotonic() < deadline:
        response = client.receive_message(
            QueueUrl=runtime.queue_urls[queue],
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        )
        for message in response.get("Messages", []):
            messages.append(message)
            client.delete_message(QueueUrl=runtime.queue_urls[queue], ReceiptHandle=message["ReceiptHandle"])
    return messages


# -- provisioning and wiring ------------------------------------------------------------------------


def test_resources_are_named_from_stack_and_template(runtime: LocalRuntime) -> None:
    assert runtime.table_names == {"ItemsTable": "lr-test-ItemsTable", "BisectTable": "lr-test-BisectTable"}
    description = ddb(runtime).describe_table(TableName="lr-test-ItemsTable")["Table"]
    assert description["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    assert [index["IndexName"] for index in description["GlobalSecondaryIndexes"]] == ["ByGroup"]
    work = sqs(runtime).get_queue_attributes(QueueUrl=runtime.queue_urls["WorkQueue"], AttributeNames=["All"])
    redrive = json.loads(work["Attributes"]["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"].endswith(":lr-test-WorkDeadLetters")
    assert int(redrive["maxReceiveCount"]) == 2
    assert work["Attributes"]["VisibilityTimeout"] == "300"


def test_a_function_publishes_on_the_templates_bus_and_its_rule_delivers_to_the_queue(
    runtime: LocalRuntime,
) -> None:
    bus = "lr-test-bus-spicy"
    bus_arn = f"arn:aws:events:us-east-1:123456789012:event-bus/{bus}"
    assert runtime.event_bus_arns == {bus: bus_arn}
    rule = runtime.resources.event_rules["ProbesToQueue"]
    assert (rule.name, rule.event_bus, rule.target_queues) == ("lr-test-ProbesToQueue", bus, ("ProbeEvents",))
    assert runtime.function_environment("PublishFn")["AWS_ENDPOINT_URL_EVENTBRIDGE"] == runtime.events_url

    # An execution environment's boto3 reaches moto's EventBridge; the rule's pattern picks one event
    answer = runtime.function("PublishFn").invoke({"n": 7})
    assert answer == {"failed": 0, "endpoint": runtime.events_url, "bus_arn": bus_arn}
    (message,) = receive_all(runtime, "ProbeEvents", 1)
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"], event["detail"]) == ("lr-probe", "Probe", {"n": 7})
    # Not the other source's event (moto delivers within PutEvents: nothing is on its way)
    depth = sqs(runtime).get_queue_attributes(
        QueueUrl=runtime.queue_urls["ProbeEvents"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert depth == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}

    # The queue policy is recorded on the queue, naming the rule's real ARN
    policy = sqs(runtime).get_queue_attributes(
        QueueUrl=runtime.queue_urls["ProbeEvents"], AttributeNames=["Policy"]
    )
    (statement,) = json.loads(policy["Attributes"]["Policy"])["Statement"]
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": rule.arn}}
    assert rule.arn == f"arn:aws:events:us-east-1:123456789012:rule/{bus}/lr-test-ProbesToQueue"


# -- HTTP API ---------------------------------------------------------------------------------------


def test_http_api_event_is_payload_format_2(runtime: LocalRuntime) -> None:
    response = requests.put(
        f"{runtime.api_url}/things/t%201/parts/p2?b=2&a=1&a=3",
        data=b'{"x": 1}',
        headers={"X-Multi": "one", "Cookie": "k1=v1; k2=v2", "User-Agent": "tester/1"},
        timeout=10,
    )
    assert response.status_code == 201
    assert response.headers["x-echo"] == "yes"
    assert response.headers["apigw-requestid"]
    assert response.raw.headers.getlist("set-cookie") == ["c1=v1", "c2=v2"]
    answer = response.json()
    event = answer["event"]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "PUT /things/{thing_id}/parts/{part_id}"
    assert event["rawPath"] == "/things/t 1/parts/p2"
    assert event["rawQueryString"] == "b=2&a=1&a=3"
    assert event["queryStringParameters"] == {"b": "2", "a": "1,3"}
    assert event["pathParameters"] == {"thing_id": "t 1", "part_id": "p2"}
    assert event["cookies"] == ["k1=v1", "k2=v2"]
    assert event["headers"]["x-multi"] == "one"
    assert event["headers"]["user-agent"] == "tester/1"
    assert "cookie" not in event["headers"]
    assert all(name == name.lower() for name in event["headers"])
    assert event["body"] == '{"x": 1}'
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["http"] == {
        "method": "PUT",
        "path": "/things/t 1/parts/p2",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "tester/1",
    }
    assert context["routeKey"] == event["routeKey"]
    assert context["stage"] == "$default"
    assert context["requestId"] == response.headers["apigw-requestid"]
    assert context["apiId"] == runtime.resources.http_api_ids["Api"]
    assert abs(context["timeEpoch"] / 1000 - time.time()) < 60
    assert re.match(r"^\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000$", context["time"])
    # The real stub handler was loaded from CodeUri and got a Lambda-like context and environment.
    assert answer["function_name"] == "lr-test-ApiFn"
    assert answer["function_version"] == "$LATEST"
    assert answer["invoked_function_arn"].endswith(":function:lr-test-ApiFn")
    assert answer["memory_limit_in_mb"] == 321
    assert answer["log_group_name"] == "/aws/lambda/lr-test-ApiFn"
    assert 0 < answer["remaining_ms"] <= 20_000
    # Its own variables (from Globals here), not LifecycleFn's, nor this process's HOME.
    assert answer["env"] == {
        "ITEMS_TABLE": "lr-test-ItemsTable",
        "WORK_QUEUE": runtime.queue_urls["WorkQueue"],
        "FLAVOUR": "spicy",
        "AWS_REGION": "us-east-1",
        "LIFECYCLE_ONLY": None,
        "HOME": None,
    }
    assert runtime.function_environment("ApiFn")["ITEMS_TABLE"] == "lr-test-ItemsTable"
    assert "LIFECYCLE_ONLY" not in runtime.function_environment("ApiFn")


def test_http_routing_and_gateway_errors(runtime: LocalRuntime, recorder: Recorder) -> None:
    events = recorder.wrap(
        "ApiFn", lambda event: {"route": event["routeKey"], "params": event.get("pathParameters")}
    )
    special = requests.get(f"{runtime.api_url}/things/special", timeout=10)
    assert special.status_code == 200  # a dict without statusCode: JSON body, 200
    assert special.headers["content-type"] == "application/json"
    assert special.json() == {"route": "GET /things/special", "params": None}
    other = requests.get(f"{runtime.api_url}/things/abc", timeout=10)
    assert other.json() == {"route": "GET /things/{thing_id}", "params": {"thing_id": "abc"}}
    assert "body" not in events[-1]
    assert "queryStringParameters" not in events[-1]

    for method, path in [("GET", "/nothing"), ("DELETE", "/things/abc"), ("GET", "/things/abc/")]:
        missing = requests.request(method, f"{runtime.api_url}{path}", timeout=10)
        assert (missing.status_code, missing.json()) == (404, {"message": "Not Found"})

    binary = requests.put(f"{runtime.api_url}/things/a/parts/b", data=b"\xff\x00\xfe", timeout=10)
    assert binary.status_code == 200
    assert events[-1]["isBase64Encoded"] is True
    assert events[-1]["body"] == "/wD+"

    def explode(event: Any) -> Any:
        raise RuntimeError("boom")

    recorder.wrap("ApiFn", explode)
    failed = requests.get(f"{runtime.api_url}/things/abc", timeout=10)
    assert (failed.status_code, failed.json()) == (500, {"message": "Internal Server Error"})
    recorder.wrap("ApiFn", lambda event: {"statusCode": "not-a-number"})
    invalid = requests.get(f"{runtime.api_url}/things/abc", timeout=10)
    assert invalid.status_code == 500

    connection = http.client.HTTPConnection("127.0.0.1", int(runtime.api_url.rsplit(":", 1)[1]), timeout=10)
    connection.putrequest("PUT", "/things/a/parts/b")
    connection.putheader("Content-Length", str(10 * 1024 * 1024 + 1))
    connection.endheaders()
    too_large = connection.getresponse()
    assert too_large.status == 413
    assert json.loads(too_large.read()) == {"message": "Request Entity Too Large"}
    connection.close()


def test_route_throttling_answers_429_as_api_gateway_does(runtime: LocalRuntime, recorder: Recorder) -> None:
    # Given a route whose RouteSettings allow a burst of 2 (refilled at one request per 100 s)
    events = recorder.wrap("ApiFn", lambda event: {"ok": True})

    # When three requests arrive
    responses = [requests.get(f"{runtime.api_url}/limited", timeout=10) for _ in range(3)]

    # Then the third is refused as API Gateway refuses it, and never reaches the function
    assert [response.status_code for response in responses] == [200, 200, 429]
    throttled = responses[2]
    assert throttled.json() == {"message": "Too Many Requests"}
    assert throttled.headers["content-type"] == "application/json"
    assert throttled.headers["apigw-requestid"]
    assert len(events) == 2
    # And the other routes have buckets of their own (DefaultRouteSettings)
    assert requests.get(f"{runtime.api_url}/things/abc", timeout=10).status_code == 200


def test_the_integration_timeout_answers_503_while_the_function_runs_on(
    runtime: LocalRuntime, tmp_path: Path
) -> None:
    # Given a route with TimeoutInMillis 300 and a function that takes 2 s
    marker = tmp_path / "finished"

    # When it is called
    response = requests.get(f"{runtime.api_url}/sleepy", params={"touch": str(marker)}, timeout=30)

    # Then API Gateway's answer comes before the function's
    assert (response.status_code, response.json()) == (503, {"message": "Service Unavailable"})
    assert response.headers["content-type"] == "application/json"
    assert response.headers["apigw-requestid"]
    assert not marker.exists()
    # And the invocation is not cut short: it finishes on its own, as Lambda's would
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the timed-out invocation never finished"
        time.sleep(0.1)


def test_concurrent_invocations_never_share_an_execution_environment(runtime: LocalRuntime) -> None:
    # Given a handler whose module notices a second invocation running inside it
    start = threading.Barrier(8)

    def burst(_: int) -> list[tuple[int, str]]:
        start.wait()
        answers = []
        for _ in range(3):
            response = requests.get(f"{runtime.api_url}/probe", timeout=10)
            answers.append((response.status_code, response.text))
        return answers

    # When eight clients call it at once, three times each
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = [answer for batch in pool.map(burst, range(8)) for answer in batch]

    # Then no invocation overlapped another in one environment, and concurrency started
    # environments up to the limit (4 here); the other callers waited rather than failed
    assert {status for status, _ in answers} == {200}, answers
    used = {body for _, body in answers}
    probe = runtime.function("ProbeFn")
    assert 1 < len(used) == probe.environments <= 4
    # And an idle environment is reused rather than a new one started
    assert requests.get(f"{runtime.api_url}/probe", timeout=10).text in used
    assert probe.environments == len(used)


WARM_TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Resources:
  SlowFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: code/
      Handler: slow.handler
      Runtime: python3.12
      Events:
        Get:
          Type: HttpApi
          Properties: {Method: GET, Path: /slow}
  QuietFn:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: code/, Handler: slow.handler, Runtime: python3.12}
"""

SLOW_IMPORT_HANDLER = """\
import os
import time

time.sleep(1)  # stands for a heavy import


def handler(event, context):
    return {"statusCode": 200, "body": str(os.getpid())}
"""


def test_http_functions_are_warmed_at_start_so_a_burst_starts_no_environment(
    endpoints: LocalEndpoints, tmp_path: Path
) -> None:
    (tmp_path / "template.yaml").write_text(WARM_TEMPLATE)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "slow.py").write_text(SLOW_IMPORT_HANDLER)
    options = RuntimeOptions(
        port=0,
        stack_name="lr-warm",
        endpoints=endpoints,
        template_path=tmp_path / "template.yaml",
        max_environments=3,
    )
    with LocalRuntime(options) as runtime:
        # Given a runtime just started: every environment of the HTTP function has done its init
        slow = runtime.function("SlowFn")
        warmed = set(slow.pids)
        assert slow.environments == len(warmed) == 3
        assert all(report.init_ms >= 1000 for report in slow.init_reports)  # the import ran at start
        assert runtime.function("QuietFn").pids == []  # only HTTP functions are warmed

        # When a burst arrives
        barrier = threading.Barrier(3)

        def call(_: int) -> str:
            barrier.wait()
            return requests.get(f"{runtime.api_url}/slow", timeout=30).text

        with ThreadPoolExecutor(3) as pool:
            answered = {int(pid) for pid in pool.map(call, range(3))}

        # Then the warm environments answer it and none is started for it
        assert answered <= warmed
        assert slow.environments == 3


def test_an_http_function_that_cannot_initialise_fails_the_start(
    endpoints: LocalEndpoints, tmp_path: Path
) -> None:
    (tmp_path / "template.yaml").write_text(WARM_TEMPLATE)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "slow.py").write_text(BROKEN_HANDLER)
    options = RuntimeOptions(
        port=0, stack_name="lr-broken", endpoints=endpoints, template_path=tmp_path / "template.yaml"
    )
    runtime = LocalRuntime(options)
    with pytest.raises(FunctionError, match="RuntimeError: cannot initialise"):
        runtime.start()
    assert runtime.function("SlowFn").pids == []  # the failed start stopped what it had started


def test_an_environment_is_kept_after_a_handler_error_and_replaced_after_a_crash(
    runtime: LocalRuntime, project: Path
) -> None:
    function = runtime.function("LifecycleFn")
    first = function.invoke({})
    assert 1000 < first["remaining_ms"] <= 2000  # the template's Timeout: 2
    assert first["env"] == {
        "AWS_LAMBDA_FUNCTION_NAME": "lr-test-LifecycleFn",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        "LAMBDA_TASK_ROOT": str(project / "stubs"),
        "LIFECYCLE_ONLY": "mine",
    }

    with pytest.raises(FunctionError) as raised:
        function.invoke({"action": "raise"})
    assert (raised.value.error_type, raised.value.error_message) == ("ValueError", "asked to fail")
    with pytest.raises(FunctionError, match=r"Runtime\.MarshalError"):
        function.invoke({"action": "unserialisable"})
    assert function.invoke({})["pid"] == first["pid"]  # errors keep the environment

    with pytest.raises(FunctionError, match=r"Runtime\.ExitError"):
        function.invoke({"action": "exit"})
    second = function.invoke({})
    assert second["pid"] != first["pid"]  # a crashed environment is replaced
    assert not _alive(first["pid"])


def test_a_run_past_the_timeout_is_stopped_where_it_was(runtime: LocalRuntime, tmp_path: Path) -> None:
    function = runtime.function("LifecycleFn")
    before = function.invoke({})["pid"]
    marker = tmp_path / "finished"
    started = time.monotonic()
    with pytest.raises(FunctionTimeoutError, match="Timeout 2 s"):
        function.invoke({"action": "sleep", "seconds": 4, "then_touch": str(marker)})
    assert not _alive(before)
    time.sleep(max(0.0, started + 6 - time.monotonic()))  # well past when the run would have ended
    assert not marker.exists()  # the rest of the run never happened
    assert function.invoke({})["pid"] != before  # and the next call gets a fresh environment


def test_init_failures_are_reported_like_lambda(runtime: LocalRuntime) -> None:
    with pytest.raises(FunctionError) as raised:
        runtime.function("BrokenFn").invoke({})
    assert (raised.value.error_type, raised.value.error_message) == ("RuntimeError", "cannot initialise")
    with pytest.raises(TemplateError, match="noop has no function nothing"):
        runtime.function("MissingFn").invoke({})
    assert runtime.function("BrokenFn").pids == runtime.function("MissingFn").pids == []


# -- DynamoDB stream --------------------------------------------------------------------------------


def test_stream_batches_arrive_in_order_with_lambdas_shape(runtime: LocalRuntime, recorder: Recorder) -> None:
    events = recorder.wrap("StreamFn")
    ids = [f"order-{i:02d}" for i in range(25)]
    put_items(runtime, "ItemsTable", ids)
    client = ddb(runtime)
    client.update_item(
        TableName=runtime.table_names["ItemsTable"],
        Key={"id": {"S": "order-00"}},
        UpdateExpression="SET n = :two",
        ExpressionAttributeValues={":two": {"N": "2"}},
    )
    client.delete_item(TableName=runtime.table_names["ItemsTable"], Key={"id": {"S": "order-01"}})
    runtime.wait_until_idle(timeout=20)

    records = [record for event in events for record in event["Records"]]
    assert all(1 <= len(event["Records"]) <= 10 for event in events)  # BatchSize 10
    sequences = [int(record["dynamodb"]["SequenceNumber"]) for record in records]
    assert sequences == sorted(sequences)
    assert len(set(sequences)) == len(sequences)  # each record delivered once
    assert [r["dynamodb"]["Keys"]["id"]["S"] for r in records] == [*ids, "order-00", "order-01"]
    assert [r["eventName"] for r in records[-3:]] == ["INSERT", "MODIFY", "REMOVE"]

    modify = records[-2]
    assert set(modify) == {
        "eventID",
        "eventName",
        "eventVersion",
        "eventSource",
        "awsRegion",
        "dynamodb",
        "eventSourceARN",
    }
    assert modify["eventVersion"] == "1.1"
    assert modify["eventSource"] == "aws:dynamodb"
    assert modify["awsRegion"] == "us-east-1"
    assert modify["eventSourceARN"] == runtime.resources.tables["ItemsTable"].stream_arn
    body = modify["dynamodb"]
    assert isinstance(body["ApproximateCreationDateTime"], int | float)
    assert abs(body["ApproximateCreationDateTime"] - time.time()) < 120
    assert body["Keys"] == {"id": {"S": "order-00"}}
    assert body["NewImage"] == {"id": {"S": "order-00"}, "n": {"N": "2"}}
    assert body["OldImage"] == {"id": {"S": "order-00"}, "n": {"N": "1"}}
    assert body["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert isinstance(body["SizeBytes"], int)
    assert "NewImage" not in records[-1]["dynamodb"]


def test_partial_batch_failure_retries_from_lowest_reported_sequence(
    runtime: LocalRuntime, recorder: Recorder
) -> None:
    answers: list[Callable[[Any], Any]] = [
        lambda event: {"batchItemFailures": [{"itemIdentifier": "999999999"}]},  # not in batch: all failed
        lambda event: {
            "batchItemFailures": [
                {"itemIdentifier": event["Records"][4]["dynamodb"]["SequenceNumber"]},
                {"itemIdentifier": event["Records"][2]["dynamodb"]["SequenceNumber"]},
            ]
        },
        lambda event: {"batchItemFailures": []},
    ]

    def answer(event: Any) -> Any:
        return answers[min(len(events) - 1, 2)](event)

    events = recorder.wrap("StreamFn", answer)
    ids = [f"partial-{i}" for i in range(6)]
    paused_writes(runtime, "ItemsTable", ids)
    runtime.wait_until_idle(timeout=20)

    assert [ids_of(event) for event in events] == [ids, ids, ids[2:]]
    assert seqs_of(events[2]) == seqs_of(events[1])[2:]
    assert receive_all(runtime, "FailureQueue", 0) == []


def test_retries_are_bounded_then_the_on_failure_record_is_sent(
    runtime: LocalRuntime, recorder: Recorder
) -> None:
    def fail_if_bad(event: Any) -> Any:
        if "retry-bad" in ids_of(event):
            raise ValueError("poison")

    events = recorder.wrap("StreamFn", fail_if_bad)
    paused_writes(runtime, "ItemsTable", ["retry-a", "retry-bad", "retry-c"])
    runtime.wait_until_idle(timeout=20)
    put_items(runtime, "ItemsTable", ["retry-after"])  # the shard moves on past the failed batch
    runtime.wait_until_idle(timeout=20)

    batch = ["retry-a", "retry-bad", "retry-c"]
    assert [ids_of(event) for event in events] == [batch, batch, batch, ["retry-after"]]  # 1 + 2 retries
    (message,) = receive_all(runtime, "FailureQueue", 1)
    record = json.loads(message["Body"])
    sequences = seqs_of(events[0])
    streams = boto3.client(
        "dynamodbstreams",
        endpoint_url=runtime.dynamodb_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    stream_arn = runtime.resources.tables["ItemsTable"].stream_arn
    assert stream_arn is not None
    shard_ids = [
        shard["ShardId"]
        for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    ]
    assert set(record) == {"requestContext", "responseContext", "version", "timestamp", "DDBStreamBatchInfo"}
    assert set(record["requestContext"]) == {
        "requestId",
        "functionArn",
        "condition",
        "approximateInvokeCount",
    }
    assert record["requestContext"]["functionArn"] == runtime.function("StreamFn").arn
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["responseContext"] == {
        "statusCode": 200,
        "executedVersion": "$LATEST",
        "functionError": "Unhandled",
    }
    assert record["version"] == "1.0"
    assert ISO_MILLIS.match(record["timestamp"])
    info = record["DDBStreamBatchInfo"]
    assert set(info) == {
        "shardId",
        "startSequenceNumber",
        "endSequenceNumber",
        "approximateArrivalOfFirstRecord",
        "approximateArrivalOfLastRecord",
        "batchSize",
        "streamArn",
    }
    assert info["shardId"] in shard_ids
    assert (info["startSequenceNumber"], info["endSequenceNumber"]) == (sequences[0], sequences[-1])
    assert info["batchSize"] == 3
    assert info["streamArn"] == stream_arn
    assert ISO_SECONDS.match(info["approximateArrivalOfFirstRecord"])
    assert ISO_SECONDS.match(info["approximateArrivalOfLastRecord"])
    assert "Records" not in json.dumps(record)  # metadata only


def test_bisect_isolates_the_failing_record(runtime: LocalRuntime, recorder: Recorder) -> None:
    ids = [f"bisect-{i}" for i in range(8)]

    def fail_on_poison(event: Any) -> Any:
        if "bisect-5" in ids_of(event):
            raise ValueError("poison")

    events = recorder.wrap("BisectFn", fail_on_poison)
    paused_writes(runtime, "BisectTable", ids)
    runtime.wait_until_idle(timeout=20)

    assert (
        [ids_of(event) for event in events]
        == [
            ids,  # fails: split 4 + 4
            ids[0:4],
            ids[4:8],  # fails: split 2 + 2
            ids[4:6],  # fails: split 1 + 1
            ids[4:5],
            ids[5:6],  # fails alone: MaximumRetryAttempts 1 -> one retry
            ids[5:6],
            ids[6:8],
        ]
    )
    (message,) = receive_all(runtime, "BisectFailureQueue", 1)
    info = json.loads(message["Body"])["DDBStreamBatchInfo"]
    poison_sequence = seqs_of(events[5])[0]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (
        poison_sequence,
        poison_sequence,
        1,
    )
    assert json.loads(message["Body"])["requestContext"]["approximateInvokeCount"] == 2


def test_bisect_with_partial_response_retries_only_the_remainder(
    runtime: LocalRuntime, recorder: Recorder
) -> None:
    ids = [f"split-{i}" for i in range(5)]

    def report_third(event: Any) -> Any:
        if len(events) == 1:
            return {"batchItemFailures": [{"itemIdentifier": seqs_of(event)[3]}]}
        return None

    events = recorder.wrap("BisectFn", report_third)
    paused_writes(runtime, "BisectTable", ids)
    runtime.wait_until_idle(timeout=20)
    assert [ids_of(event) for event in events] == [ids, ids[3:]]


def test_wait_until_idle_reports_what_is_busy(runtime: LocalRuntime, recorder: Recorder) -> None:
    events = recorder.wrap("StreamFn")
    runtime.pause_stream()
    try:
        put_items(runtime, "ItemsTable", ["idle-1"])
        with pytest.raises(TimeoutError, match="paused"):
            runtime.wait_until_idle(timeout=1)
        assert events == []
    finally:
        runtime.resume_stream()
    runtime.wait_until_idle(timeout=20)
    assert [ids_of(event) for event in events] == [["idle-1"]]


# -- SQS --------------------------------------------------------------------------------------------


def test_sqs_partial_failures_are_retried_then_dead_lettered(
    runtime: LocalRuntime, recorder: Recorder
) -> None:
    client = sqs(runtime)
    queue_url = runtime.queue_urls["WorkQueue"]

    def fail_poison(event: Any) -> Any:
        failed = [r["messageId"] for r in event["Records"] if r["body"] == "poison"]
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}

    events = recorder.wrap("QueueFn", fail_poison)
    client.send_message_batch(
        QueueUrl=queue_url,
        Entries=[
            {
                "Id": "1",
                "MessageBody": "ok-1",
                "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "a"}},
            },
            {"Id": "2", "MessageBody": "poison"},
            {"Id": "3", "MessageBody": "ok-2"},
        ],
    )
    dead = receive_all(runtime, "WorkDeadLetters", 1)  # moto redrives after maxReceiveCount receives
    runtime.wait_until_idle(timeout=20)

    records = [record for event in events for record in event["Records"]]
    bodies = [record["body"] for record in records]
    assert sorted(bodies) == ["ok-1", "ok-2", "poison", "poison"]  # maxReceiveCount 2
    poison_counts = [r["attributes"]["ApproximateReceiveCount"] for r in records if r["body"] == "poison"]
    assert poison_counts == ["1", "2"]
    assert [message["Body"] for message in dead] == ["poison"]

    first = next(record for record in records if record["body"] == "ok-1")
    assert set(first) >= {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    }
    assert first["eventSource"] == "aws:sqs"
    assert first["eventSourceARN"] == runtime.resources.queues["WorkQueue"].arn
    assert first["awsRegion"] == "us-east-1"
    assert set(first["attributes"]) >= {
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
        "ApproximateFirstReceiveTimestamp",
    }
    assert first["messageAttributes"]["kind"] == {
        "stringValue": "a",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }
    attributes = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_sqs_function_error_fails_the_whole_batch(runtime: LocalRuntime, recorder: Recorder) -> None:
    calls: list[int] = []

    def flaky(event: Any) -> Any:
        calls.append(len(event["Records"]))
        if len(calls) == 1:
            raise RuntimeError("first delivery fails")

    recorder.wrap("QueueFn", flaky)
    sqs(runtime).send_message(QueueUrl=runtime.queue_urls["WorkQueue"], MessageBody="again")
    runtime.wait_until_idle(timeout=20)
    assert calls == [1, 1]
    assert receive_all(runtime, "WorkDeadLetters", 0) == []


# -- schedules --------------------------------------------------------------------------------------


def test_schedule_sends_scheduled_events(runtime: LocalRuntime, recorder: Recorder) -> None:
    ticks = recorder.wrap("TickFn")
    deadline = time.monotonic() + 5
    while not ticks:
        assert time.monotonic() < deadline, "no scheduled invocation"
        time.sleep(0.05)
    event = ticks[0]
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["region"] == "us-east-1"
    assert event["detail"] == {}
    assert event["resources"][0].startswith("arn:aws:events:us-east-1:")
    assert "TickFn" in event["resources"][0]
    assert ISO_SECONDS.match(event["time"])


# -- lifecycle --------------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_stop_leaves_no_processes_and_the_runtime_never_touches_os_environ(tmp_path: Path) -> None:
    (tmp_path / "template.yaml").write_text(
        "Transform: AWS::Serverless-2016-10-31\nResources:\n  Solo:\n    Type: AWS::SQS::Queue\n"
        "  Fn:\n    Type: AWS::Serverless::Function\n"
        "    Properties: {CodeUri: code/, Handler: noop.handler, Runtime: python3.12}\n"
    )
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "noop.py").write_text(NOOP_HANDLER)
    before = dict(os.environ)
    runtime = LocalRuntime(
        RuntimeOptions(port=0, stack_name="lr-stop", template_path=tmp_path / "template.yaml")
    )
    runtime.start()
    assert runtime.function("Fn").invoke({}) is None
    pids = runtime.endpoints.pids + runtime.function("Fn").pids
    assert len(pids) == 3  # DynamoDB Local, moto, one execution environment
    assert all(_alive(pid) for pid in pids)
    assert dict(os.environ) == before
    # What a test or a tool in another process uses instead
    client = runtime.client_environment()
    assert client["AWS_ENDPOINT_URL_SQS"] == runtime.sqs_url
    assert client["AWS_ENDPOINT_URL_DYNAMODB"] == runtime.dynamodb_url
    assert runtime.function_environment("Fn")["AWS_ENDPOINT_URL_SQS"] == runtime.sqs_url
    queue_url = runtime.queue_urls["Solo"]
    assert queue_url.endswith("/lr-stop-Solo")
    runtime.stop()
    runtime.stop()  # idempotent
    assert not any(_alive(pid) for pid in pids)
    assert dict(os.environ) == before


def test_missing_dynamodb_local_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DYNAMODB_LOCAL_JAR", raising=False)
    with pytest.raises(EndpointError, match="run `make deps`"):
        find_dynamodb_local_jar(tmp_path)
