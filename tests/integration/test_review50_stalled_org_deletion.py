"""Review 50 (hostile): DELETE /orgs/{id} stalled between its writes while another deletion
finishes and the organization is created again under the same id (orgs/store.py ``delete``).

The stalled deletion's ``_remove_counters`` read the partition's COUNTER#, ALERT# and FORMER#
items afresh, after its mark, and deleted every one holding nothing: nothing tied them to the
creation it marked. Its ``_remove_profile`` was fenced (the new creation has no mark: 404), but
by then it had removed the new creation's items. Every removal is now a transaction with a
check that the creation it marked is still there, marked (orgs/store.py ``_still_marked``).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from hybrid_counter.errors import LimitExceeded, NotFound
from hybrid_counter.keys import org_counter_key
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_deletion_review import profile_of
from tests.integration.test_split_review import SEATS, SplitOrg, split_org, stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def is_partition_query(call: Call) -> bool:
    """DELETE /orgs reading items of its partition (rebase records, counters, alerts, formers)."""
    return call.operation == "Query" and "ORG#" in str(call.body.get("ExpressionAttributeValues", {}))


def prefix_of(call: Call) -> str:
    return str(call.body.get("ExpressionAttributeValues", {}).get(":prefix", {}).get("S", ""))


def stalled_at_its_removal(race: Race, org: SplitOrg) -> Any:
    """D1: marked the organization, read its rebase records and counters (nothing held), and
    stalled just before ``_remove_counters`` reads the partition again."""
    first = race.start("D1", lambda: org.new_service().delete_org(org.org_id))
    seen = []
    while True:
        call = stop_before(race, first, is_partition_query)
        seen.append(prefix_of(call))
        if len(seen) == 3:  # REBASE#, COUNTER# (the check), then the removal's COUNTER#
            assert seen == ["REBASE#", "COUNTER#", "COUNTER#"], seen
            return first
        race.step(first)


def item_of(org: SplitOrg) -> dict[str, Any]:
    return org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=org_counter_key(org.org_id, kind=SEATS), ConsistentRead=True
    ).get("Item", {})


def deleted(race: Race, org: SplitOrg, deletion: str) -> Any:
    """DELETE /orgs to its 204: by a retry (D2) while the first (D1) is stalled before its removal
    of the partition's items ("stalled": D1 returned, to be finished later), or alone ("alone",
    the control: None)."""
    first = stalled_at_its_removal(race, org) if deletion == "stalled" else None
    second = race.run("D2", lambda: org.new_service().delete_org(org.org_id))
    assert second.error is None, second.error
    assert profile_of(org) is None
    return first


def finish_stalled(race: Race, org: SplitOrg, first: Any) -> None:
    """D1 goes on: 404 (the new creation has no mark), the new creation left in place."""
    if first is None:
        return
    race.finish(first)
    assert isinstance(first.error, NotFound), first.error
    assert profile_of(org) is not None


@pytest.mark.parametrize("deletion", ["stalled", "alone"])
def test_a_stalled_deletion_removes_the_override_of_the_organization_created_again(split_org, deletion):
    # Given an empty organization (no members) on a plan of 10 seats
    org = split_org(10, 1, members=0)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When DELETE /orgs (D1) has marked it, read it (nothing held), and stalls, and a retry of
        # the DELETE (D2) finishes: 204 ...
        first = deleted(race, org, deletion)
        assert profile_of(org) is None
        # ... the operator creates the organization again (plan of 10 seats), sets its override
        # to 1 seat, and an account joins it
        service = org.new_service()
        service.put_org(org.org_id, org.plan)
        service.set_org_limit(org.org_id, SEATS, 1)
        assert item_of(org).get("limit") == {"N": "1"}
        member = f"new-{uuid.uuid4().hex[:8]}"
        service.set_limit(member, 100, kind=SEATS)
        service.add_member(org.org_id, member)
        # ... then D1 goes on: 404
        finish_stalled(race, org, first)
    # Then the new organization's override is still there, and it admits 1 seat of 3 tries
    admitted = 0
    for n in range(3):
        rid = f"s{n}-{uuid.uuid4().hex[:6]}"
        try:
            org.new_service().create(member, rid, {}, rid, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    assert admitted == 1, f"{admitted} seats live at an organization whose limit is 1: {item_of(org)}"


def is_pending_put(call: Call) -> bool:
    return call.operation == "PutItem" and call.key.startswith("RESOURCE#")


def is_org_release(call: Call) -> bool:
    """A release on the organization's counter item (an undo's, a delete's)."""
    return (
        call.operation == "UpdateItem"
        and (call.partition or "").startswith("ORG#")
        and call.key.startswith("COUNTER#")
        and "last_release" in (call.body.get("ExpressionAttributeNames") or {}).values()
    )


def same_range_as(rid: str) -> str:
    from hybrid_counter.keys import range_of

    while range_of(x := f"x-{uuid.uuid4().hex[:6]}") != range_of(rid):
        pass
    return x


def former_members(org: SplitOrg) -> list[str]:
    return org.new_service().org_store.former_members(org.org_id)


def recounter_of(org: SplitOrg) -> Any:
    from hybrid_counter.counting.org_recount import OrgRecounter

    service = org.new_service()
    return OrgRecounter(
        org.settings.table_name, org.clients, service.org_store, service.repairs, org.counter,
        grace_seconds=org.settings.pending_grace_seconds, clock=org.clock, sleep=lambda _: None,
    )  # fmt: skip


