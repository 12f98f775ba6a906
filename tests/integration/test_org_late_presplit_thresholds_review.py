"""Review 40 (hostile, fixed: design.md §10.7a): threshold judgement of a split organization when a batch from before its split is
delivered late (the retry queue: a failed batch's records are replayed after later ones)."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.keys import account_pk, org_pk
from tests.integration.test_governance import (
    EventfulOrg,
    bus,
    crossings,
    gov,
    gov_clients,
    gov_settings,
    watcher,
)

pytestmark = pytest.mark.integration
__all__ = ["bus", "gov", "gov_clients", "gov_settings", "watcher"]  # the fixtures
SEATS = "seats"


def event_keys(org: EventfulOrg) -> list[tuple[str, str]]:
    import json

    response = org.gov._clients.dynamodb.query(
        TableName=org.gov._settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :event)",
        ExpressionAttributeValues={":pk": {"S": org_pk(org.org_id)}, ":event": {"S": "EVENT#"}},
        ConsistentRead=True,
    )
    found = []
    for item in response["Items"]:
        text = item.get("event", item.get("events_log", {})).get("S", "{}")
        found.append((item["sk"]["S"], json.loads(text)["detail"]["event_id"]))
    return sorted(found)


def rows(gov: Any, org: EventfulOrg) -> list[tuple[int, int]]:
    listed = gov.usage_over(threshold=80, kind=SEATS, page_size=100).rows
    return sorted((r.threshold, r.used) for r in listed if r.owner == org.org_id)


def test_a_batch_from_before_the_split_delivered_late_announces_nothing_again_and_lists_once(
    gov, stream, counter, watcher, bus
):
    # Given an organization of 10 seats on one counter item whose members create 8 (80 %), the
    # organization's partition's batch failing (it waits in the retry queue); the members' batches
    # are counted
    org = EventfulOrg(gov, stream, counter, watcher, bus, 1)
    org.create(8)
    late = stream.records_of(org_pk(org.org_id))
    assert late
    for member in org.members:
        records = stream.records_of(account_pk(member))
        assert process_stream_batch(records, counter, watcher).failed_sequence_numbers == []
    # When it is split over 4 items and a ninth seat is created, the stream path going on past the
    # failed batch: Reached 80 once, from the split state
    gov.set_org_shards(org.org_id, 4)
    org.create(1)
    org.pump()
    assert crossings(org.events()) == [("Reached", 80)]
    assert rows(gov, org) == [(80, 9)]
    # ... and then the retry queue replays the failed batch from before the split
    assert process_stream_batch(late, counter, watcher).failed_sequence_numbers == []
    org.pump()
    listed_after_replay, keys = rows(gov, org), event_keys(org)
    # ... and its members delete every seat
    org.delete(9)
    org.pump(times=2)
    listed_when_empty = rows(gov, org)
    # Then the near-limit list named it once, and names it no more once it holds nothing; and the
    # crossing has one outbox/log item
    assert (listed_after_replay, listed_when_empty, len(keys)) == ([(80, 9)], [], 1), keys


def test_a_batch_from_before_the_split_delivered_late_never_announces_a_crossing_twice(
    gov, stream, counter, watcher, bus
):
    # Given an organization of 10 seats on one counter item whose members create all 10 (100 %),
    # the organization's partition's batch failing (it waits in the retry queue)
    org = EventfulOrg(gov, stream, counter, watcher, bus, 1)
    org.create(10)
    late = stream.records_of(org_pk(org.org_id))
    for member in org.members:
        records = stream.records_of(account_pk(member))
        assert process_stream_batch(records, counter, watcher).failed_sequence_numbers == []
    # When it is split over 4 items, a seat is deleted (9 of 10) and the stream path goes on:
    # Reached 80 (the split state's first judgement); 2 more are deleted (7 of 10): Cleared 80
    gov.set_org_shards(org.org_id, 4)
    org.delete(1)
    org.pump()
    org.delete(2)
    org.pump()
    seen = org.events()
    assert crossings(seen) == [("Reached", 80), ("Cleared", 80)]
    # ... the retry queue replays the failed batch from before the split ...
    assert process_stream_batch(late, counter, watcher).failed_sequence_numbers == []
    org.pump()
    seen += org.events()
    # ... and 3 seats are created again (10 of 10)
    org.create(3)
    org.pump(times=2)
    seen += org.events()
    # Then (deduped on event_id, as consumers do) Reached 100 is announced once: it was never
    # cleared in between
    reached_100 = sorted(
        {
            e["detail"]["event_id"]
            for e in seen
            if e["detail-type"].endswith("Reached") and e["detail"]["threshold"] == 100
        }
    )
    assert len(reached_100) == 1, (reached_100, [(e["detail-type"], e["detail"]["event_id"]) for e in seen])
