"""A hostile review of a kind's opening of its organization's counter item (org_level.py ``_open``),
of ``OwnerGone`` on a split organization, and of DELETE /orgs giving up with 503 when units of
requests in flight are held at its counters (orgs/store.py). Against DynamoDB Local, call by call
(tests/explorer/scheduler.py).

Tests marked ``xfail(strict=True)`` expose a defect (their reason says which invariant breaks and
how); the others are evidence of attacks that held.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import InProgress, LimitExceeded, NotFound, Throttled
from hybrid_counter.keys import counter_key, org_counter_key, org_pk, profile_key
from tests.explorer.scheduler import Call, Race
from tests.integration.test_governance import watcher_of
from tests.integration.test_org_deletion_races import partition
from tests.integration.test_org_deletion_review import (
    deleted_and_created_again,
    first_create,
    held_by,
    is_account_admission,
    is_counters_removal,
    is_opening,
    judged_by,
    judged_then_left,
    profile_of,
    written_before,
)
from tests.integration.test_split_review import SEATS, SplitOrg, split_org, stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


# ---- helpers ---------------------------------------------------------------------------------------
def is_org_admission(call: Call) -> bool:
    """A create's admission at the organization (O2: its single item, or a split one's shard)."""
    return (
        call.operation == "UpdateItem"
        and (call.partition or "").startswith("ORG#")
        and call.key.startswith("COUNTER#")
        and "last_admission" in (call.body.get("ExpressionAttributeNames") or {}).values()
    )


def is_deletion_read(call: Call) -> bool:
    """DELETE /orgs reading its partition's items (after its mark)."""
    return call.operation == "Query" and "ORG#" in str(call.body.get("ExpressionAttributeValues", {}))


