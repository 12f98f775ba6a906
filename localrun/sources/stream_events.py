"""The JSON Lambda exchanges for DynamoDB Streams: the event records and the on-failure record."""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class StreamRecord:
    """One record read from a shard, already in Lambda's event shape."""

    event: dict[str, Any]
    sequence_number: str
    arrival: datetime  # ApproximateCreationDateTime
    fetched_at: float  # time.monotonic() when GetRecords returned it
    size: int  # bytes of its JSON, for the invocation payload limit

    @property
    def sequence(self) -> int:
        return int(self.sequence_number)


def _jsonable(value: Any) -> Any:
    """AttributeValue JSON as DynamoDB Streams sends it: binary values base64-encoded."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | set | tuple):
        return [_jsonable(item) for item in value]
    return value


def _epoch(value: datetime) -> int | float:
    seconds = value.timestamp()
    return int(seconds) if seconds.is_integer() else seconds


def stream_record(raw: dict[str, Any], stream_arn: str, region: str) -> StreamRecord:
    """Convert a GetRecords record (boto3 shape) to a Lambda event record."""
    dynamodb: dict[str, Any] = {}
    arrival = datetime.now(UTC)
    for key, value in raw["dynamodb"].items():
        if key == "ApproximateCreationDateTime" and isinstance(value, datetime):
            arrival = value.astimezone(UTC)
            dynamodb[key] = _epoch(value)
        else:
            dynamodb[key] = _jsonable(value)
    event: dict[str, Any] = {
        "eventID": raw["eventID"],
        "eventName": raw["eventName"],
        "eventVersion": raw.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }
    if "userIdentity" in raw:
        event["userIdentity"] = _jsonable(raw["userIdentity"])
    sequence_number = str(dynamodb["SequenceNumber"])
    return StreamRecord(
        event=event,
        sequence_number=sequence_number,
        arrival=arrival,
        fetched_at=time.monotonic(),
        size=len(json.dumps(event)),
    )


def _iso_seconds(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso_millis(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def on_failure_record(
    *,
    function_arn: str,
    shard_id: str,
    stream_arn: str,
    records: list[StreamRecord],
    invoke_count: int,
    condition: str = "RetryAttemptsExhausted",
) -> dict[str, Any]:
    """The invocation record Lambda sends to an on-failure destination: metadata, no records."""
    return {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": _iso_millis(datetime.now(UTC)),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": records[0].sequence_number,
            "endSequenceNumber": records[-1].sequence_number,
            "approximateArrivalOfFirstRecord": _iso_seconds(records[0].arrival),
            "approximateArrivalOfLastRecord": _iso_seconds(records[-1].arrival),
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }
