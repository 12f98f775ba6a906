"""Review 63 (hostile): the census a repair asked for, taken after the organization's counter
was split or un-split since the request (design.md §10.6): the seat held for nothing is given
back (not held for good), and no more seats are admitted than the limit. (Held: these pass.)"""

from __future__ import annotations

import contextlib

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_org_census_requests import requests_of
from tests.integration.test_org_recount import SEATS, Org, _overcounted
from tests.integration.test_review59_org_census_recreated import live_of
from tests.integration.test_review62_org_census_split import split_ghost

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("shards", [2, 4])
def test_split_after_the_request_then_census(settings, clients, stream, shards: int) -> None:
    org = Org(settings, clients, stream, limit=3)
    _overcounted(org)
    assert org.org_counters() == (2, 1)
    assert len(requests_of(org)) == 1
    org.service.set_org_shards(org.org_id, shards)
    org.sweeper().sweep()
    org.drain()
    assert requests_of(org) == []
    assert org.org_counters() == (1, 1)
    for n in range(4):
        with contextlib.suppress(LimitExceeded):
            org.service.create(org.members[n % 2], f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    assert live_of(org, org.members) == 3


def test_unsplit_after_the_request_on_a_split_shard_then_census(settings, clients, stream) -> None:
    org = Org(settings, clients, stream, limit=3, shards=2)
    split_ghost(org)
    assert org.org_counters() == (1, 0)
    assert len(requests_of(org)) == 1
    org.service.set_org_shards(org.org_id, 1)
    org.sweeper().sweep()
    org.drain()
    assert requests_of(org) == []
    assert org.org_counters() == (0, 0)
    for n in range(5):
        with contextlib.suppress(LimitExceeded):
            org.service.create(org.members[n % 2], f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    assert live_of(org, org.members) == 3
    assert org.org_counters() == (3, 3)


def test_a_request_of_a_deleted_organization_is_settled_not_stuck(settings, clients, stream) -> None:
    from hybrid_counter.keys import range_of
    from hybrid_counter.recount_requests import RecountRequests

    org = Org(settings, clients, stream, limit=3)
    first = org.members[0]
    org.service.create(first, "x", {}, "x", kind=SEATS)
    org.drain()
    org.service.delete(first, "x", kind=SEATS)
    org.drain()
    for account in org.members:
        org.service.remove_member(org.org_id, account)
    org.service.delete_org(org.org_id)
    # a former member's repair asks for a census after the deletion (its request outlives it)
    requests = RecountRequests(org.settings.table_name, org.clients, org.clock)
    requests.put_org(org.org_id, range_of("x"), "late", kind=SEATS, account_id=first)
    assert len(requests_of(org)) == 1
    outcome = org.sweeper().sweep()
    assert requests_of(org) == [], outcome
    assert org.resources(first) == []