# ---- defects ---------------------------------------------------------------------------------------
# (fixed: the undo's release, refused on the missing item, was written again with the floor of 0
# and no condition, an upsert that put ORG#<id>/COUNTER#seats#0 back after the 204. An
# organization's release now requires its item to exist, and one refused for want of it has
# nothing to release: the item is removed only holding nothing.)
@pytest.mark.parametrize("shards", [1, 2])
def test_an_undo_after_the_deletion_puts_no_counter_item_back(split_org, shards):
    # Given an organization of 10 seats whose counter item holds nothing (or split over 2), one
    # member
    org = split_org(10, shards, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    written_before(org, account)
    if shards > 1:
        org.service.set_org_shards(org.org_id, shards)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's create has read its membership, and its account leaves ...
        create = judged_then_left(race, org, account, rid)
        # ... its admission at the organization answers 500 without applying ...
        stop_before(race, create, is_org_admission)
        race.step(create, fault="InternalServerError")
        # ... and DELETE /orgs runs to its 204 while the create waits for that outcome
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        assert judged_by(org) == []
        race.finish(create)
    # Then nothing is in the deleted organization's partition ...
    assert create.error is None, create.error
    assert judged_by(org) == [], partition(org)
    # ... and the create, refused at its account and undone, is created as the account's alone
    org.drain()
    assert held_by(org, account) == (1, 1)


def is_org_release(call: Call) -> bool:
    """A release on the organization's counter item (an undo's, a delete's)."""
    return (
        call.operation == "UpdateItem"
        and (call.partition or "").startswith("ORG#")
        and call.key.startswith("COUNTER#")
        and "last_release" in (call.body.get("ExpressionAttributeNames") or {}).values()
    )


# The same fix, reached by an undo that knows its admission applied: its release stalled in the
# residual window of its half-grace check (after the check, before the write), while the sweeper
# takes its mark as a dead undo's and gives the seat back, and DELETE /orgs runs to its 204
# (fifteenth session: since the undo of an unknown admission only marks it, the test above no
# longer reached the release, and mutation 123 survived).
def test_an_undos_release_stalled_past_the_deletion_puts_no_counter_item_back(split_org):
    # Given an organization of 10 seats whose counter item holds nothing, one member
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    written_before(org, account)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's create, judged before its account left, is admitted at the
        # organization and refused at its account, and its undo's release is about to be sent ...
        create = judged_then_left(race, org, account, rid)
        stop_before(race, create, is_org_release)
        # ... its Lambda slow past the grace period, while the sweeper finishes the undo (the
        # census gives the seat back) and DELETE /orgs runs to its 204 ...
        org.sweep_after_the_grace_period()
        picture = org.picture()
        assert (picture.best_effort, picture.eventual) == (0, 0), picture
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        assert judged_by(org) == []
        # ... and the release is sent
        race.finish(create)
    # Then nothing is in the deleted organization's partition
    assert judged_by(org) == [], partition(org)


# (fixed, the sweeper's route (repairs.finish_stale_undo): the same release, the same fix.)
def test_the_sweepers_undo_after_the_deletion_puts_no_counter_item_back(split_org):
    # Given an organization of 10 seats whose counter item holds nothing, one member
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    written_before(org, account)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's create, judged before its account left, has its admission at the
        # organization answer 500 without applying, and is refused at its account: its undo, not
        # knowing whether that admission applied, only marks it (review 41: never released blind)
        # and leaves it to the sweeper (503) ...
        create = judged_then_left(race, org, account, rid)
        stop_before(race, create, is_org_admission)
        race.step(create, fault="InternalServerError")
        race.finish(create)
        assert isinstance(create.error, InProgress), create.error
        # ... and DELETE /orgs runs to its 204
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        assert judged_by(org) == []
    # Then the sweeper, past the grace period, finishes the undo and writes nothing there
    org.sweep_after_the_grace_period()
    assert judged_by(org) == [], partition(org)


# (fixed: D1, giving up, removed the mark unconditionally, which was D2's too; D2 then removed
# the counters, and its conditional delete of the organization's item was refused: 404 while the
# organization was there. A deletion that gives up now keeps the mark.)
def test_a_deletion_giving_up_does_not_make_a_concurrent_one_answer_404(split_org):
    # Given an organization of 10 seats whose counter item holds nothing, one member
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    written_before(org, account)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's create has read its membership, its account leaves, and its admission
        # at the organization applies (the counter holds 1) ...
        create = judged_then_left(race, org, account, rid)
        stop_before(race, create, is_account_admission)
        # ... a DELETE /orgs (D1) has marked the organization and read its rebase records and its
        # counters (one holding the unit) ...
        first = race.start("D1", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, first, is_deletion_read)
        race.step(first)
        stop_before(race, first, is_deletion_read)
        assert "COUNTER#" in str(first.pending.body if first.pending else "")
        race.step(first)
        # ... the create is refused at its account and undone (and created as the account's) ...
        race.finish(create)
        assert create.error is None, create.error
        # ... a second DELETE /orgs (D2, a client's retry) reads nothing held, and D1 gives up
        second = race.start("D2", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, second, is_counters_removal)
        race.finish(first)
        race.finish(second)
    # Then D1 answered 503 (it read the unit), and D2 204: the organization is gone, nothing left
    assert isinstance(first.error, InProgress), first.error
    assert second.error is None, second.error
    assert profile_of(org) is None
    assert judged_by(org) == []


# (fixed: the opening's check asked only that *an* organization of the id live, not the one the
# create was judged by, so a create judged by a deleted organization opened the item of one created
# again under its id and was admitted there (O2), refusing that organization's members until it
# was undone. Members now record which creation of the organization they joined (``org_epoch``,
# its epoch_base); a kind's opening marks the item with it, in a transaction with a check that
# this creation lives, and O2 is conditional on the mark.)
@pytest.mark.parametrize("before", ["not written", "written", "written, then an override"])
def test_a_create_judged_by_a_deleted_organization_takes_no_seat_of_one_created_again(split_org, before):
    # Given an organization of 10 seats, one member, its counter item not written yet (or written,
    # holding nothing)
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    if before != "not written":
        written_before(org, account)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's create has read its membership and the organization's counter ...
        # ... its account leaves, DELETE /orgs answers 204, and the organization is created again
        # under the id, on a plan of 1 seat (2 with the counter written: the new member's first
        # seat opens it), with another member ...
        create = judged_then_left(race, org, account, rid)
        member = deleted_and_created_again(race, org, 1 if before == "not written" else 2)
        seats = [f"new{n}-{rid}" for n in range(2)]
        if before == "written, then an override":  # its item written by the override, unmarked
            org.new_service().set_org_limit(org.org_id, SEATS, 2)
            assert "org_epoch" not in item_of(org)
        if before != "not written":
            org.new_service().create(member, seats[1], {}, seats[1], kind=SEATS)
            assert "org_epoch" in item_of(org)
        # ... the create goes on until its account's admission (or its judgement again's) ...
        stop_before(race, create, is_account_admission)
        # ... and the new member creates a seat meanwhile
        outcome = race.run(
            "member", lambda: org.new_service().create(member, seats[0], {}, seats[0], kind=SEATS)
        )
        race.finish(create)
    # Then the new member's seat is admitted: the organization holds nothing but its members' ...
    assert outcome.error is None, outcome.error
    # ... and the create, judged again, is made as its account's alone
    assert create.error is None, create.error
    org.drain()
    assert held_by(org, account) == (1, 1)
    assert org.new_service().org_usage(org.org_id).kinds[SEATS].used == (1 if before == "not written" else 2)


def item_of(org: SplitOrg) -> dict[str, Any]:
    """The organization's counter item of seats (shard 0), as stored."""
    return org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=org_counter_key(org.org_id, kind=SEATS), ConsistentRead=True
    ).get("Item", {})


