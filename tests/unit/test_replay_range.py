"""A replay succeeds only if its read reached the range's end; otherwise nothing is applied and the
retry-queue message stays (to be received again, then to go to the operator queue).

The streams client is a real botocore client with a Stubber answering its two calls, which lets a
test stage what DynamoDB Local does not do on demand: empty pages before a shard's records, and a
shard that closes before the range's end.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hybrid_counter.aws import Clients
from hybrid_counter.counting import replay as replay_module
from hybrid_counter.counting.eventual import ApplyReport, EventualCounter
from hybrid_counter.counting.ops import Op
from hybrid_counter.counting.replay import Replayer, ReplayFailed
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.ops import cli
from tests.conftest import load_event

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-11-21T21:00:00.000"
SHARD = "shardId-00000001795296000000-1a2b3c4d"


class RecordingCounter(EventualCounter):
    """Applies nothing; records what it was asked to apply."""

    def __init__(self) -> None:
        self.applied: list[Op] = []

    def apply(self, ops: Sequence[Op]) -> ApplyReport:
        self.applied.extend(ops)
        return ApplyReport(counted=len(ops))


class RecordingSweeper(Sweeper):
    def __init__(self) -> None:
        self.audits: list[str] = []

    def request_audit(self, reason: str) -> None:
        self.audits.append(reason)


def admission(number: int) -> dict[str, Any]:
    """A counter item's MODIFY record (an admission) as GetRecords returns it."""
    record = copy.deepcopy(load_event("stream_modify_admission.json")["Records"][0])
    del record["eventSourceARN"]  # in Lambda's event only, not in GetRecords' answer
    record["dynamodb"]["SequenceNumber"] = f"{number:021d}"
    record["dynamodb"]["NewImage"]["last_admission"] = {"S": f"res-{number}#inc{number}"}
    return record


def insert(number: int) -> dict[str, Any]:
    """A resource item's INSERT record: no work for the stream path (an insert is not an admission)."""
    record = copy.deepcopy(load_event("stream_insert_resource.json")["Records"][0])
    del record["eventSourceARN"]
    record["dynamodb"]["SequenceNumber"] = f"{number:021d}"
    return record


def failure_record(start: int, end: int) -> dict[str, Any]:
    return {
        "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 4},
        "version": "1.0",
        "DDBStreamBatchInfo": {
            "shardId": SHARD,
            "startSequenceNumber": f"{start:021d}",
            "endSequenceNumber": f"{end:021d}",
            "batchSize": end - start + 1,
            "streamArn": STREAM_ARN,
        },
    }


class Shard:
    """Stubbed answers of the streams client: the iterator, then one page per ``page`` call."""

    def __init__(self, stubber: Stubber, start: int) -> None:
        self.stubber = stubber
        self.pages = 0
        stubber.add_response(
            "get_shard_iterator",
            {"ShardIterator": "it-0"},
            {
                "StreamArn": STREAM_ARN,
                "ShardId": SHARD,
                "ShardIteratorType": "AT_SEQUENCE_NUMBER",
                "SequenceNumber": f"{start:021d}",
            },
        )

    def page(self, records: list[dict[str, Any]], *, last: bool = False) -> None:
        answer: dict[str, Any] = {"Records": records}
        if not last:  # a closed shard's last page has no NextShardIterator
            answer["NextShardIterator"] = f"it-{self.pages + 1}"
        self.stubber.add_response("get_records", answer, {"ShardIterator": f"it-{self.pages}", "Limit": 1000})
        self.pages += 1


