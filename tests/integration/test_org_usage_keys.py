"""The OrgUsageIndex spread over several keys for a split organization (design.md §10.1): each
count or release of a member moves its counter item's sort key (`eventual`), two index writes
on the key `<org>#<kind>`, which one index partition takes about 1,000 of a second; a split
organization admits up to S x 1,000 creates a second. So a split organization's members spread
over 4 S keys, and its usage read merges the top of each; one never split keeps its one key and
its one Query a kind."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.keys import all_org_usage_keys, counter_key, org_key, org_usage_key
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.integration.test_org_split import SEATS, Clock, SplitOrg

pytestmark = pytest.mark.integration


@pytest.fixture
def make_org(settings: Settings, clients: Clients, stream: StreamReader) -> Callable[..., SplitOrg]:
    def make(shards: int, members: int, limit: int = 1_000) -> SplitOrg:
        return SplitOrg(settings, clients, stream, Clock(), limit, shards, members)

    return make


def key_of(org: SplitOrg, account: str) -> str | None:
    item = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=counter_key(account, kind=SEATS), ConsistentRead=True
    ).get("Item", {})
    return item.get("org_kind", {}).get("S")


def create(org: SplitOrg, account: str, n: int) -> None:
    for _ in range(n):
        org.service.create(account, "x", {}, uuid.uuid4().hex, kind=SEATS)


class CountingQueries:
    """Counts the Queries of the OrgUsageIndex made through the service's client."""

    def __init__(self, org: SplitOrg) -> None:
        self.keys: list[str] = []
        client = org.service._clients.dynamodb
        original = client.query

        def query(**kwargs: Any) -> Any:
            if kwargs.get("IndexName") == "OrgUsageIndex":
                self.keys.append(kwargs["ExpressionAttributeValues"][":org_kind"]["S"])
            return original(**kwargs)

        client.query = query  # type: ignore[method-assign]


def test_a_split_organizations_members_spread_over_its_keys_and_its_top_accounts_are_exact(make_org):
    # Given an organization split over 4 (16 keys), 24 members using 1 to 24 seats
    org = make_org(shards=4, members=24)
    for n, account in enumerate(org.accounts, start=1):
        create(org, account, n)
    org.drain()

    # Then each member's counter item names one of its 16 keys, its own bucket, and they spread
    keys = {account: key_of(org, account) for account in org.accounts}
    every = set(all_org_usage_keys(org.org_id, SEATS, 16))
    assert all(keys[a] == org_usage_key(org.org_id, SEATS, a, 16) for a in org.accounts)
    assert set(keys.values()) <= every
    assert len(set(keys.values())) >= 8, keys

    # When the usage is read
    queries = CountingQueries(org)
    usage = org.service.org_usage(org.org_id, top=5).kinds[SEATS]

    # Then the top 5 are the 5 that use most, whichever keys they are on: one Query a key
    assert [(t.account_id, t.used) for t in usage.top] == [
        (org.accounts[n], n + 1) for n in range(23, 18, -1)
    ]
    assert sorted(queries.keys) == sorted(every)
    assert usage.used == sum(range(1, 25))


def test_an_organization_never_split_reads_its_one_key_once_a_kind(make_org):
    # Given an organization of one counter item, 6 members
    org = make_org(shards=1, members=6)
    for n, account in enumerate(org.accounts, start=1):
        create(org, account, n)
    org.drain()

    # Then every member has the one key it always had
    assert {key_of(org, a) for a in org.accounts} == {f"{org.org_id}#{SEATS}"}

    # and its usage read is one Query of it
    queries = CountingQueries(org)
    usage = org.service.org_usage(org.org_id, top=3).kinds[SEATS]
    assert queries.keys == [f"{org.org_id}#{SEATS}"]
    assert [t.used for t in usage.top] == [6, 5, 4]


def test_members_given_the_one_key_before_a_split_stay_read_and_move_at_their_next_admission(make_org):
    # Given 12 members of an organization of one item, each with the one key and some seats
    org = make_org(shards=1, members=12)
    for n, account in enumerate(org.accounts, start=1):
        create(org, account, n)
    org.drain()
    one = f"{org.org_id}#{SEATS}"

    # When it is split over 4
    org.service.set_org_shards(org.org_id, 4)

    # Then before any admission every member is still on the one key, and still read
    assert {key_of(org, a) for a in org.accounts} == {one}
    top = org.service.org_usage(org.org_id, top=3).kinds[SEATS].top
    assert [t.used for t in top] == [12, 11, 10]

    # When each admits one more, it moves to its bucket of the 16 keys
    for account in org.accounts:
        create(org, account, 1)
    org.drain()
    assert all(key_of(org, a) == org_usage_key(org.org_id, SEATS, a, 16) for a in org.accounts)
    assert len({key_of(org, a) for a in org.accounts}) > 1
    top = org.service.org_usage(org.org_id, top=3).kinds[SEATS].top
    assert [(t.account_id, t.used) for t in top] == [(org.accounts[n], n + 2) for n in (11, 10, 9)]


def test_going_back_to_fewer_shards_keeps_every_key_read(make_org):
    # Given members spread over the 64 keys of an organization split over 16
    org = make_org(shards=16, members=20)
    for n, account in enumerate(org.accounts, start=1):
        create(org, account, n)
    org.drain()
    assert len({key_of(org, a) for a in org.accounts}) > 4

    # When it goes back to 2 shards (8 keys for its next admissions)
    org.service.set_org_shards(org.org_id, 2)

    # Then it still reads its 64 keys: the members not admitted since are still on theirs
    item = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=org_key(org.org_id), ConsistentRead=True
    )["Item"]
    assert (item["shards"]["N"], item["usage_keys"]["N"]) == ("2", "64")
    queries = CountingQueries(org)
    top = org.service.org_usage(org.org_id, top=20).kinds[SEATS].top
    assert len(queries.keys) == 64
    assert [t.used for t in top] == list(range(20, 0, -1))

    # and a member admitted now takes its bucket of the 8 keys, still among them
    create(org, org.accounts[0], 1)
    assert key_of(org, org.accounts[0]) == org_usage_key(org.org_id, SEATS, org.accounts[0], 8)


def test_an_account_that_joins_a_split_organization_gets_its_bucket(make_org):
    # Given an organization split over 4
    org = make_org(shards=4, members=1)
    joiners = [f"j{n}-{uuid.uuid4().hex[:8]}" for n in range(12)]

    # When accounts that used the kind before (its counter item exists, empty) join it
    for account in joiners:
        org.service.set_limit(account, 100, kind=SEATS)
        org.service.add_member(org.org_id, account)

    # Then the join gives each its bucket of the 16 keys
    found = {key_of(org, a) for a in joiners}
    assert all(key_of(org, a) == org_usage_key(org.org_id, SEATS, a, 16) for a in joiners)
    assert len(found) > 1
