"""Census requests of an organization's ranges (recount_requests.py, design.md §10.5): what a
repair asks for where a member's resource may or may not hold units at its organization and
nothing can tell, and what the sweeper does with it; against DynamoDB Local, one clock."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import REPAIR_PREFIX, org_pk, range_of
from hybrid_counter.recount_requests import RecountRequests
from tests.faults import ProcessDied, injected
from tests.integration.test_org_recount import SEATS, Org, _overcounted

pytestmark = pytest.mark.integration


def requests_of(org: Org) -> list[dict[str, Any]]:
    return org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": org_pk(org.org_id)}, ":prefix": {"S": REPAIR_PREFIX}},
        ConsistentRead=True,
    )["Items"]


def pending_of(org: Org, account: str) -> list[dict[str, Any]]:
    return [i for i in org.resources(account) if i["state"]["S"] == "pending"]


@pytest.fixture
def org(settings, clients, stream) -> Org:
    return Org(settings, clients, stream, limit=3)


def test_a_seat_a_dead_create_left_at_its_organization_is_given_back_by_the_next_sweep(org: Org) -> None:
    # Given an organization of 3 seats holding x and y, and a create of the first member that
    # died between the levels, its organization's records lost and another admission there since,
    # rolled back past the grace period: nothing can tell whether its seat is held there
    org.service.create(org.members[0], "x", {}, kind=SEATS)
    org.drain()
    ghost = _overcounted(org)
    assert (org.org_counters(), org.live_units()) == ((3, 2), 2)
    # Then the roll back asked for the census of the dead create's range at the organization,
    # naming its account
    [request] = requests_of(org)
    assert request["sk"]["S"].endswith(f"#{range_of(ghost)}")
    assert request["accounts"]["SS"] == [org.members[0]]
    # When the sweeper runs next (the request is due at once)
    outcome = org.sweeper().sweep()
    # Then the seat is given back, once, the request is gone, and a third seat can be had
    assert outcome.ranges_recounted >= 1  # (the table's other tests may have left requests too)
    assert org.org_counters() == (2, 2)
    assert requests_of(org) == []
    org.service.create(org.members[1], "z", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (3, 3) == (org.live_units(), org.live_units())
    with pytest.raises(LimitExceeded):
        org.service.create(org.members[1], "w", {}, kind=SEATS)


def test_a_dead_create_whose_admission_there_is_confirmed_is_released_at_once_without_a_census(
    org: Org,
) -> None:
    # Given a create of the first member that died between the levels (admitted by the
    # organization, pending), its organization's records lost, and no admission there since: the
    # shard's last_admission still names it
    first = org.members[0]
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(first, "ghost", {}, kind=SEATS)
    org.lose_records()
    org.drain()
    assert org.org_counters() == (1, 0)
    # When a repair rolls it back past the grace period
    org.clock.now += org.settings.pending_grace_seconds + 1
    [item] = pending_of(org, first)
    assert org.service.repairs.roll_back_stale_pending(first, item["resource_id"]["S"], item)
    org.drain()
    # Then its seat is released there at once, exactly, with no census of the range asked for
    # (one Query per member, on the sweeper's next run, only where nothing can tell)
    assert org.org_counters() == (0, 0)
    assert requests_of(org) == []


def test_a_request_whose_range_is_busy_stays_until_a_census_settles_it(org: Org) -> None:
    # Given the seat of a dead create left at the organization, asked for, and another member's
    # create in the same range that died between the levels just now (in flight, as far as
    # anyone can tell: the census cannot judge that range)
    ghost = _overcounted(org)
    busy = next(f"b{n}" for n in range(1000) if range_of(f"b{n}") == range_of(ghost))
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(org.members[1], busy, {}, busy, kind=SEATS)
    org.drain()
    assert org.org_counters() == (3, 2)
    # When the sweeper runs within the grace period of that create
    outcome = org.sweeper().sweep()
    # Then the range is left unsettled and the request stays, nothing corrected
    assert outcome.ranges_unsettled >= 1
    assert len(requests_of(org)) == 1
    assert org.org_counters() == (3, 2)
    # When the sweeper runs past it (the dead create rolled back first)
    org.clock.now += org.settings.pending_grace_seconds + 1
    for _ in range(2):
        org.sweeper().sweep()
        org.drain()
    # Then both seats are given back, and no request is left
    assert pending_of(org, org.members[1]) == []
    assert requests_of(org) == []
    assert org.org_counters() == (1, 1) == (org.live_units(), org.live_units())


def test_deleting_an_organization_removes_its_census_requests(org: Org) -> None:
    # Given an organization without members or units, with a census request of one of its
    # ranges (a repair's, its census not taken yet)
    for account in org.members:
        org.service.remove_member(org.org_id, account)
    RecountRequests(org.settings.table_name, org.clients, org.clock).put_org(
        org.org_id, range_of("x"), "a test", kind=SEATS, account_id=org.members[0]
    )
    assert len(requests_of(org)) == 1
    # When it is deleted
    org.service.delete_org(org.org_id)
    # Then nothing is left in its partition (its counters held nothing: nothing to correct)
    left = org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": org_pk(org.org_id)}},
        ConsistentRead=True,
    )["Items"]
    assert [i["sk"]["S"] for i in left] == []


def test_a_request_left_by_a_deleted_organization_is_taken_and_dropped(org: Org) -> None:
    # Given a census request put after its organization's deletion (a repair that was slow)
    for account in org.members:
        org.service.remove_member(org.org_id, account)
    org.service.delete_org(org.org_id)
    RecountRequests(org.settings.table_name, org.clients, org.clock).put_org(
        org.org_id, range_of("x"), "a slow repair", kind=SEATS, account_id=org.members[0]
    )
    # When the sweeper runs
    outcome = org.sweeper().sweep()
    # Then the census finds nothing to correct and the request is dropped
    assert outcome.ranges_recounted >= 1
    assert requests_of(org) == []


def test_a_census_that_fails_never_stops_the_sweep_behind_it(org: Org) -> None:
    # Given census requests of two accounts' ranges, and the store refusing the first census the
    # sweeper takes, whichever it is
    first, second = org.members
    requests = RecountRequests(org.settings.table_name, org.clients, org.clock)
    requests.put(first, range_of("x"), "a test", kind=SEATS)
    requests.put(second, range_of("x"), "a test", kind=SEATS)
    sweeper = org.sweeper()
    recounter: Any = sweeper._recounter
    real, failed = recounter.recount_range, list[str]()

    def failing(account_id: str, *args: Any, **kwargs: Any) -> Any:
        if not failed and account_id in (first, second):
            failed.append(account_id)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "a test"}}, "Query")
        return real(account_id, *args, **kwargs)

    recounter.recount_range = failing
    # When the sweeper runs
    outcome = sweeper.sweep()
    # Then it runs on: the other account's census is taken and its request dropped, the failed
    # one's request stays for the next run
    [refused] = failed
    other = second if refused == first else first
    assert requests.count(other, range_of("x"), kind=SEATS) == 0
    assert requests.count(refused, range_of("x"), kind=SEATS) == 1
    assert outcome.ranges_unsettled >= 1