DESKS = "desks"


# (fixed: the deletion, refused at its second batch, removed its mark and answered 503, so the
# organization lived on without the items of its first batch, its override of 1 desk among them.
# Now the mark stays: the organization takes no join or change, and the retry finishes it.)
def test_a_deletion_giving_up_after_its_first_batch_stays_marked_until_its_retry_finishes_it(split_org):
    # Given an organization on a plan of 10 seats and 10 desks, with an override of 1 desk, the
    # counter items of 99 other kinds opened (holding nothing), and one member whose seats item
    # holds nothing: 101 counter items, desks and the 99 in the deletion's first transaction
    org = split_org(10, 1, members=1)
    org.service.put_plan(org.plan, {SEATS: 10, DESKS: 10})
    org.service.set_org_limit(org.org_id, DESKS, 1)
    for n in range(99):
        org.clients.dynamodb.put_item(
            TableName=org.settings.table_name,
            Item={"pk": {"S": f"ORG#{org.org_id}"}, "sk": {"S": f"COUNTER#e{n:03d}#0"}},
        )
    account, rid = org.accounts[0], org.rid_on(0)
    written_before(org, account)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's create has read its membership, its account leaves, DELETE /orgs has
        # read the counters (nothing held), and the create's admission at the organization lands
        create = judged_then_left(race, org, account, rid)
        deletion = race.start("delete", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, deletion, is_counters_removal)
        stop_before(race, create, is_account_admission)
        # ... then the deletion goes on (503), and the create (undone, judged again)
        race.finish(deletion)
        assert isinstance(deletion.error, InProgress), deletion.error
        race.finish(create)
    assert create.error is None, create.error
    # Then the organization stays marked: no account can join it, so nothing is judged by what
    # its first batch removed ...
    assert (profile_of(org) or {}).get("deleting") == {"BOOL": True}
    with pytest.raises(NotFound):
        org.new_service().add_member(org.org_id, f"after-{rid}")
    # ... and, the create undone, a retried DELETE /orgs answers 204 and leaves nothing
    org.drain()
    org.new_service().delete_org(org.org_id)
    assert profile_of(org) is None
    assert judged_by(org) == []


# ---- attacks that held -------------------------------------------------------------------------------
def test_an_opening_sent_after_the_deletions_mark_is_refused_and_the_create_judged_again(split_org):
    # Given an organization of 10 seats, its counter item not written yet, one member
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's first create is about to open the organization's counter item, its
        # account has left, and DELETE /orgs has marked the organization (not read its items yet)
        create = judged_then_left(race, org, account, rid)
        stop_before(race, create, is_opening)
        deletion = race.start("delete", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, deletion, is_deletion_read)
        assert "deleting" in (profile_of(org) or {})
        # ... and the opening lands, then the deletion goes on
        race.step(create)
        race.finish(deletion)
        race.finish(create)
    # Then the deletion answers 204 and leaves nothing; the create is the account's alone
    assert deletion.error is None, deletion.error
    assert judged_by(org) == []
    assert create.error is None, create.error
    org.drain()
    assert held_by(org, account) == (1, 1)


