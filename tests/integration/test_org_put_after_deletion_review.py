"""Review 34 (hostile): PUT /orgs/{id} racing DELETE /orgs (F2's fix, governance/changes.py
put_org): a PUT that goes round again after a deletion ended creates the organization, and every
creation of an id starts above the last one's epochs. Against DynamoDB Local, through the Race
scheduler.
"""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import InProgress, LimitExceeded
from hybrid_counter.keys import account_pk, org_key, org_pk
from tests.explorer.scheduler import Operation, Race
from tests.integration.test_org_deletion_review import written_before
from tests.integration.test_org_recreate_review import is_plan_write
from tests.integration.test_split_review import SEATS, SplitOrg, is_rebase_put, split_org, stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def epoch_base(org: SplitOrg) -> int:
    item = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=org_key(org.org_id), ConsistentRead=True
    )["Item"]
    return int(item.get("epoch_base", {}).get("N", "0"))


def drain(org: SplitOrg, *pks: str) -> None:
    for pk in pks:
        while records := org.stream.records_of(pk):
            assert process_stream_batch(records, org.counter).failed_sequence_numbers == []


def new_member(org: SplitOrg) -> str:
    service = org.new_service()
    account = f"x-{uuid.uuid4().hex[:8]}"
    service.set_limit(account, 100, kind=SEATS)
    service.add_member(org.org_id, account)
    return account


def deleted_with_two_plans(split_org) -> tuple[SplitOrg, str, str]:
    """An organization deleted (its id free), and a plan of 1 seat and a plan of 100."""
    org = split_org(10, 1, members=1)
    written_before(org, org.accounts[0])
    assert org.service.remove_member(org.org_id, org.accounts[0])
    org.new_service().delete_org(org.org_id)
    small, big = f"small-{uuid.uuid4().hex[:8]}", f"big-{uuid.uuid4().hex[:8]}"
    org.service.put_plan(small, {SEATS: 1})
    org.service.put_plan(big, {SEATS: 100})
    return org, small, big


def created_on_big_and_resharding(org: SplitOrg, race: Race, big: str) -> tuple[int, Operation]:
    """Another PUT creates the organization on the plan of 100 (C2), a member of C2 writes a seat
    there (created and deleted) and leaves, and an operator's split of C2 over 2 items is about to
    put its rebase record (for C2's plan of 100): C2's epoch_base, and that reshard."""
    org.new_service().put_org(org.org_id, big)
    c2 = epoch_base(org)
    member = new_member(org)
    rid = org.rid_on(0, 1)
    org.new_service().create(member, rid, {}, rid, kind=SEATS)
    org.new_service().delete(member, rid, kind=SEATS)
    drain(org, account_pk(member), org_pk(org.org_id))
    assert org.new_service().remove_member(org.org_id, member)
    reshard = race.start("reshard", lambda: org.new_service().set_org_shards(org.org_id, 2))
    stop_before(race, reshard, is_rebase_put)
    return c2, reshard


def three_seats_asked(org: SplitOrg, member: str) -> list[str]:
    """What three creates of one seat each by ``member`` are answered."""
    outcomes = []
    for _ in range(3):
        rid = org.rid_on(0, 2)
        try:
            org.new_service().create(member, rid, {}, rid, kind=SEATS)
            outcomes.append("admitted")
        except LimitExceeded:
            outcomes.append("refused")
        except InProgress:
            outcomes.append("503")
    return outcomes


