"""`hybrid-counter-ops events tail`: what it prints, what it deletes, when it stops.

Events go the way they do on the stack: put on a bus, delivered by a rule into the queue, on
moto's `mock_aws` (its EventBridge delivers to SQS targets). The command against the local
runtime's state file: tests/integration/test_localrun_events.py.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from moto import mock_aws

from hybrid_counter.ops import cli
from hybrid_counter.ops.events_tail import (
    Backoff,
    QueueUnavailable,
    TailOptions,
    event_line,
    is_transient,
    tail,
)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SQS",
        "AWS_ENDPOINT_URL_EVENTBRIDGE",
        "EVENTS_QUEUE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TABLE_NAME", raising=False)
    with mock_aws():
        yield


class Stack:
    """A bus whose rule sends every hybrid-counter event to a queue, as template.yaml wires it."""

    def __init__(self) -> None:
        self.events: Any = boto3.client("events", region_name="us-east-1")
        self.sqs: Any = boto3.client("sqs", region_name="us-east-1")
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.bus = name
        self.events.create_event_bus(Name=name)
        self.queue_url = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        self.events.put_rule(
            Name=name,
            EventBusName=name,
            EventPattern=json.dumps({"source": ["hybrid-counter"]}),
            State="ENABLED",
        )
        self.events.put_targets(
            Rule=name, EventBusName=name, Targets=[{"Id": "q", "Arn": queue_arn["Attributes"]["QueueArn"]}]
        )

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        answer = self.events.put_events(
            Entries=[
                {
                    "EventBusName": self.bus,
                    "Source": "hybrid-counter",
                    "DetailType": detail_type,
                    "Detail": json.dumps(detail),
                }
            ]
        )
        assert answer["FailedEntryCount"] == 0

    def depth(self) -> tuple[int, int]:
        """(visible, in flight) messages."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


@pytest.fixture
def stack(aws: None) -> Stack:
    return Stack()


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_each_event_is_printed_as_one_line_then_deleted(stack: Stack) -> None:
    # Given two events on the bus and a message that is no event
    stack.publish("Quota Threshold Reached", {"account_id": "a1", "threshold": 80})
    stack.publish("Quota Limit Changed", {"account_id": "a1", "limit": 5})
    stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody="not json")

    # When the queue is tailed
    out = io.StringIO()
    printed = tail(stack.sqs, stack.queue_url, TailOptions(wait_seconds=1), out)

    # Then each is one JSON line (an event: its detail-type, time and detail), and the queue is empty
    assert printed == 3
    found = lines(out)
    assert {"body": "not json"} in found
    events = sorted((line for line in found if "body" not in line), key=lambda line: line["detail-type"])
    assert [(line["detail-type"], line["detail"]) for line in events] == [
        ("Quota Limit Changed", {"account_id": "a1", "limit": 5}),
        ("Quota Threshold Reached", {"account_id": "a1", "threshold": 80}),
    ]
    assert all(set(line) == {"detail-type", "time", "detail"} for line in events)
    assert all(line["time"].endswith("Z") for line in events)
    assert stack.depth() == (0, 0)


def test_max_prints_that_many_and_leaves_the_rest_in_the_queue(stack: Stack) -> None:
    for number in range(5):
        stack.publish("Quota Threshold Cleared", {"n": number})
    out = io.StringIO()

    assert tail(stack.sqs, stack.queue_url, TailOptions(max_events=2, wait_seconds=1), out) == 2

    assert len(lines(out)) == 2
    assert stack.depth() == (3, 0)  # the rest was never received


def test_nothing_is_deleted_that_could_not_be_printed(stack: Stack) -> None:
    stack.publish("Quota Threshold Reached", {"account_id": "a2"})

    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError("reader went away")

    with pytest.raises(BrokenPipeError):
        tail(stack.sqs, stack.queue_url, TailOptions(wait_seconds=1), ClosedPipe())

    assert stack.depth() == (0, 1)  # received and still there, visible again after its timeout


class InterruptedQueue:
    """The stack's SQS client, with a hook before each receive (numbered from 1)."""

    def __init__(self, stack: Stack, before_receive: Callable[[int], None]) -> None:
        self._stack, self._before, self.receives = stack, before_receive, 0

    def receive_message(self, **kwargs: Any) -> Any:
        self.receives += 1
        self._before(self.receives)
        return self._stack.sqs.receive_message(**kwargs)

    def delete_message_batch(self, **kwargs: Any) -> Any:
        return self._stack.sqs.delete_message_batch(**kwargs)


@pytest.mark.parametrize("follow", [False, True])
def test_follow_keeps_receiving_after_an_empty_poll_until_ctrl_c(stack: Stack, follow: bool) -> None:
    # Given one event now, none at the second receive, one more before the third, Ctrl-C at the fourth
    stack.publish("Quota Threshold Reached", {"seen": "first"})

    def before(receive: int) -> None:
        if receive == 3:
            stack.publish("Quota Threshold Reached", {"seen": "later"})
        if receive == 4:
            raise KeyboardInterrupt

    queue = InterruptedQueue(stack, before)
    out = io.StringIO()

    printed = tail(queue, stack.queue_url, TailOptions(wait_seconds=1, follow=follow), out)

    # Then without --follow the empty poll ends it; with it, Ctrl-C does, quietly
    expected = ["first", "later"] if follow else ["first"]
    assert [line["detail"]["seen"] for line in lines(out)] == expected
    assert (printed, queue.receives) == (len(expected), 4 if follow else 2)


