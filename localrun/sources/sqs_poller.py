"""An SQS event source mapping, played locally against the moto SQS server.

Like Lambda's SQS poller: long-poll ReceiveMessage (WaitTimeSeconds 1 here, so that
stopping is quick) for up to BatchSize messages (at most 10 per call; with
MaximumBatchingWindowInSeconds, further calls fill the batch until it is full or
the window has passed), with all system and message attributes, and invoke the
function with Lambda's SQS event:
{"Records": [{messageId, receiptHandle, body, attributes {ApproximateReceiveCount,
SentTimestamp, SenderId, ApproximateFirstReceiveTimestamp, ...}, messageAttributes
({stringValue, binaryValue, stringListValues, binaryListValues, dataType}),
md5OfBody, eventSource "aws:sqs", eventSourceARN, awsRegion}]}.

Messages of a successful batch are deleted. A function error fails every message;
with ReportBatchItemFailures, a response listing `{"itemIdentifier": <messageId>}`
fails just those (an unknown, empty or missing id fails the batch; see
`localrun.sources.batch_response`). Failed messages stay in the queue to be received again;
after the queue's maxReceiveCount receives, SQS itself (moto, from the template's
RedrivePolicy) moves them to the dead-letter queue.

Local deviation: AWS leaves a failed message invisible until the queue's
VisibilityTimeout ends (360 s for a queue sized for a 60 s function); locally its
visibility is cut to `failure_visibility_seconds` (default 1 s) so retries and the
redrive to the dead-letter queue happen in seconds. One batch is processed at a time
per mapping (AWS scales out to several concurrent batches).
"""

from __future__ import annotations

import base64
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localrun.sources.batch_response import SUCCESS, BatchOutcome, failed, read_batch_response

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = logging.getLogger("localrun.sqs")

_LAMBDA_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
    "DeadLetterQueueSourceArn",
    "AWSTraceHeader",
)


@dataclass(frozen=True)
class QueueMapping:
    function_name: str
    invoke: Callable[[dict[str, Any]], Any]
    queue_url: str
    queue_arn: str
    batch_size: int
    batching_window_seconds: float
    report_batch_item_failures: bool
    failure_visibility_seconds: float
    region: str


def _binary(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return str(value)


def _message_attributes(raw: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {}
    for name, value in raw.items():
        entry: dict[str, Any] = {}
        if "StringValue" in value:
            entry["stringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            entry["binaryValue"] = _binary(value["BinaryValue"])
        entry["stringListValues"] = list(value.get("StringListValues", []))
        entry["binaryListValues"] = [_binary(item) for item in value.get("BinaryListValues", [])]
        entry["dataType"] = value.get("DataType", "String")
        converted[name] = entry
    return converted


def sqs_record(message: MessageTypeDef, queue_arn: str, region: str) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": {name: attributes[name] for name in _LAMBDA_ATTRIBUTES if name in attributes},
        "messageAttributes": _message_attributes(dict(message.get("MessageAttributes", {}))),
        "md5OfBody": message.get("MD5OfBody", ""),
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    record.update({"eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": region})
    return record


class SqsPoller:
    def __init__(self, mapping: QueueMapping, sqs: SQSClient) -> None:
        self.mapping = mapping
        self._sqs = sqs
        self.stopping = threading.Event()
        self.in_flight = False
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="localrun-sqs", daemon=True)

    @property
    def name(self) -> str:
        return f"{self.mapping.function_name} <- {self.mapping.queue_url.rsplit('/', 1)[-1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def join(self, timeout: float = 10.0) -> None:
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                messages = self._receive()
                if messages:
                    self._process(messages)
            except Exception:
                log.exception("%s: polling error; retrying", self.name)
                self.stopping.wait(1.0)

    def _receive(self) -> list[MessageTypeDef]:
        mapping = self.mapping
        messages: list[MessageTypeDef] = []
        deadline = time.monotonic() + mapping.batching_window_seconds
        while not self.stopping.is_set():
            response = self._sqs.receive_message(
                QueueUrl=mapping.queue_url,
                MaxNumberOfMessages=min(10, mapping.batch_size - len(messages)),
                WaitTimeSeconds=1,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages.extend(response.get("Messages", []))
            # Messages received so far are invisible in the queue, so `busy()` still sees them.
            if len(messages) >= mapping.batch_size or time.monotonic() >= deadline:
                break
        return messages

    def _process(self, messages: list[MessageTypeDef]) -> None:
        mapping = self.mapping
        self.in_flight = True
        try:
            event = {
                "Records": [sqs_record(message, mapping.queue_arn, mapping.region) for message in messages]
            }
            outcome = self._invoke(event, [message["MessageId"] for message in messages])
            failed_ids = (
                {message["MessageId"] for message in messages}
                if outcome.whole_batch_failed
                else outcome.failed_ids
            )
            done = [message for message in messages if message["MessageId"] not in failed_ids]
            retry = [message for message in messages if message["MessageId"] in failed_ids]
            self._delete(done)
            self._make_visible_soon(retry)
            if retry:
                log.info(
                    "%s: %d of %d message(s) failed (%s)",
                    self.name,
                    len(retry),
                    len(messages),
                    outcome.reason,
                )
            self.batches += 1
        finally:
            self.in_flight = False

    def _invoke(self, event: dict[str, Any], ids: list[str]) -> BatchOutcome:
        try:
            response = self.mapping.invoke(event)
        except Exception as error:
            log.warning("%s: function error: %s: %s", self.name, type(error).__name__, error)
            return failed(f"function error {type(error).__name__}")
        if not self.mapping.report_batch_item_failures:
            return SUCCESS
        return read_batch_response(response, set(ids), report_item_failures=True)

    def _delete(self, messages: list[MessageTypeDef]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            response = self._sqs.delete_message_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            for failure in response.get("Failed", []):
                log.warning("%s: delete failed: %s", self.name, failure)

    def _make_visible_soon(self, messages: list[MessageTypeDef]) -> None:
        timeout = max(0, math.ceil(self.mapping.failure_visibility_seconds))
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            self._sqs.change_message_visibility_batch(
                QueueUrl=self.mapping.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": timeout}
                    for i, m in enumerate(chunk)
                ],
            )

    # -- idleness ---------------------------------------------------------------------------------

    def busy(self) -> list[str]:
        if self.in_flight:
            return [f"{self.name}: batch in flight"]
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.mapping.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        counts = {
            name.removeprefix("ApproximateNumberOfMessages") or "Visible": int(value)
            for name, value in attributes.items()
        }
        waiting = {name: count for name, count in counts.items() if count}
        if waiting:
            described = ", ".join(f"{count} {name.lower()}" for name, count in waiting.items())
            return [f"{self.name}: {described} message(s)"]
        return []

    def progress(self) -> int:
        return self.batches