def test_a_put_that_goes_round_after_a_deletion_creates_above_the_creation_it_met(split_org):
    # Given an organization deleted (its id free), a plan of 1 seat and a plan of 100
    org, small, big = deleted_with_two_plans(split_org)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When PUT /orgs/{id} on the plan of 1 (X) finds no organization and is about to create
        # it (its creation number drawn) ...
        x = race.start("put-x", lambda: org.new_service().put_org(org.org_id, small, force=True))
        stop_before(race, x, is_plan_write)
        # ... another PUT creates it first on the plan of 100 (creation C2), whose member writes
        # seats and leaves, and an operator's split of C2 is about to put its record ...
        c2, z = created_on_big_and_resharding(org, race, big)
        # ... X's creation is refused (C2 is there); it reads C2 and is about to move it to the
        # plan of 1 ...
        race.step(x)
        stop_before(race, x, is_plan_write)
        # ... DELETE /orgs deletes C2 (204); X's move is refused, it finds the id free and goes
        # round again: it creates the organization (C3)
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        race.finish(x)
        assert x.error is None, x.error
        assert x.result[1] is True  # created (201)
        c3 = epoch_base(org)
        # ... and then C2's reshard goes on
        race.finish(z)
    # Then C3 starts above every creation before it (its epochs above C2's: design.md §10.2),
    # so C2's late rebase lays nothing out on it, and a member of C3 gets 1 seat of its plan of 1
    outcomes = three_seats_asked(org, new_member(org))
    assert (c3 > c2, outcomes) == (True, ["admitted", "refused", "refused"])


def test_a_member_of_the_organization_that_put_created_after_a_deletion_grows_within_its_plan(split_org):
    # Given an organization deleted (its id free), a plan of 1 seat and a plan of 100
    org, small, big = deleted_with_two_plans(split_org)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When PUT /orgs/{id} on the plan of 1 (X) finds no organization and is about to create it
        x = race.start("put-x", lambda: org.new_service().put_org(org.org_id, small, force=True))
        stop_before(race, x, is_plan_write)
        # ... another PUT creates it first on the plan of 100 (C2), whose member writes seats and
        # leaves, and an operator's split of C2 over 2 items is about to put its rebase record
        _, z = created_on_big_and_resharding(org, race, big)
        # ... X's creation is refused, it is about to move C2 to the plan of 1; DELETE /orgs
        # deletes C2; X goes round and creates the organization (C3, plan of 1)
        race.step(x)
        stop_before(race, x, is_plan_write)
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        race.finish(x)
        assert x.error is None, x.error
        assert x.result[1] is True
        # ... a member of C3 takes its one seat
        member3 = new_member(org)
        seat = org.rid_on(0, 1)
        org.new_service().create(member3, seat, {}, seat, kind=SEATS)
        # ... and C2's split goes on
        race.finish(z)
    # Then the member's grow of its seat to 5 units is refused by C3's limit of 1 (C2's late
    # rebase laid nothing out on C3), and C3 holds at most 1 unit
    outcome = "grown"
    try:
        org.new_service().resize(member3, seat, 5, kind=SEATS)
    except LimitExceeded as refused:
        outcome = f"refused {refused.scope} {refused.limit}"
    except InProgress:
        outcome = "503"
    held = org.new_service().get(member3, seat, kind=SEATS).units
    assert (outcome, held) == ("refused organization 1", 1)


def test_a_put_whose_number_was_drawn_before_another_creation_and_deletion_creates_above_them(split_org):
    # Given an organization deleted (its id free), a plan of 1 seat and a plan of 100
    org, small, big = deleted_with_two_plans(split_org)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When PUT /orgs/{id} on the plan of 1 (X) finds no organization and is about to create
        # it, its creation number drawn ...
        x = race.start("put-x", lambda: org.new_service().put_org(org.org_id, small, force=True))
        stop_before(race, x, is_plan_write)
        # ... another PUT creates it first on the plan of 100 (C2, a number drawn after X's), a
        # member of C2 writes a seat there (created and deleted) and leaves, an operator's split
        # of C2 over 2 items is about to put its rebase record, and DELETE /orgs deletes C2
        # (204), all before X's one write lands
        c2, z = created_on_big_and_resharding(org, race, big)
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        assert deletion.error is None, deletion.error
        race.finish(x)
        assert x.error is None, x.error
        assert x.result[1] is True  # created (201)
        c3 = epoch_base(org)
        # ... and then C2's split goes on
        race.finish(z)
    # Then X's organization starts above C2 (its first write, with the number drawn before C2,
    # was refused; it drew again), C2's late rebase laid nothing out on it, and a member of it
    # gets 1 seat of its plan of 1
    assert c3 > c2
    assert three_seats_asked(org, new_member(org)) == ["admitted", "refused", "refused"]
