"""Review 65: an organization split before the usage keys were deployed (its profile has
``shards`` but no ``usage_keys``: design.md §10.1, operator guide "Upgrading to usage keys") is
read on 4 S keys, counted from its shards; its members move to their buckets of those 4 S keys
at their next create. Going back to fewer shards afterwards must keep every key read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.keys import all_org_usage_keys, org_key, org_usage_key
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_org_usage_keys import create, key_of, make_org  # noqa: F401

pytestmark = pytest.mark.integration


def test_a_legacy_split_organization_going_back_to_fewer_shards_loses_members_from_its_usage(
    make_org: Callable[..., SplitOrg],  # noqa: F811
) -> None:
    # Given an organization split over 16 before the deploy: its profile records no usage_keys
    org = make_org(shards=16, members=20)
    org.clients.dynamodb.update_item(
        TableName=org.settings.table_name, Key=org_key(org.org_id), UpdateExpression="REMOVE usage_keys"
    )
    assert org.service.get_org(org.org_id).usage_keys == 64  # read on 64 keys, from its shards

    # and, after the deploy, 20 members using 1..20 seats: each moved to its bucket of the 64
    for n, account in enumerate(org.accounts, start=1):
        create(org, account, n)
    org.drain()
    assert all(key_of(org, a) == org_usage_key(org.org_id, SEATS, a, 64) for a in org.accounts)
    top = org.service.org_usage(org.org_id, top=20).kinds[SEATS].top
    assert [t.used for t in top] == list(range(20, 0, -1))

    # When the operator takes it back to 2 shards (as the docs allow: "going back to fewer
    # shards ... leaves no member unread")
    org.service.set_org_shards(org.org_id, 2)

    # Then every member, none admitted since, is still read
    item = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=org_key(org.org_id), ConsistentRead=True
    )["Item"]
    beyond = [a for a in org.accounts if key_of(org, a) not in all_org_usage_keys(org.org_id, SEATS, 8)]
    top = org.service.org_usage(org.org_id, top=20).kinds[SEATS].top
    assert [t.used for t in top] == list(range(20, 0, -1)), (
        item["usage_keys"],
        f"{len(beyond)} members on keys beyond the first 8",
        [key_of(org, a) for a in org.accounts],
    )
