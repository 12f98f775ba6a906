"""Review 34 (hostile): what a process judged of an organization (its cache, F1, and the stream's
threshold judgements, events numbered epoch_base + alert_seq) against the organization deleted and
created again under its id. Against DynamoDB Local, through the fixtures of test_split_review /
test_org_deletion_review.
"""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.keys import org_pk
from tests.integration.test_governance import watcher_of
from tests.integration.test_org_deletion_races import created_again
from tests.integration.test_org_deletion_review import crossed_80_then_deleted, event_ids, written_before
from tests.integration.test_split_review import SEATS, split_org

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


@pytest.mark.parametrize("watcher_kept", [True, False], ids=["kept", "control-fresh-process"])
@pytest.mark.parametrize("shards", [1, 2])
def test_the_stream_judges_a_split_organization_created_again_by_its_own_plan(
    split_org, shards, watcher_kept
):
    # Given an organization of 10 seats (over 1 or 2 items) whose member reached 80 %, judged by
    # the stream function's process (which so cached the organization: its plan of 10)
    # ... then emptied, its member gone, and deleted by another process
    org = split_org(10, shards, members=1)
    watcher, first = crossed_80_then_deleted(org)
    # When it is created again under its id on a plan of 2 seats split over 2 items, and its new
    # member takes both seats (another process), within the stream process's cache time
    _, member = created_again(org, 2, 2)
    creator = org.new_service()
    for _ in range(2):
        rid = org.rid_on(0, 2)
        creator.create(member, rid, {}, rid, kind=SEATS)
    if not watcher_kept:  # (control: a stream process that never saw the old creation)
        watcher = watcher_of(org.new_service(), org.settings, org.clients)
    outcome = process_stream_batch(org.stream.records_of(org_pk(org.org_id)), org.counter, watcher)
    assert outcome.failed_sequence_numbers == []
    # Then the new organization's crossings of 80 % and 100 % of its 2 seats are announced (it
    # holds 2 of 2), judged by its own plan, not by the old creation's cached 10
    ids = [i for i in event_ids(org) if i != first]
    assert sorted(i.split("/")[-2] for i in ids) == ["100", "80"], ids


def test_the_usage_of_a_new_member_without_counters_shows_the_new_creations_limit(split_org):
    # Given an organization of 10 seats whose member used seats, read by a process (its plan of
    # 10 cached), then deleted by another process and created again under its id on a plan of 1
    org = split_org(10, 1, members=1)
    account = org.accounts[0]
    written_before(org, account)
    process = org.new_service()
    process.org_usage(org.org_id)
    other = org.new_service()
    assert other.remove_member(org.org_id, account)
    other.delete_org(org.org_id)
    plan, _ = created_again(org, 1)
    # ... and an account on a plan that lists seats, with no counter item yet, joins it
    newcomer = f"n-{uuid.uuid4().hex[:8]}"
    other.assign_plan(newcomer, plan)
    assert other.add_member(org.org_id, newcomer)
    fresh = org.new_service().usage(newcomer).kinds[SEATS].org  # (control: a fresh process)
    assert fresh is not None
    assert fresh.limit == 1
    # When the process reads the newcomer's usage within its cache's time
    room = process.usage(newcomer).kinds[SEATS].org
    # Then its organization's room shows the new creation's limit of 1, not the old one's 10
    assert room is not None
    assert room.limit == 1


def test_a_crossing_of_the_deleted_creation_delivered_again_after_the_id_was_created_again(split_org):
    # Given an organization of 10 seats (one item) whose member reached 80 %: its crossing's
    # batch judged, its event recorded (and kept, as the log keeps it)
    org = split_org(10, 1, members=1)
    watcher = watcher_of(org.new_service(), org.settings, org.clients)
    account = org.accounts[0]
    rids = [org.rid_on(0) for _ in range(8)]
    for rid in rids:
        org.service.create(account, rid, {}, rid, kind=SEATS)
    crossing = org.stream.records_of(org_pk(org.org_id))
    assert process_stream_batch(crossing, org.counter, watcher).failed_sequence_numbers == []
    [first] = event_ids(org)
    # ... then emptied, its member gone, deleted, and created again under its id (10 seats, one
    # item), whose new member holds a seat (its counter item opened, no crossing yet)
    for rid in rids:
        org.service.delete(account, rid, kind=SEATS)
    org.drain()
    assert org.service.remove_member(org.org_id, account)
    org.new_service().delete_org(org.org_id)
    _, member = created_again(org, 10)
    rid = org.rid_on(0)
    org.new_service().create(member, rid, {}, rid, kind=SEATS)
    assert (
        process_stream_batch(
            org.stream.records_of(org_pk(org.org_id)), org.counter, watcher
        ).failed_sequence_numbers
        == []
    )
    # When the old creation's crossing batch is delivered again (a bisected or timed-out batch
    # of the stream's mapping, or a replay of its range from the retry queue)
    outcome = process_stream_batch(crossing, org.counter, watcher)
    # Then it succeeds (the stream path never fails a batch for good), and the new creation's
    # alert state and events are untouched: it has announced nothing (1 seat of 10)
    assert outcome.failed_sequence_numbers == [], outcome.error
    assert event_ids(org) == [first]


def test_a_crossing_of_the_deleted_creation_judged_late_announces_nothing_of_the_new_one(split_org):
    # Given an organization of 10 seats (one item) whose member reached 80 %, the crossing's
    # batch counted but its judgement not recorded yet (the watcher's transaction throttled:
    # CrossingNotRecorded, the batch to be delivered again)
    org = split_org(10, 1, members=1)
    watcher = watcher_of(org.new_service(), org.settings, org.clients)
    account = org.accounts[0]
    rids = [org.rid_on(0) for _ in range(8)]
    for rid in rids:
        org.service.create(account, rid, {}, rid, kind=SEATS)
    crossing = org.stream.records_of(org_pk(org.org_id))
    assert process_stream_batch(crossing, org.counter).failed_sequence_numbers == []
    assert event_ids(org) == []
    # ... then emptied, its member gone, deleted, and created again under its id (10 seats),
    # whose new member holds one seat
    for rid in rids:
        org.service.delete(account, rid, kind=SEATS)
    org.drain()
    assert org.service.remove_member(org.org_id, account)
    org.new_service().delete_org(org.org_id)
    _, member = created_again(org, 10)
    rid = org.rid_on(0)
    org.new_service().create(member, rid, {}, rid, kind=SEATS)
    assert (
        process_stream_batch(
            org.stream.records_of(org_pk(org.org_id)), org.counter, watcher
        ).failed_sequence_numbers
        == []
    )
    # When the old creation's crossing batch is delivered again
    outcome = process_stream_batch(crossing, org.counter, watcher)
    # Then it succeeds, and announces nothing for the organization as it is now (1 seat of 10):
    # the deleted creation's 80 % is not published as the new one's, nor recorded on its item
    assert outcome.failed_sequence_numbers == [], outcome.error
    assert event_ids(org) == []
