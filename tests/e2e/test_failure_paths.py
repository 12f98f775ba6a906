"""Poison records travel stream -> retry queue -> operator queue without blocking anything else."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from hybrid_counter.keys import counter_key
from tests.e2e.conftest import eventually

pytestmark = pytest.mark.e2e


def test_poison_record_reaches_the_operator_queue_and_blocks_nothing(target, local_runtime):
    runtime = local_runtime
    dynamodb = boto3.client("dynamodb", endpoint_url=runtime.dynamodb_url)
    sqs = boto3.client("sqs", endpoint_url=runtime.sqs_url)
    poisoned = f"poison-{uuid.uuid4().hex[:8]}"
    healthy = f"healthy-{uuid.uuid4().hex[:8]}"

    # Given a counter item whose admission marker no code can interpret (a poison record), with
    # the stream held so that it and the traffic behind it are delivered together (the e2e
    # runtime's batching window is short: without the pause they could come in batches apart)
    runtime.pause_stream()
    dynamodb.update_item(
        TableName=runtime.table_name,
        Key=counter_key(poisoned),
        UpdateExpression="SET last_admission = :bad",
        ExpressionAttributeValues={":bad": {"S": "no-incarnation-here"}},
    )
    # And ordinary traffic right behind it on the stream
    for n in range(5):
        assert target.call("POST", f"/accounts/{healthy}/resources", {"name": f"r{n}"}).status_code == 201
    runtime.resume_stream()

    # Then the healthy account is counted (nothing blocked behind the poison record)
    def healthy_counted():
        assert target.call("GET", f"/accounts/{healthy}/usage").json()["eventual"] == 5

    eventually(healthy_counted, timeout=60)

    # And the poison record's batch went to the retry queue, failed there too, and now waits for
    # operators in the operator queue, as Lambda's metadata-only on-failure record
    operator_queue = runtime.queue_urls["OperatorQueue"]

    def in_operator_queue():
        messages = sqs.receive_message(
            QueueUrl=operator_queue, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=0
        ).get("Messages", [])
        assert messages
        return [json.loads(m["Body"]) for m in messages]

    bodies = eventually(in_operator_queue, timeout=90, interval=0.5)
    info = bodies[0]["DDBStreamBatchInfo"]
    assert info["streamArn"] == runtime.stream_arn
    assert int(info["startSequenceNumber"]) <= int(info["endSequenceNumber"])
    assert bodies[0]["requestContext"]["condition"] == "RetryAttemptsExhausted"
    retry_attrs = sqs.get_queue_attributes(
        QueueUrl=runtime.queue_urls["RetryQueue"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert retry_attrs["ApproximateNumberOfMessages"] == "0"
