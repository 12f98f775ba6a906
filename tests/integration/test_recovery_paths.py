"""Retry queue replays (metadata-only on-failure records) and the table-driven sweeper."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from hybrid_counter.counting.replay import Replayer, ReplayFailed
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper

pytestmark = pytest.mark.integration


def failure_record(records, stream_arn, shard_id):
    return {
        "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 4},
        "version": "1.0",
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }


def test_replay_rereads_the_range_from_the_stream_and_counts_once(
    service, account, stream, counter, sweeper_now, clients
):
    for n in range(4):
        service.create(account, f"r{n}", {})
    records = stream.records_for(account)
    shard_id = stream.shard_of(records[0])
    assert all(stream.shard_of(r) == shard_id for r in records)
    replayer = Replayer(counter, sweeper_now, clients)
    # The on-failure record carries metadata only; the replayer must fetch the records.
    outcome = replayer.replay(failure_record(records, stream.arn, shard_id))
    assert outcome.records_read >= len(records)
    assert service.usage(account).eventual == 4
    again = replayer.replay(failure_record(records, stream.arn, shard_id))
    assert again.report.counted == 0
    assert service.usage(account).eventual == 4


def test_replay_of_a_poison_record_fails_so_the_message_is_retried(
    service, account, stream, counter, sweeper_now, clients, settings
):
    service.create(account, "good", {})
    # A counter item with a malformed admission marker cannot be interpreted.
    clients.dynamodb.update_item(
        TableName=settings.table_name,
        Key={"pk": {"S": f"ACCOUNT#{account}"}, "sk": {"S": "COUNTER"}},
        UpdateExpression="SET last_admission = :bad",
        ExpressionAttributeValues={":bad": {"S": "malformed"}},
    )
    service.create(account, "after", {})
    records = stream.records_for(account)
    replayer = Replayer(counter, sweeper_now, clients)
    with pytest.raises(ReplayFailed):
        replayer.replay(failure_record(records, stream.arn, stream.shard_of(records[0])))
    # Everything else in the range was applied; only the poison record is left for operators.
    assert service.usage(account).eventual == 2


def test_trimmed_stream_records_fall_back_to_the_table(service, account, clients, counter, settings, stream):
    # Given an uncounted resource whose stream records are gone (older than the 24-hour retention)
    resource, _ = service.create(account, "old", {})
    sweeper = Sweeper(settings.table_name, counter, grace_seconds=0, clients=clients)
    with Stubber(clients.streams_client()) as streams:
        streams.add_client_error("get_shard_iterator", service_error_code="TrimmedDataAccessException")
        # When the retry queue replays its on-failure record
        outcome = Replayer(counter, sweeper, clients).replay(
            failure_record(
                [{"dynamodb": {"SequenceNumber": "000000000000000000001"}}],
                stream.arn,
                "shardId-00000001795296000000-1a2b3c4d",
            )
        )
    # Then the sweeper finished the pending work found in the table itself
    assert outcome.swept is True
    assert service.usage(account).eventual == 1
    assert service.get(account, resource.resource_id) == resource


def test_sweeper_finishes_soft_deleted_resources_the_stream_never_processed(
    service, account, sweeper_now, drain
):
    resource, _ = service.create(account, "a", {})
    drain(account)
    service.delete(account, resource.resource_id)
    # (no stream processing of the delete)
    outcome = sweeper_now.sweep(older_than_seconds=0)
    assert outcome.report.uncounted >= 1
    assert service.usage(account).eventual == 0
    assert service.list(account).items == []


def test_sweeper_respects_the_grace_period(service, account, sweeper_now):
    service.create(account, "fresh", {})
    outcome = sweeper_now.sweep(older_than_seconds=3600)
    assert service.usage(account).eventual == 0
    assert outcome.report.counted == 0


def test_sweeper_racing_the_stream_counts_once(service, account, sweeper_now, stream, counter):
    for n in range(10):
        service.create(account, f"r{n}", {})
    records = stream.records_for(account)
    sweeper_now.sweep(older_than_seconds=0)
    process_stream_batch(records, counter)
    assert service.usage(account).eventual == 10


def test_replay_that_cannot_read_the_stream_fails_and_applies_nothing(
    service, account, stream, counter, sweeper_now, clients
):
    service.create(account, "a", {})
    records = stream.records_for(account)
    with Stubber(clients.streams_client()) as streams:
        streams.add_response("get_shard_iterator", {"ShardIterator": "x" * 20})
        streams.add_client_error("get_records", service_error_code="LimitExceededException")
        with pytest.raises(ClientError):
            Replayer(counter, sweeper_now, clients).replay(
                failure_record(records, stream.arn, stream.shard_of(records[0]))
            )
    assert service.usage(account).eventual == 0  # the message will be received again
