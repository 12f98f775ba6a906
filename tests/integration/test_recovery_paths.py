"""Retry queue replays (metadata-only on-failure records) and the table-driven sweeper."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from hybrid_counter.counting import sweeper as sweeper_module
from hybrid_counter.counting.replay import Replayer, ReplayFailed
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.keys import counter_key
from hybrid_counter.resources import ResourceService
from tests.faults import injected

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
        Key=counter_key(account),
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


def test_trimmed_stream_records_ask_the_sweeper_for_an_audit_of_the_table(
    service, account, clients, counter, settings, stream, drain
):
    # Given an admitted resource whose stream records are gone (older than the 24-hour retention)
    resource, _ = service.create(account, "old", {})
    stream.records_for(account)  # lost: never delivered
    later = time.time() + settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    )
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
    # Then the message succeeds at once, leaving the work to the sweeper's audit
    assert outcome.audit_requested is True
    assert sweeper.audit_requested()
    assert service.usage(account).eventual == 0
    # which finds the uncounted resource in the table and counts it, once
    audit = sweeper.audit()
    assert audit.finished
    assert audit.report.counted >= 1
    assert not sweeper.audit_requested()
    sweeper.request_audit("again")
    sweeper.audit()
    assert service.usage(account).eventual == 1
    assert service.get(account, resource.resource_id) == resource


def unknown_admissions(service, clients, account, count):
    """Creates whose admission answered a 5xx without applying: live, uncounted, in PendingIndex."""
    with injected(clients.dynamodb_single_attempt, "UpdateItem", error="InternalServerError", times=count):
        fast = ResourceService(service._settings, clients, effects=Effects(waiter=Waiter(attempts=1)))
        return [fast.create(account, f"u{n}", {})[0].resource_id for n in range(count)]


def test_the_sweeper_counts_what_failure_paths_left_in_the_pending_index(
    service, account, clients, settings, counter, drain
):
    ids = unknown_admissions(service, clients, account, 3)
    drain(account)
    assert service.usage(account).eventual == 0  # no admission record: the stream cannot count them
    # The grace period protects creates still in flight
    now = Sweeper(settings.table_name, counter, settings.pending_grace_seconds, clients)
    assert now.sweep().found == 0
    later = time.time() + settings.pending_grace_seconds + 1
    sweep = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    ).sweep()
    assert sweep.report.counted == 3
    drain(account)  # the sweep's counter write shows best_effort < eventual: the stream path heals
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (3, 3)
    assert all(service.get(account, rid) for rid in ids)


def test_the_sweeper_sees_entries_older_than_an_hour(service, account, clients, settings, counter):
    unknown_admissions(service, clients, account, 1)
    hours_later = time.time() + 7200 + settings.pending_grace_seconds
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: hours_later
    )
    assert sweeper.sweep().report.counted == 1


def test_sweeper_racing_the_stream_counts_once(service, account, clients, settings, counter, stream):
    unknown_admissions(service, clients, account, 4)
    for n in range(4):
        service.create(account, f"r{n}", {})
    records = stream.records_for(account)
    later = time.time() + settings.pending_grace_seconds + 1
    Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    ).sweep()
    process_stream_batch(records, counter)
    assert service.usage(account).eventual == 8


def test_a_sweep_cut_off_by_its_budget_loses_nothing_and_the_next_run_goes_on(
    service, account, clients, settings, counter, monkeypatch
):
    monkeypatch.setattr(sweeper_module, "PAGE_SIZE", 2)
    unknown_admissions(service, clients, account, 5)
    later = time.time() + settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    )
    pages = iter(range(1000))
    first = sweeper.sweep(until=lambda: next(pages) >= 1)
    assert not first.finished
    second = sweeper.sweep()
    assert second.finished
    assert service.usage(account).eventual == 5


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
