"""The stream path: each resource counted exactly once, whatever the delivery."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.keys import counter_key

pytestmark = pytest.mark.integration


def counter_item(clients, settings_, account):
    return clients.dynamodb.get_item(
        TableName=settings_.table_name, Key=counter_key(account), ConsistentRead=True
    ).get("Item", {})


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


def test_delete_processed_before_its_create_was_counted(service, account, stream, counter, clients, settings):
    # Given a resource admitted and deleted before the stream counted it
    resource, _ = service.create(account, "a", {})
    admission = stream.records_for(account)
    service.delete(account, resource.resource_id)
    soft_delete = stream.records_for(account)
    # When the delete is processed first and the admission (retried) afterwards
    process_stream_batch(soft_delete, counter)
    process_stream_batch(admission, counter)
    # Then nothing is counted, the resource is gone, and no uncounting token is left behind
    assert service.usage(account).eventual == 0
    assert service.usage(account).best_effort == 0
    assert "uncounting" not in counter_item(clients, settings, account)
    assert service.list(account).items == []


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
    assert service.usage(account).eventual == 3
    assert len(service.list(account).items) == 3
