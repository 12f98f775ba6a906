"""Review 43 (hostile): a member's resize across a change of S (design.md §10.6, §10.7): what
the review found to hold, kept as checks (each shard's counts, the shards' sum against the units
live, no shard left frozen, no allowance created)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.counters.split import shard_of_resource
from hybrid_counter.errors import LimitExceeded, StoreUnavailable
from hybrid_counter.keys import org_pk
from tests.faults import injected
from tests.integration.test_member_resizes import (
    assert_exact,
    grow_dies_between_the_levels,
    item,
    split_org,
    units_of,
)
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def rid_on(shard: int, shards: int, stem: str) -> str:
    for n in range(1000):
        rid = f"{stem}{n}"
        if shard_of_resource(rid, shards) == shard:
            return rid
    raise AssertionError


def settled(org: SplitOrg) -> None:
    assert_exact(org)
    picture = org.picture()
    assert not picture.frozen, picture
    assert org.service.orgs.splits.record(org.org_id, SEATS) is None
    assert picture.used == sum(org.live().values()) <= org.limit


# Two of the four paths the review ran (all four held: 1 -> 4 -> 2 and 4 -> 1 too), to keep the
# suite's minutes for evidence it does not already have.
PATHS = [(4, [2, 16]), (16, [4, 1, 8])]


@pytest.mark.parametrize(("start", "changes"), PATHS)
def test_a_grow_dead_between_the_levels_is_undone_on_its_shard_after_s_changed(
    split_org: Callable[..., SplitOrg], start: int, changes: list[int]
) -> None:
    org = split_org(16, start)
    a, b = org.accounts[:2]
    x = rid_on(start - 1, start, "x")
    org.service.create(a, x, {}, x, kind=SEATS, units=2)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=3)
    org.drain()
    grow_dies_between_the_levels(org, a, x, 6)  # +4 on x's shard
    for s in changes:
        org.service.set_org_shards(org.org_id, s)
        org.service.create(b, f"z{s}", {}, f"z{s}", kind=SEATS, units=1)
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    assert org.service.repairs.settle_stale_resize(a, x, item(org, a, x))
    assert units_of(org, a, x) == 2
    settled(org)
    left = org.limit - sum(org.live().values())
    org.service.create(b, "w", {}, "w", kind=SEATS, units=left)
    with pytest.raises(LimitExceeded):
        org.service.create(b, "v", {}, "v", kind=SEATS, units=1)
    settled(org)


@pytest.mark.parametrize(("start", "changes"), PATHS)
def test_a_shrink_whose_organizations_release_is_owed_is_released_on_its_shard_after_s_changed(
    split_org: Callable[..., SplitOrg], start: int, changes: list[int]
) -> None:
    org = split_org(10, start)
    a, b = org.accounts[:2]
    x = rid_on(start - 1, start, "x")
    org.service.create(a, x, {}, x, kind=SEATS, units=5)
    org.drain()
    with (
        injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=100, skip=1
        ),
        pytest.raises(StoreUnavailable),
    ):
        org.service.resize(a, x, 1, kind=SEATS)
    for s in changes:
        org.service.set_org_shards(org.org_id, s)
        org.service.create(b, f"z{s}", {}, f"z{s}", kind=SEATS, units=1)
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    assert org.service.resize(a, x, 1, kind=SEATS).units == 1
    settled(org)
    left = org.limit - sum(org.live().values())
    org.service.create(b, "w", {}, "w", kind=SEATS, units=left)
    with pytest.raises(LimitExceeded):
        org.service.create(b, "v", {}, "v", kind=SEATS, units=1)
    settled(org)


@pytest.mark.parametrize(("start", "changes"), PATHS)
def test_grows_after_s_changed_fill_the_organization_exactly(
    split_org: Callable[..., SplitOrg], start: int, changes: list[int]
) -> None:
    org = split_org(10, start)
    a = org.accounts[0]
    xs = [rid_on(n % start, start, f"x{n}-") for n in range(4)]
    for x in xs:
        org.service.create(a, x, {}, x, kind=SEATS, units=1)
    for s in changes:
        org.service.set_org_shards(org.org_id, s)
    org.drain()
    scopes = []
    for x in xs * 3:
        try:
            org.service.resize(a, x, units_of(org, a, x) + 1, kind=SEATS)
        except LimitExceeded as error:
            scopes.append(error.scope)
    assert set(scopes) == {"organization"}
    assert sum(org.live().values()) == 10
    settled(org)


@pytest.mark.parametrize(("start", "changes"), PATHS)
def test_a_dead_grow_of_an_uncounted_resource_is_settled_by_the_sweeper_after_s_changed(
    split_org: Callable[..., SplitOrg], start: int, changes: list[int]
) -> None:
    org = split_org(16, start)
    a, b = org.accounts[:2]
    x = rid_on(start - 1, start, "x")
    org.service.create(b, "y", {}, "y", kind=SEATS, units=3)
    org.drain()
    org.service.create(a, x, {}, x, kind=SEATS, units=2)  # not counted yet at either level
    grow_dies_between_the_levels(org, a, x, 6)
    org.drain()  # its counts meet the claim: left to the sweeper
    for s in changes:
        org.service.set_org_shards(org.org_id, s)
        org.service.create(b, f"z{s}", {}, f"z{s}", kind=SEATS, units=1)
    org.drain()
    org.sweep_after_the_grace_period()
    assert units_of(org, a, x) == 2
    settled(org)
    left = org.limit - sum(org.live().values())
    org.service.create(b, "w", {}, "w", kind=SEATS, units=left)
    with pytest.raises(LimitExceeded):
        org.service.create(b, "v", {}, "v", kind=SEATS, units=1)
    settled(org)


@pytest.mark.parametrize(("start", "changes"), PATHS)
def test_a_grow_whose_organizations_move_was_lost_is_settled_by_its_retry_after_s_changed(
    split_org: Callable[..., SplitOrg], start: int, changes: list[int]
) -> None:
    from hybrid_counter.errors import InProgress

    org = split_org(16, start)
    a, b = org.accounts[:2]
    x = rid_on(start - 1, start, "x")
    org.service.create(a, x, {}, x, kind=SEATS, units=2)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=3)
    org.drain()

    def org_read(body: dict) -> bool:
        return str(body.get("Key", {}).get("pk", {}).get("S", "")) == org_pk(org.org_id)

    # O5 applied, its response lost; reading the shard back fails: unconfirmed, the claim stays
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="after"),
        injected(org.clients.dynamodb, "GetItem", error="ThrottlingException", times=1000, where=org_read),
        pytest.raises((InProgress, StoreUnavailable)),
    ):
        org.service.resize(a, x, 6, kind=SEATS)
    assert "resize_request" in item(org, a, x)
    for s in changes:
        org.service.set_org_shards(org.org_id, s)
        org.service.create(b, f"z{s}", {}, f"z{s}", kind=SEATS, units=1)
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    # the caller's retry settles the dead claim, then grows it
    assert org.service.resize(a, x, 6, kind=SEATS).units == 6
    settled(org)
    left = org.limit - sum(org.live().values())
    org.service.create(b, "w", {}, "w", kind=SEATS, units=left)
    with pytest.raises(LimitExceeded):
        org.service.create(b, "v", {}, "v", kind=SEATS, units=1)
    settled(org)