def test_event_line_keeps_what_is_not_an_event() -> None:
    assert event_line('{"detail-type": "X", "time": "t", "detail": {}, "id": "1"}') == {
        "detail-type": "X",
        "time": "t",
        "detail": {},
    }
    assert event_line('["a"]') == {"body": ["a"]}
    assert event_line("plain") == {"body": "plain"}
    with pytest.raises(ValueError, match="at least 1 second"):
        TailOptions(follow=True, wait_seconds=0)


# -- the command -------------------------------------------------------------------------------


def test_the_command_tails_the_queue_it_is_given_without_a_table(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.publish("Quota Limit Changed", {"account_id": "a3"})
    stack.publish("Quota Limit Changed", {"account_id": "a4"})

    assert (
        cli.main(["--events-queue-url", stack.queue_url, "events", "tail", "--max", "1", "--wait", "1"]) == 0
    )

    (line,) = capsys.readouterr().out.splitlines()  # one JSON line, no summary after it
    assert json.loads(line)["detail"] in ({"account_id": "a3"}, {"account_id": "a4"})
    assert stack.depth() == (1, 0)


def test_the_queue_flag_wins_over_the_local_state(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "runtime.json"
    urls = {"OperatorQueue": "o", "RetryQueue": "r"}
    state.write_text(
        json.dumps(
            {
                "dynamodb_url": None,
                "sqs_url": None,
                "table_name": "t",
                "queue_urls": urls,
                "events_queue_url": "x",
            }
        )
    )
    stack.publish("Quota Limit Changed", {"account_id": "a5"})

    cli.main(
        ["--local", "--local-state", str(state), "--events-queue-url", stack.queue_url, "events", "tail"]
    )

    assert [json.loads(line)["detail"] for line in capsys.readouterr().out.splitlines()] == [
        {"account_id": "a5"}
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--table", "t", "events", "tail"], "no URL for the quota events queue"),
        (
            ["--events-queue-url", "http://q", "events", "tail", "--follow", "--wait", "0"],
            "at least 1 second",
        ),
        (["--events-queue-url", "http://q", "events", "tail", "--max", "0"], "at least 1"),
    ],
)
def test_the_command_says_what_is_missing(aws: None, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        cli.main(argv)


# -- following through failures ---------------------------------------------------------------------


def client_error(code: str, status: int) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "ReceiveMessage")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        pytest.param(EndpointConnectionError(endpoint_url="http://q"), True, id="connection refused"),
        pytest.param(ConnectionClosedError(endpoint_url="http://q"), True, id="connection reset"),
        pytest.param(ReadTimeoutError(endpoint_url="http://q"), True, id="read timeout"),
        pytest.param(ConnectTimeoutError(endpoint_url="http://q"), True, id="connect timeout"),
        pytest.param(client_error("ThrottlingException", 400), True, id="throttling"),
        pytest.param(client_error("RequestThrottled", 403), True, id="SQS throttling"),
        pytest.param(client_error("InternalError", 500), True, id="a 500"),
        pytest.param(client_error("ServiceUnavailable", 503), True, id="a 503"),
        pytest.param(QueueUnavailable("waiting for make dev"), True, id="local state missing"),
        pytest.param(client_error("AWS.SimpleQueueService.NonExistentQueue", 400), False, id="no such queue"),
        pytest.param(client_error("AccessDenied", 403), False, id="access denied"),
        pytest.param(NoCredentialsError(), False, id="no credentials"),
    ],
)
def test_following_waits_out_only_what_may_pass(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


def test_the_pause_between_retries_doubles_up_to_its_cap_and_starts_again_after_a_success() -> None:
    backoff = Backoff(first=0.5, cap=4.0)
    assert [backoff.pause() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.reset()
    assert backoff.pause() == 0.5


def test_an_injected_throttling_error_is_noted_and_the_follow_goes_on(stack: Stack) -> None:
    # Given a client whose first two receives fail as throttled (a botocore hook raising before the call)
    stack.publish("Quota Threshold Reached", {"seen": "after throttling"})
    failures = [client_error("ThrottlingException", 400), client_error("ThrottlingException", 400)]

    def throttle(**_: Any) -> None:
        if failures:
            raise failures.pop()

    stack.sqs.meta.events.register("before-call.sqs.ReceiveMessage", throttle)
    out = io.StringIO()
    notes: list[str] = []
    pauses: list[float] = []

    # When the queue is followed
    printed = tail(
        stack.sqs,
        stack.queue_url,
        TailOptions(wait_seconds=1, follow=True, max_events=1),
        out,
        warn=notes.append,
        sleep=pauses.append,
    )

    # Then each failure was a note and a growing pause, and the event was printed after them
    assert printed == 1
    assert [line["detail"] for line in lines(out)] == [{"seen": "after throttling"}]
    assert len(notes) == 2
    assert all("cannot receive (ClientError" in note and "ThrottlingException" in note for note in notes)
    assert pauses == [0.5, 1.0]


def test_a_failure_that_cannot_pass_ends_the_follow_with_one_line(stack: Stack) -> None:
    # Given a queue URL that names no queue
    missing = stack.queue_url + "-gone"

    # When the command follows it
    with pytest.raises(SystemExit, match="events tail: QueueDoesNotExist") as ended:
        cli.main(["--events-queue-url", missing, "events", "tail", "--follow", "--wait", "1"])

    # Then it ends with that one line (main prints it, not a traceback)
    assert "\n" not in str(ended.value)
