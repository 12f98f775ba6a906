"""DELETE /orgs racing an operator's change that lays a split organization's allowances out
(set_org_shards, a limit change's rebalance): each of its writes may land between any two of the
deletion's, or after it. A deleted organization must leave nothing in its partition that an
organization created again under its id would be judged by.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hybrid_counter.errors import InProgress, LimitExceeded, NotFound
from hybrid_counter.keys import ORG_PROFILE_SK, org_pk
from tests.explorer.scheduler import Call, Race
from tests.faults import injected
from tests.integration.test_split_review import (
    SEATS,
    SplitOrg,
    is_freeze,
    is_rebase_put,
    split_org,
    stop_before,
)

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def partition(org: SplitOrg) -> list[dict[str, Any]]:
    """Every item left in the organization's partition."""
    return org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": org_pk(org.org_id)}},
        ConsistentRead=True,
    )["Items"]


def created_again(org: SplitOrg, limit: int, shards: int | None = None) -> tuple[str, str]:
    """The organization created again under its id, on a plan of ``limit`` seats (its counters
    over ``shards`` items if given), with one member that may hold 100 (not used yet): (its plan,
    the member)."""
    service = org.new_service()
    plan = f"small-{uuid.uuid4().hex[:8]}"
    service.put_plan(plan, {SEATS: limit})
    service.put_org(org.org_id, plan, shards=shards)
    account = f"again-{uuid.uuid4().hex[:8]}"
    service.set_limit(account, 100, kind=SEATS)
    service.add_member(org.org_id, account)
    return plan, account


def admitted_of(org: SplitOrg, account: str, tries: int) -> int:
    """How many of ``tries`` creates of the member are admitted (a fresh process each)."""
    service = org.new_service()
    admitted = 0
    for n in range(tries):
        rid = f"again{n}-{uuid.uuid4().hex[:6]}"
        try:
            service.create(account, rid, {}, rid, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    return admitted


def created_again_holds(org: SplitOrg, limit: int) -> int:
    """The organization created again under its id on a plan of ``limit`` seats, with one member
    that may hold 100: how many creates it admits out of ``limit + 3``."""
    _, account = created_again(org, limit)
    return admitted_of(org, account, limit + 3)


@pytest.mark.parametrize("stopped_before", ["record", "freeze"])
def test_a_reshard_racing_the_deletion_of_its_organization_leaves_nothing_behind(split_org, stopped_before):
    # Given an empty organization of 10 seats split over 4 shards, laid out
    org = split_org(10, 4, members=0)
    org.service.set_org_limit(org.org_id, SEATS, 10, force=True)
    org.service.set_org_shards(org.org_id, 4)
    assert org.picture().split
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When an operator's set_org_shards(8) is about to put its rebase record (or to freeze
        # its shards) ...
        reshard = race.start("reshard", lambda: org.new_service().set_org_shards(org.org_id, 8))
        stop_before(race, reshard, is_rebase_put if stopped_before == "record" else is_freeze)
        # ... and DELETE /orgs runs meanwhile, to its end
        deletion = race.run("delete", lambda: org.new_service().delete_org(org.org_id))
        race.finish(reshard)
    assert deletion.error is None, deletion.error
    assert reshard.error is None or isinstance(reshard.error, (InProgress, NotFound)), reshard.error
    then_it_is_gone_with_everything_it_held(org)


def test_a_reshard_whose_new_shards_land_while_the_deletion_removes_its_shards_leaves_nothing_behind(
    split_org,
):
    # Given an empty organization of 10 seats split over 4 shards, laid out, and an operator's
    # set_org_shards(8) whose rebase record is put, about to freeze the shards
    org = split_org(10, 4, members=0)
    org.service.set_org_limit(org.org_id, SEATS, 10, force=True)
    org.service.set_org_shards(org.org_id, 4)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        reshard = race.start("reshard", lambda: org.new_service().set_org_shards(org.org_id, 8))
        stop_before(race, reshard, is_freeze)
        # When DELETE /orgs has read what it deletes and is about to delete its shards ...
        deletion = race.start("delete", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, deletion, is_shard_delete)
        # ... and the reshard freezes (creating the 4 new shards, if it still can) and gives up
        race.finish(reshard)
        race.finish(deletion)
    assert deletion.error is None, deletion.error
    assert reshard.error is None or isinstance(reshard.error, (InProgress, NotFound)), reshard.error
    then_it_is_gone_with_everything_it_held(org)


def is_shard_delete(call: Call) -> bool:
    actions = call.body.get("TransactItems", []) if call.operation == "TransactWriteItems" else []
    return any(
        a.get("Delete", {}).get("Key", {}).get("sk", {}).get("S", "").startswith("COUNTER#") for a in actions
    )


def then_it_is_gone_with_everything_it_held(org: SplitOrg) -> None:
    """The organization is gone, with everything in its partition; one created again under its
    id holds to its own plan."""
    with pytest.raises(NotFound):
        org.new_service().get_org(org.org_id)
    assert partition(org) == []
    assert created_again_holds(org, 3) == 3


def deletes_the_org_item(body: dict[str, Any]) -> bool:
    return any(
        a.get("Delete", {}).get("Key", {}).get("sk", {}).get("S") == ORG_PROFILE_SK
        for a in body.get("TransactItems", [])
    )


def is_the_org_item(body: dict[str, Any]) -> bool:
    return bool(body.get("Key", {}).get("sk", {}).get("S") == ORG_PROFILE_SK)


def test_two_deletions_at_once_answer_204_once_and_404_to_the_other(split_org):
    # Given an empty organization of 10 seats split over 4 shards
    org = split_org(10, 4, members=0)
    org.service.set_org_limit(org.org_id, SEATS, 10, force=True)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When one DELETE /orgs is about to delete the organization's item, and another runs
        # meanwhile, to its end
        first = race.start("first", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, first, lambda call: deletes_the_org_item(call.body))
        second = race.run("second", lambda: org.new_service().delete_org(org.org_id))
        race.finish(first)
    # Then the one that deleted it answers 204 and the other 404, as in some order one after the
    # other
    assert second.error is None, second.error
    assert isinstance(first.error, NotFound), first.error
    then_it_is_gone_with_everything_it_held(org)


def test_a_deletion_whose_last_response_is_lost_answers_204(split_org):
    # Given an empty organization of 10 seats split over 4 shards
    org = split_org(10, 4, members=0)
    org.service.set_org_limit(org.org_id, SEATS, 10, force=True)
    # When DELETE /orgs deletes the organization's item and the response is lost (botocore
    # sends it again)
    client = org.clients.dynamodb
    with (
        injected(client, "TransactWriteItems", when="after", where=deletes_the_org_item) as in_a_transaction,
        injected(client, "DeleteItem", when="after", where=is_the_org_item) as alone,
    ):
        org.new_service().delete_org(org.org_id)
    # Then it answered 204, not the 404 its resend would have found
    assert in_a_transaction.fired + alone.fired == 1
    then_it_is_gone_with_everything_it_held(org)
