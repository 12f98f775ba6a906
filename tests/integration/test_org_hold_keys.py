"""The OrgHoldIndex spread over several keys for a split organization (design.md §12): each
member's hold writes its index entry about three times (put, made live, confirmed or expired),
and one key is one index partition's 1,000 writes a second, while an organization split over S
admits up to S x 1,000 creates a second. So a split organization's members' holds spread over its
keys (4 a shard item its create's precheck read: ``hold_org`` is ``<org>#<n>``, a bucket of the
hold's incarnation, the first ``<org>``), and a refusal at the organization reads 4 keys a shard
item the picture it was judged on counts (items are never removed: at least as many), or, told
no count, 4 a counter item it reads then. One never split keeps its one key, ``<org>``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import all_org_hold_keys, org_usage_keys
from hybrid_counter.resources.holds import ORG_HOLD_INDEX
from tests.integration.test_member_resizes import item, split_org
from tests.integration.test_org_hold_reclaim import MADE, Requests, expire_what_is_left, in_the_index
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]

HOLDS = 32


def holds_of(make: Callable[..., SplitOrg], shards: int) -> SplitOrg:
    """An organization of 40 seats split over ``shards``: member b holds 32 of them (32 holds of
    one seat, 10 s each), member c uses the other 8 for good."""
    org = make(HOLDS + 8, shards)
    MADE.append(org)
    b, c = org.accounts[1:3]
    for n in range(HOLDS):
        org.service.create(b, f"h{n}", {}, f"h{n}", kind=SEATS, hold_seconds=10)
    org.service.create(c, "p", {}, "p", kind=SEATS, units=8)
    org.drain()
    return org


def test_a_split_organizations_holds_spread_over_its_keys_and_a_refusal_reclaims_them_all(split_org) -> None:
    # Given an organization split over 4 (16 keys) whose 40 seats are full: 32 held by b, 8 used
    org = holds_of(split_org, 4)
    b = org.accounts[1]

    # Then each hold is under one of the organization's 16 keys, spread (the first is <org>)
    keys = {item(org, b, f"h{n}")["hold_org"]["S"] for n in range(HOLDS)}
    assert keys <= set(all_org_hold_keys(org.org_id, 16))
    assert len(keys) >= 8, keys
    assert in_the_index(org) == {f"h{n}" for n in range(HOLDS)}

    # When, past the deadline, a's create of 32 is asked as a dry run, then made
    org.clock.now += 11
    a = org.accounts[0]
    answer = org.service.would_create(a, "x", {}, "x", kind=SEATS, units=HOLDS)
    with Requests(org) as requests:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=HOLDS)

    # Then the dry run counted every hold, and the create, refused at the organization, read
    # each of its keys once, expired all 32 wherever they were and was admitted
    assert answer.would_admit is True
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == 16
    org.drain()
    assert in_the_index(org) == set()
    assert org.picture().used == HOLDS + 8


def test_holds_put_under_a_split_organizations_keys_are_found_after_it_is_lowered_to_one_item(
    split_org,
) -> None:
    # Given an organization split over 4, its 40 seats full (32 held under its 16 keys)
    org = holds_of(split_org, 4)

    # When it goes back to one shard (its 4 shard items stay, and so do its keys) and, past the
    # deadline, a's create of 32 is refused at the organization
    org.service.set_org_shards(org.org_id, 1)
    org.service = org.new_service()
    org.clock.now += 11
    a = org.accounts[0]
    with Requests(org) as requests:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=HOLDS)

    # Then it read the 16 keys the holds were put under, not the 1 its S asks for now
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == 16
    org.drain()
    assert in_the_index(org) == set()


def test_an_organization_never_split_keeps_its_one_key_and_one_query(split_org) -> None:
    # Given an organization of one item, full: 32 seats held by b, 8 used by c
    org = holds_of(split_org, 1)
    b = org.accounts[1]
    assert {item(org, b, f"h{n}")["hold_org"]["S"] for n in range(HOLDS)} == {org.org_id}

    # When a's create of 33 (one more than the holds free) is refused, past their deadline
    org.clock.now += 11
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.create(org.accounts[0], "x", {}, "x", kind=SEATS, units=HOLDS + 1)

    # Then it read one key, as before the keys were spread, and released the 32 all the same
    assert refused.value.scope == "organization"
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == org_usage_keys(1) == 1
    org.drain()
    assert in_the_index(org) == set()


def test_a_reclaim_not_told_the_key_count_counts_the_organizations_counter_items(
    split_org,
) -> None:
    # Given an organization split over 4, its 40 seats full (32 held under its 16 keys)
    org = holds_of(split_org, 4)

    # When, past the deadline, a reclaim at the organization is asked for with no count of its
    # keys (no refusal's picture to say it)
    org.clock.now += 11
    with Requests(org) as requests:
        reclaimed = org.service.holds.reclaim(org.accounts[0], SEATS, org=org.org_id, own=False)

    # Then it counted the organization's counter items of the kind (one Query) and read every key
    assert requests.seen["Query"] == 1
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == 16
    assert reclaimed.expired == HOLDS