def test_an_opening_whose_response_is_lost_and_resent_after_the_deletion_leaves_nothing(split_org):
    # Given an organization of 10 seats, its counter item not written yet, one member
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the member's first create, judged before its account left, opens the item: it
        # applies, its response is lost, and botocore's resend waits ...
        create = judged_then_left(race, org, account, rid)
        sent = stop_before(race, create, is_opening)
        race.step(create, fault="lost")
        resend = create.pending
        assert resend is not None
        assert resend.body == sent.body  # the same ClientRequestToken
        assert "COUNTER#seats#0" in judged_by(org)
        # ... while DELETE /orgs runs to its 204 (the opened item holds nothing); then it lands
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        race.finish(create)
    # Then nothing is in the deleted partition, and the create is the account's alone
    assert judged_by(org) == []
    assert create.error is None, create.error
    org.drain()
    assert held_by(org, account) == (1, 1)


def test_an_opened_item_left_empty_is_read_as_holding_nothing_everywhere(split_org):
    # Given an organization of 3 seats, one member, whose first create of seats opened the
    # counter item and was then throttled at its admission there on every attempt (429): the
    # item left as opened, with nothing but its key and the mark of the organization's creation
    org = split_org(3, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        create = race.start("create", partial(first_create, org, account, rid))
        stop_before(race, create, is_org_admission)
        while not create.done and create.pending is not None and is_org_admission(create.pending):
            race.step(create, fault="ProvisionedThroughputExceededException")
        race.finish(create)
    assert isinstance(create.error, Throttled), create.error
    opened = [i for i in partition(org) if i["sk"]["S"] == "COUNTER#seats#0"]
    assert [sorted(i) for i in opened] == [["org_epoch", "pk", "sk"]]
    # When the stream path (counting and threshold judgement) takes its partition's records
    records = org.stream.records_of(org_pk(org.org_id))
    watcher = watcher_of(org.new_service(), org.settings, org.clients)
    outcome = process_stream_batch(records, org.counter, watcher)
    # Then nothing fails and nothing is judged crossed; its usage reads 0 of 3; and the member's
    # creates fill the 3 seats exactly
    assert outcome.failed_sequence_numbers == [], outcome.error
    left = sorted(str(i["sk"]["S"]) for i in partition(org))
    assert [sk for sk in left if sk.startswith(("EVENT#", "ALERT#", "COUNTER#"))] == ["COUNTER#seats#0"]
    usage = org.new_service().org_usage(org.org_id).kinds[SEATS]
    assert (usage.used, usage.limit) == (0, 3)
    dry = org.new_service().would_create(account, "x", {}, kind=SEATS, units=3)
    assert dry.would_admit
    assert dry.organization is not None
    assert (dry.organization.used, dry.organization.limit) == (0, 3)
    made = 0
    for n in range(4):
        try:
            first_create(org, account, f"{rid}-{n}")
            made += 1
        except LimitExceeded:
            pass
    assert made == 3
    org.drain()
    assert org.picture().used == 3


# ---- members record the creation of the organization they joined ---------------------------------
def is_membership_change(call: Call) -> bool:
    """A join's (or leave's) one transaction (orgs/store.py)."""
    return call.operation == "TransactWriteItems" and any(
        "Update" in action and action["Update"]["Key"]["sk"]["S"] == "PLAN"
        for action in call.body.get("TransactItems", [])
    )


def recorded(org: SplitOrg, account: str) -> tuple[str | None, str | None]:
    """The creation of the organization the account's profile and its seats item name."""
    profile = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=profile_key(account), ConsistentRead=True
    ).get("Item", {})
    counter = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=counter_key(account, kind=SEATS), ConsistentRead=True
    ).get("Item", {})
    return profile.get("org_epoch", {}).get("N"), counter.get("org_epoch", {}).get("N")