@pytest.mark.parametrize("deletion", ["stalled", "alone"])
def test_a_stalled_deletion_removes_a_former_member_record_of_the_organization_created_again(
    split_org, deletion
):
    """FORMER#<account> exists so that the organization's recount takes the census of an account
    that left while a create of it (judged a member) was in flight (review 37). A stalled DELETE
    of the previous creation of the id removes the new creation's record: the recount then takes
    the in-flight create's seat back, and its undo releases it a second time."""
    # Given an empty organization on a plan of 3 seats
    org = split_org(3, 1, members=0)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When DELETE /orgs (D1) stalls before its removal of the partition's items, a retry (D2)
        # finishes (204), and the organization is created again (same plan, 3 seats) with three
        # members ...
        first = deleted(race, org, deletion)
        service = org.new_service()
        service.put_org(org.org_id, org.plan)
        keeper, other, leaver = (f"{n}-{uuid.uuid4().hex[:8]}" for n in ("keeper", "other", "leaver"))
        for account in (keeper, other, leaver):
            service.set_limit(account, 100, kind=SEATS)
            service.add_member(org.org_id, account)
            org.accounts.append(account)
        # ... the leaver's create has read its membership (stopped before its pending put), and
        # the leaver leaves (FORMER#leaver written) ...
        rid = f"ghost-{uuid.uuid4().hex[:6]}"
        create = race.start("create", lambda: org.new_service().create(leaver, rid, {}, rid, kind=SEATS))
        stop_before(race, create, is_pending_put)
        leave = race.run("leave", lambda: org.new_service().remove_member(org.org_id, leaver))
        assert leave.error is None, leave.error
        assert former_members(org) == [leaver]
        # ... D1 goes on: 404, the new creation's items left in place (before: its removal of
        # the partition's items applied, FORMER#leaver with them)
        finish_stalled(race, org, first)
        assert former_members(org) == [leaver]
        # ... the keeper takes a seat ...
        x = same_range_as(rid)
        org.new_service().create(keeper, x, {}, x, kind=SEATS)
        org.drain()
        # ... the leaver's create is admitted at the organization, refused at its account (MOVED)
        # and marked undoing, stopped before its release there ...
        stop_before(race, create, is_org_release)
        org.drain()
        # ... and the organization's recount (--fix) runs meanwhile
        report = recounter_of(org).recount(org.org_id, kind=SEATS, fix=True)
        race.finish(create)
        assert create.error is None, create.error
    # Then, as the other member creates (before the stream path's next batch), the organization
    # admits no more than its 3 seats
    for n in range(3):
        rid = f"o{n}-{uuid.uuid4().hex[:6]}"
        with contextlib.suppress(LimitExceeded):
            org.new_service().create(other, rid, {}, rid, kind=SEATS)
    org.drain()
    members_live = {k: v for k, v in org.live().items() if not k.startswith(f"ACCOUNT#{leaver}")}
    assert sum(members_live.values()) <= 3, (report.actions, members_live)


def is_record_delete(call: Call) -> bool:
    """The deletion's removal of a rebase record (a transaction with its fence)."""
    return call.operation == "TransactWriteItems" and any(
        str(action.get("Delete", {}).get("Key", {}).get("sk", {}).get("S", "")).startswith("REBASE#")
        for action in call.body.get("TransactItems", [])
    )


def test_a_stalled_deletion_removes_the_rebase_record_of_the_organization_created_again(split_org):
    """DELETE /orgs deletes the rebase records it read by key: the record of the same kind of the
    organization created again under the id has the same key (held before the fence too: the
    new creation's reshard finished without its record)."""
    from tests.integration.test_split_review import is_freeze

    # Given an empty organization of 10 seats split over 4 shards, and an operator's
    # set_org_shards(8) whose record is put, stopped before its freeze
    org = split_org(10, 4, members=0)
    org.service.set_org_limit(org.org_id, SEATS, 10, force=True)
    org.service.set_org_shards(org.org_id, 4)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        old = race.start("old-reshard", lambda: org.new_service().set_org_shards(org.org_id, 8))
        stop_before(race, old, is_freeze)
        assert org.record() is not None
        # When DELETE /orgs (D1) has read that record and stalls before deleting it ...
        first = race.start("D1", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, first, is_record_delete)
        # ... a retry (D2) finishes (204), the old reshard gives up ...
        second = race.run("D2", lambda: org.new_service().delete_org(org.org_id))
        assert second.error is None, second.error
        race.finish(old)
        # ... the organization is created again (10 seats over 4 shards) with a member, and an
        # operator's set_org_shards(8) of it has put its record, stopped before its freeze ...
        service = org.new_service()
        service.put_org(org.org_id, org.plan, shards=4)
        member = f"new-{uuid.uuid4().hex[:8]}"
        service.set_limit(member, 100, kind=SEATS)
        service.add_member(org.org_id, member)
        org.accounts.append(member)
        rid = org.rid_on(0)
        service.create(member, rid, {}, rid, kind=SEATS)
        new = race.start("new-reshard", lambda: org.new_service().set_org_shards(org.org_id, 8))
        stop_before(race, new, is_freeze)
        assert org.record() is not None
        # ... then D1 goes on (it deletes REBASE#seats by key: the new organization's record)
        race.finish(first)
        race.finish(new)
    # Then the new organization still admits its members up to its 10 seats
    admitted, errors = 1, []
    for n in range(12):
        rid = f"s{n}-{uuid.uuid4().hex[:6]}"
        try:
            org.new_service().create(member, rid, {}, rid, kind=SEATS)
            admitted += 1
        except Exception as error:
            errors.append(type(error).__name__)
    # (and D1 answers 404, not 503: the organization it marked is gone)
    assert isinstance(first.error, NotFound), first.error
    assert admitted == 10, (admitted, errors, first.error, new.error)
    assert set(errors) <= {"LimitExceeded"}, errors
