"""The stream path: each resource counted exactly once, whatever the delivery."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.keys import resource_key
from tests.faults import injected

pytestmark = pytest.mark.integration


def test_duplicate_delivery_counts_once(service, account, stream, counter):
    for n in range(5):
        service.create(account, f"r{n}", {})
    records = stream.records_for(account)
    assert process_stream_batch(records, counter).failed_sequence_numbers == []
    report = process_stream_batch(records, counter).report  # delivered again
    assert report.counted == 0
    assert report.already_done == 5
    assert service.usage(account).eventual == 5


def test_two_workers_on_the_same_batch_count_once(service, account, stream, settings, clients):
    for n in range(30):
        service.create(account, f"r{n}", {})
    records = stream.records_for(account)
    outcomes = []

    def worker():
        outcomes.append(
            process_stream_batch(records, EventualCounter(settings.table_name, "batched", clients))
        )

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(o.failed_sequence_numbers == [] for o in outcomes)
    assert sum(o.report.counted for o in outcomes) == 30
    assert service.usage(account).eventual == 30


def test_a_resource_deleted_before_the_stream_counted_it_is_never_counted(service, account, stream, counter):
    # Given a resource admitted and deleted before the stream counted it
    resource, _ = service.create(account, "a", {})
    admission = stream.records_for(account)
    service.delete(account, resource.resource_id)
    delete = stream.records_for(account)
    # When the delete's records are processed first and the admission (retried) afterwards
    process_stream_batch(delete, counter)
    report = process_stream_batch(admission, counter).report
    # Then nothing is counted (the delete's claim made the count moot) and the resource is gone
    assert report.counted == 0
    assert (service.usage(account).eventual, service.usage(account).best_effort) == (0, 0)
    assert service.list(account).items == []


def test_a_release_whose_delete_did_not_remove_the_item_is_finished_by_the_stream(
    service, account, stream, counter, clients, settings
):
    # Given a delete that released its resource and was cut off before removing it
    service.create(account, "a", {}, resource_id="a")
    process_stream_batch(stream.records_for(account), counter)
    with injected(clients.dynamodb, "DeleteItem", error="ProvisionedThroughputExceededException", times=10):
        service.delete(account, "a")  # answered 204: the release applied
    assert service.get(account, "a")  # still claimed, visible
    # When the stream delivers the release
    report = process_stream_batch(stream.records_for(account), counter).report
    # Then the stream path removes the item; the counters already dropped with the release
    assert report.finished_deletes == 1
    assert "Item" not in clients.dynamodb.get_item(
        TableName=settings.table_name, Key=resource_key(account, "a"), ConsistentRead=True
    )
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (0, 0)


def test_a_conflict_on_a_resource_action_is_retried_not_taken_for_done(
    service, account, stream, counter, clients
):
    # Given an admission record, and its counting transaction cancelled once by a conflict on the
    # resource's action (another transaction held the item)
    service.create(account, "a", {})
    records = stream.records_for(account)
    with injected(clients.dynamodb, "TransactWriteItems", error="TransactionCanceledException") as fault:
        outcome = process_stream_batch(records, counter)
    # Then the count is retried and lands: a conflict is not "already counted"
    assert fault.fired == 1
    assert outcome.failed_sequence_numbers == []
    assert outcome.report.counted == 1
    assert service.usage(account).eventual == 1


def test_more_than_100_records_are_counted_in_chunks(service, account, stream, counter):
    service.set_limit(account, 1000)
    for n in range(250):
        service.create(account, f"r{n}", {})
    report = process_stream_batch(stream.records_for(account), counter).report
    assert report.counted == 250
    assert report.transactions == 3
    assert service.usage(account).eventual == 250


def test_per_record_mode_gives_the_same_counts_with_more_transactions(
    service, account, stream, settings, clients
):
    for n in range(12):
        service.create(account, f"r{n}", {})
    per_record = EventualCounter(settings.table_name, "per_record", clients)
    report = process_stream_batch(stream.records_for(account), per_record).report
    assert (report.counted, report.transactions) == (12, 12)
    assert service.usage(account).eventual == 12


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_any_order_and_any_duplication_of_deliveries_gives_the_true_count(
    service, new_account, stream, counter, seed
):
    rng = random.Random(seed)
    account = new_account()
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(6)]
    for resource_id in rng.sample(ids, 3):
        service.delete(account, resource_id)
    records = stream.records_for(account)
    deliveries = records + rng.sample(records, rng.randint(0, len(records)))
    rng.shuffle(deliveries)
    for start in range(0, len(deliveries), 4):
        process_stream_batch(deliveries[start : start + 4], counter)
    assert (service.usage(account).eventual, service.usage(account).best_effort) == (3, 3)
    assert len(service.list(account).items) == 3
