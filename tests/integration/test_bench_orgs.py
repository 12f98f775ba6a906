"""The benchmark's organizations part, small, on the tests' DynamoDB Local (make bench runs it at
full size): a member's create and delete cost what the report says they do, the org usage read
does not grow with the members, and an organization's limit is exact under throttling. The
ladder itself is not run here (minutes)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import org_ceiling, orgs
from benchmarks.ceiling import Capacity
from benchmarks.world import BenchWorld, world_on
from localrun.runtime import LocalRuntime
from localrun.sources.stream_reader import StreamReader

pytestmark = pytest.mark.integration


@pytest.fixture
def world(stack: LocalRuntime, stream: StreamReader) -> BenchWorld:
    return world_on(stack, stream)


def test_a_member_pays_one_more_conditional_write_and_one_more_read_a_create(world: BenchWorld) -> None:
    found = orgs.cost(world, 3)

    # Then, steady state: the organization's pre-check read and its admission, no transaction
    assert found["extra"]["create"]["requests_by_operation"] == {"Query": 1.0, "UpdateItem": 1.0}
    assert "TransactWriteItems" not in found["member"]["create"]["requests_by_operation"]
    assert "TransactWriteItems" not in found["member"]["delete"]["requests_by_operation"]
    # And a delete: the organization's release
    assert found["extra"]["delete"]["requests_by_operation"] == {"UpdateItem": 1.0}
    # And a kind's first create registers the kind: a read and a write more, member or not
    for account in ("member", "not_member"):
        assert found["first_create_extra"][account]["requests_by_operation"] == {
            "GetItem": 1.0,
            "UpdateItem": 1.0,
        }
    # And the stream path counted each level once: both back to zero after the deletes
    assert found["exact"]


def test_the_org_usage_read_is_the_same_for_3_and_30_members(world: BenchWorld) -> None:
    found = orgs.usage(world, (3, 30), split=1)["organizations"]

    assert [row["exact"] for row in found] == [True, True]
    assert found[0]["warm"] == found[1]["warm"]
    assert found[0]["warm"]["requests"] == 3


@pytest.mark.parametrize("shards", [1, 4])
def test_an_organizations_limit_is_exact_under_throttling(world: BenchWorld, shards: int) -> None:
    found = org_ceiling.exact_limit(world, shards, Capacity(10.0, 16, 1.0), limit=6, accounts=3)

    assert (found["admitted"], found["units_live"], found["exact"]) == (6, 6, True)


def test_the_usage_read_of_a_split_organization_queries_each_of_its_usage_keys(world: BenchWorld) -> None:
    keys: list[str] = []
    query = world.clients.dynamodb.query

    def counted(**kwargs: Any) -> Any:
        if kwargs.get("IndexName") == "OrgUsageIndex":
            keys.append(kwargs["ExpressionAttributeValues"][":org_kind"]["S"])
        return query(**kwargs)

    world.clients.dynamodb.query = counted  # type: ignore[method-assign]
    try:
        found = orgs.usage(world, (20,), split=4)["organizations"]
    finally:
        del world.clients.dynamodb.query

    assert [(row["shards"], row["exact"]) for row in found] == [(1, True), (4, True)]
    # two reads each (a new process, then again): one key, then the 16 of a split over 4
    assert len(keys) == 2 * 1 + 2 * 16
    assert len(set(keys[2:])) == 16
    # and each row reports its own read (before, both rows of one size shared a tally: the split
    # row showed the unsplit one's requests too, "67 Queries" at 16 shards where 65 are made)
    assert found[0]["warm"]["requests_by_operation"] == {"GetItem": 1, "Query": 2}
    assert found[1]["warm"]["requests_by_operation"] == {"GetItem": 1, "Query": 1 + 16}
