"""Look into the retry and operator queues without consuming them, and replay or drop messages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hybrid_counter.counting.replay import BatchInfo, Replayer, ReplayFailed, ReplayOutcome

PEEK_VISIBILITY_SECONDS = 20


@dataclass(frozen=True)
class QueuedFailure:
    message_id: str
    receipt_handle: str
    body: dict[str, Any]
    receive_count: int
    sent_at: str

    @property
    def batch(self) -> BatchInfo | None:
        try:
            return BatchInfo.from_failure_record(self.body)
        except ReplayFailed:
            return None

    def summary(self) -> dict[str, Any]:
        batch = self.batch
        return {
            "message_id": self.message_id,
            "sent_at": self.sent_at,
            "receive_count": self.receive_count,
            "condition": self.body.get("requestContext", {}).get("condition"),
            "shard_id": batch.shard_id if batch else None,
            "first_sequence_number": batch.start if batch else None,
            "last_sequence_number": batch.end if batch else None,
            "batch_size": batch.batch_size if batch else None,
        }


class FailureQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self.url = queue_url

    def peek(self, limit: int = 100) -> list[QueuedFailure]:
        """Read up to ``limit`` messages and make them visible again at once."""
        seen: dict[str, QueuedFailure] = {}
        while len(seen) < limit:
            messages = self._sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=min(10, limit - len(seen)),
                VisibilityTimeout=PEEK_VISIBILITY_SECONDS,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen[message["MessageId"]] = _parse(message)
        for failure in seen.values():
            self._sqs.change_message_visibility(
                QueueUrl=self.url, ReceiptHandle=failure.receipt_handle, VisibilityTimeout=0
            )
        return sorted(seen.values(), key=lambda f: f.sent_at)

    def find(self, message_id: str) -> QueuedFailure | None:
        return next((f for f in self.peek(1000) if f.message_id == message_id), None)

    def delete(self, failure: QueuedFailure) -> None:
        fresh = self._claim(failure.message_id)
        self._sqs.delete_message(QueueUrl=self.url, ReceiptHandle=fresh.receipt_handle)

    def replay(self, failure: QueuedFailure, replayer: Replayer) -> ReplayOutcome:
        """Apply the failed batch again (from the stream, or from the table if it is trimmed);
        the message is deleted only when that succeeded."""
        outcome = replayer.replay(failure.body)
        self.delete(failure)
        return outcome

    def _claim(self, message_id: str) -> QueuedFailure:
        """Receive the message again so its receipt handle is current."""
        for _ in range(50):
            messages = self._sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=PEEK_VISIBILITY_SECONDS,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                break
            found = None
            for message in messages:
                if message["MessageId"] == message_id:
                    found = _parse(message)
                else:
                    self._sqs.change_message_visibility(
                        QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )
            if found is not None:
                return found
        raise LookupError(f"message {message_id} is not in {self.url}")


def _parse(message: dict[str, Any]) -> QueuedFailure:
    attributes = message.get("Attributes", {})
    sent = int(attributes.get("SentTimestamp", "0")) / 1000
    try:
        body = json.loads(message["Body"])
    except json.JSONDecodeError:
        body = {"unparseable_body": message["Body"]}
    return QueuedFailure(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        body=body if isinstance(body, dict) else {"body": body},
        receive_count=int(attributes.get("ApproximateReceiveCount", "0")),
        sent_at=datetime.fromtimestamp(sent, UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    )
