"""Review 43 (hostile): a resize whose request died on a resource counted everywhere was in no
index, so nothing the system runs by itself ended it (design.md §4.4, §10.7, §12): a hold's units
and a member's grow at its organization were held for good. Its claim now puts it in the
PendingIndex, and the write that ends it takes it out."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import resource_key
from tests.faults import ProcessDied, at_an_organization, injected
from tests.integration.test_member_resizes import grow_dies_between_the_levels, item, split_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_hold_whose_resize_died_is_still_released_by_its_deadline(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 10 seats; member a holds x (4 seats) in a hold of 60 s, counted
    org = split_org(10, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=4, hold_seconds=60)
    org.drain()
    # And a PATCH of x to 5 whose process died right after its claim (Z2), before any counter moved
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash"),
        pytest.raises(ProcessDied),
    ):
        org.service.resize(a, "x", 5, kind=SEATS)
    assert "resize_request" in item(org, a, "x")
    # When the hold's deadline passes, and the sweeper runs, past the grace period, three times
    org.clock.now += 61
    for _ in range(3):
        org.sweep_after_the_grace_period()
    # Then the hold is released (its caller never confirmed it): the sweeper ended the dead
    # resize (its claim put x in the PendingIndex), then expired the hold; the organization's 10
    # seats are free again for member b. (Before: the claim refused the expiry (H2: "no resize in
    # flight") on every sweep, and nothing ended the resize of a counted resource: 4 seats held
    # past the deadline for good.)
    found = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=resource_key(a, "x", kind=SEATS), ConsistentRead=True
    ).get("Item")
    assert found is None
    org.service.create(b, "y", {}, "y", kind=SEATS, units=10)


@pytest.mark.parametrize("shards", [1, 4])
def test_a_members_grow_dead_between_the_levels_does_not_hold_the_organizations_seats_for_good(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats; member a holds x (2 seats), counted at both levels
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.drain()
    # And x's grow to 6 died after its organization admitted the 4 (O5), before its account's
    # move (Z3): x still holds 2, its organization 6; its caller never comes back
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()
    # When the sweeper runs, past the grace period, three times (no audit asked for, no recount)
    for _ in range(3):
        org.sweep_after_the_grace_period()
    # Then the organization's 4 seats nobody holds are given back (design §10.7: "the
    # settlement after the grace period brings it to exactly that"), and member b can take them.
    # (Before: nothing the system runs by itself found the claim, as a counted resource's resize
    # claim was not in the PendingIndex: only a PATCH/DELETE of x, an audit or a recount ended
    # it; the organization held 6 of 6 for 2 live, and every other member was refused.)
    claimed = "resize_request" in item(org, a, "x")
    refused = None
    try:
        org.service.create(b, "y", {}, "y", kind=SEATS, units=4)
    except LimitExceeded as error:
        refused = (error.scope, error.limit, error.used)
    assert (claimed, refused) == (False, None), (org.picture().used, sum(org.live().values()))


def test_a_dead_resize_whose_first_settlement_fails_is_still_found_by_the_next_sweep(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given x's grow to 6 dead between the levels (its organization holds 6 of 6, x 2)
    org = split_org(6, 1)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.drain()
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()
    # When the sweeper's first settlement of it cannot write at the organization (throttled)
    with (
        injected(
            org.clients.dynamodb,
            "UpdateItem",
            error="ThrottlingException",
            times=1000,
            where=at_an_organization,
        ),
        injected(
            org.clients.dynamodb_single_attempt,
            "UpdateItem",
            error="ThrottlingException",
            times=1000,
            where=at_an_organization,
        ),
    ):
        org.sweep_after_the_grace_period()
    # Then the claim keeps its PendingIndex entry (the sweep's clean-up of entries with nothing
    # left to do passes over a resize), and the next sweep ends it: b can take the 4 seats
    left = item(org, a, "x")
    assert "resize_request" in left
    assert "pending_shard" in left
    org.sweep_after_the_grace_period()
    assert "resize_request" not in item(org, a, "x")
    org.service.create(b, "y", {}, "y", kind=SEATS, units=4)