def test_a_member_records_the_creation_it_joined_and_forgets_it_on_leaving(split_org):
    # Given an organization with one member that has used seats
    org = split_org(10, 1, members=1)
    account = org.accounts[0]
    written_before(org, account)
    epoch = (profile_of(org) or {})["epoch_base"]["N"]
    # Then its profile and its counter item name the organization's creation ...
    assert recorded(org, account) == (epoch, epoch)
    # ... and neither does once it leaves
    org.service.remove_member(org.org_id, account)
    assert recorded(org, account) == (None, None)


def test_a_join_racing_the_organizations_deletion_and_creation_again_joins_the_new_one(split_org):
    # Given an organization with no members, and an account that may hold 100 seats
    org = split_org(10, 1, members=0)
    account = f"joining-{org.rid_on(0)}"
    org.service.set_limit(account, 100, kind=SEATS)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When a join has read the organization and is about to write ...
        join = race.start("join", lambda: org.new_service().add_member(org.org_id, account))
        stop_before(race, join, is_membership_change)
        # ... and the organization is deleted and created again under the id
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        org.new_service().put_org(org.org_id, org.plan)
        race.finish(join)
    # Then the join, refused by the creation it read, reads again and joins the new one
    assert join.error is None, join.error
    epoch = (profile_of(org) or {})["epoch_base"]["N"]
    assert recorded(org, account)[0] == epoch
    # ... whose creates it is then admitted by
    rid = org.rid_on(0)
    org.new_service().create(account, rid, {}, rid, kind=SEATS)
    assert org.new_service().org_usage(org.org_id).kinds[SEATS].used == 1


def test_a_member_that_joined_before_members_recorded_it_is_judged_by_the_cached_organization(split_org):
    # Given a member whose profile and counter item do not name the organization's creation (it
    # joined before members recorded it), and whose organization's counter is not opened yet
    org = split_org(10, 1, members=1)
    account = org.accounts[0]
    org.service.create(account, "first", {}, "first", kind=SEATS)
    org.service.delete(account, "first", kind=SEATS)
    org.drain()
    for key in (
        profile_key(account),
        counter_key(account, kind=SEATS),
        org_counter_key(org.org_id, kind=SEATS),
    ):
        org.clients.dynamodb.update_item(
            TableName=org.settings.table_name, Key=key, UpdateExpression="REMOVE org_epoch"
        )
    assert recorded(org, account) == (None, None)
    assert "org_epoch" not in item_of(org)
    # When it creates a seat
    rid = org.rid_on(0)
    org.new_service().create(account, rid, {}, rid, kind=SEATS)
    # Then it is admitted at its organization, whose item is marked again by the creation it is
    assert org.new_service().org_usage(org.org_id).kinds[SEATS].used == 1
    assert item_of(org)["org_epoch"]["N"] == (profile_of(org) or {})["epoch_base"]["N"]


def is_org_read(call: Call) -> bool:
    """A create's first read of its organization (its counter items, or its profile)."""
    return call.operation in ("Query", "GetItem") and "ORG#" in str(call.body)


def test_a_create_judged_a_member_before_the_organization_was_created_again_takes_no_seat_of_it(split_org):
    # Given a member whose seats item names the organization (it used seats before)
    org = split_org(10, 1, members=1)
    account, rid = org.accounts[0], org.rid_on(0)
    written_before(org, account)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When its create has read its membership, but not the organization yet ...
        create = race.start("create", partial(first_create, org, account, rid))
        stop_before(race, create, is_org_read)
        # ... its account leaves, the organization is deleted and created again under the id (1
        # seat, another member), and the create reads the new one (its counter, its plan) ...
        leave = race.run("leave", lambda: org.new_service().remove_member(org.org_id, account))
        assert leave.error is None, leave.error
        member = deleted_and_created_again(race, org, 1)
        stop_before(race, create, is_account_admission)
        # ... and the new member creates its first seat meanwhile
        seat = f"new-{rid}"
        outcome = race.run("member", lambda: org.new_service().create(member, seat, {}, seat, kind=SEATS))
        race.finish(create)
    # Then the seat is admitted: the create was judged by the membership it read, of the creation
    # of the organization before (its item names it), and made as its account's alone
    assert outcome.error is None, outcome.error
    assert create.error is None, create.error
    org.drain()
    assert held_by(org, account) == (1, 1)