@pytest.fixture
def streams() -> Iterator[Stubber]:
    client = boto3.client(
        "dynamodbstreams", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(client) as stubber:
        yield stubber


def replayer_on(streams: Stubber, **options: Any) -> tuple[Replayer, RecordingCounter, RecordingSweeper]:
    counter, sweeper = RecordingCounter(), RecordingSweeper()
    clients = Clients(streams=streams.client)  # type: ignore[arg-type]
    return Replayer(counter, sweeper, clients, **options), counter, sweeper


def test_a_range_behind_more_empty_pages_than_the_bound_fails_and_applies_nothing(streams):
    # Given a range of 3 records that the shard gives only after 60 empty pages
    shard = Shard(streams, start=101)
    for _ in range(60):
        shard.page([])
    shard.page([admission(n) for n in (101, 102, 103)])
    replayer, counter, sweeper = replayer_on(streams)
    # When it is replayed
    with pytest.raises(ReplayFailed, match=f"{replay_module.MAX_EMPTY_PAGES} empty pages in a row"):
        replayer.replay(failure_record(101, 103))
    # Then the replay fails (the message stays) with nothing applied and no audit asked for
    assert (counter.applied, sweeper.audits) == ([], [])


def test_a_range_whose_shard_closes_before_its_end_fails_and_applies_nothing(streams):
    # Given a range 101..104 whose shard ends after 102 (its last page has no NextShardIterator)
    shard = Shard(streams, start=101)
    shard.page([admission(101)])
    shard.page([admission(102)], last=True)
    replayer, counter, sweeper = replayer_on(streams)
    # When it is replayed
    with pytest.raises(ReplayFailed, match="shard ended"):
        replayer.replay(failure_record(101, 104))
    # Then the replay fails with nothing applied, and the read says it stopped short
    assert (counter.applied, sweeper.audits) == ([], [])
    streams.assert_no_pending_responses()


def test_a_read_that_runs_out_of_time_before_the_end_fails(streams):
    # Given a range whose records come one per page, and a clock that moves 1 s per look
    shard = Shard(streams, start=101)
    for n in range(101, 111):
        shard.page([admission(n)])
    ticks = iter(range(1000))
    replayer, counter, _ = replayer_on(streams, read_seconds=3, clock=lambda: float(next(ticks)))
    # When it is replayed with 3 s to read it
    with pytest.raises(ReplayFailed, match="3 s spent"):
        replayer.replay(failure_record(101, 110))
    # Then it fails before applying anything
    assert counter.applied == []


def test_a_range_behind_a_few_empty_pages_is_read_to_its_end_and_applied(streams):
    # Given a range of 3 records after 10 empty pages, with a later record on the same page
    shard = Shard(streams, start=101)
    for _ in range(10):
        shard.page([])
    shard.page([admission(n) for n in (101, 102, 103, 104)])
    replayer, counter, _ = replayer_on(streams)
    # When it is replayed
    outcome = replayer.replay(failure_record(101, 103))
    # Then every record of the range, and none after it, is applied
    assert outcome.records_read == 3
    assert [getattr(op, "resource_id", None) for op in counter.applied] == ["res-101", "res-102", "res-103"]
    streams.assert_no_pending_responses()


def test_records_gone_still_ask_the_sweeper_for_an_audit(streams):
    # Given a range whose records were trimmed from the stream
    streams.add_client_error("get_shard_iterator", service_error_code="TrimmedDataAccessException")
    replayer, counter, sweeper = replayer_on(streams)
    # When it is replayed
    outcome = replayer.replay(failure_record(101, 103))
    # Then the message succeeds, the table's audit doing the work
    assert outcome.audit_requested is True
    assert (counter.applied, len(sweeper.audits)) == ([], 1)


class Sqs:
    """The retry or operator queue, as FailureQueue uses it: one message, never consumed by a peek."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.messages = [
            {
                "MessageId": "m-1",
                "ReceiptHandle": "r-1",
                "Body": json.dumps(body),
                "Attributes": {"ApproximateReceiveCount": "3", "SentTimestamp": "1795296600000"},
            }
        ]
        self.deleted: list[str] = []

    def receive_message(self, **_: Any) -> dict[str, Any]:
        return {"Messages": list(self.messages)}

    def change_message_visibility(self, **_: Any) -> None:
        pass

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> None:
        self.deleted.append(ReceiptHandle)
        self.messages = [m for m in self.messages if m["ReceiptHandle"] != ReceiptHandle]


def test_queue_replay_keeps_a_message_whose_range_was_not_read_to_its_end(streams):
    # Given an operator-queue message whose shard closes before the range's end (the part read
    # holds no work, so the test's own counter, which would write to DynamoDB, is never called)
    shard = Shard(streams, start=101)
    shard.page([insert(101)], last=True)
    sqs = Sqs(failure_record(101, 103))
    target = cli.Target(
        "t", {"operator": "https://sqs/operator", "retry": None}, Clients(streams=streams.client), sqs
    )
    # When the operator runs `hybrid-counter-ops queue replay m-1`
    results = cli.cmd_queue_replay(
        target, argparse.Namespace(queue="operator", all=False, message_ids=["m-1"])
    )
    # Then it reports the replay as failed and the message is still in the queue
    assert [(r["message_id"], r["replayed"]) for r in results] == [("m-1", False)]
    assert "shard ended" in results[0]["error"]
    assert (sqs.deleted, [m["MessageId"] for m in sqs.messages]) == ([], ["m-1"])
