"""A member's resize at both levels (issue 24: "a create, a grow or a hold is admitted only if it
fits both"; design.md §10.8): a grow is admitted by the organization first, then the account (and
undone at the organization if the account refuses it); a shrink is released by the account first,
then the organization. Exact at both levels, on a single counter item and a split one, under
races, lost responses, throttling and processes that die between the levels; against DynamoDB
Local, every component on one clock."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import InProgress, LimitExceeded, StoreUnavailable
from hybrid_counter.keys import resource_key
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.faults import ProcessDied, injected
from tests.integration.test_org_split import SEATS, Clock, SplitOrg, race

pytestmark = pytest.mark.integration

SHARDS = [1, 4]


@pytest.fixture
def split_org(settings: Settings, clients: Clients, stream: StreamReader) -> Callable[..., SplitOrg]:
    """An organization of ``limit`` seats over ``shards`` counter items (1: its single item)."""

    def make(limit: int, shards: int, members: int = 4) -> SplitOrg:
        return SplitOrg(settings, clients, stream, Clock(), limit, shards, members)

    return make


def item(org: SplitOrg, account: str, rid: str) -> dict[str, Any]:
    found = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=resource_key(account, rid, kind=SEATS), ConsistentRead=True
    ).get("Item")
    assert found is not None
    return found


def units_of(org: SplitOrg, account: str, rid: str) -> int:
    found = item(org, account, rid)
    assert "resize_request" not in found, found
    return int(found["units"]["N"])


def grow_dies_between_the_levels(org: SplitOrg, account: str, rid: str, target: int) -> None:
    """A grow of ``rid`` to ``target`` whose process dies after its organization's move (the
    first single-attempt write), before its account's: the claim stays."""
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.resize(account, rid, target, kind=SEATS)


def assert_exact(org: SplitOrg) -> None:
    """Once drained and swept (a count the stream path found held by a resize is left to the
    sweeper), at the organization and at each member: both counters equal the live units (each
    shard those of the resources it admitted), and the claims stay within the limit."""
    org.sweep_after_the_grace_period()
    picture = org.picture()
    live = org.live_on_shards()
    total = sum(units for units, _ in live.values())
    assert total <= org.limit
    assert (picture.best_effort, picture.eventual) == (total, total), (picture, live)
    for number, shard in picture.shards.items():
        held = sum(units for units, n in live.values() if n == number)
        assert (shard.state.best_effort, shard.state.eventual) == (held, held), number
    if picture.basis is not None:
        assert picture.claims <= picture.basis.limit
    for account in org.accounts:
        usage = org.service.usage(account).kinds.get(SEATS)
        mine = sum(units for key, (units, _) in live.items() if key.startswith(f"{account}/"))
        assert usage is None or (usage.best_effort, usage.eventual) == (mine, mine), account


@pytest.mark.parametrize("shards", SHARDS)
def test_a_members_grow_and_shrink_move_both_levels_and_the_organization_refuses_past_its_limit(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 10 seats; a holds x (2), b holds y (3), both counted at both levels
    org = split_org(10, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=3)
    org.drain()
    # When x grows to 5
    assert org.service.resize(a, "x", 5, kind=SEATS).units == 5
    assert_exact(org)
    # Then y cannot grow to 6 (11 of 10): refused by the organization, with its numbers, and
    # nothing moved at either level
    with pytest.raises(LimitExceeded) as refused:
        org.service.resize(b, "y", 6, kind=SEATS)
    assert (refused.value.scope, refused.value.limit, refused.value.used) == ("organization", 10, 8)
    assert units_of(org, b, "y") == 3
    assert_exact(org)
    # And its dry run says so, at the organization
    answer = org.service.would_resize(b, "y", 6, kind=SEATS)
    assert (answer.would_admit, answer.scope) == (False, "organization")
    assert org.service.would_resize(b, "y", 5, kind=SEATS).would_admit is True
    # And y grows to exactly the limit
    assert org.service.resize(b, "y", 5, kind=SEATS).units == 5
    assert_exact(org)
    # And a shrink frees its units at both levels: another member's create takes them
    assert org.service.resize(a, "x", 1, kind=SEATS).units == 1
    org.service.create(org.accounts[2], "z", {}, kind=SEATS, units=4)
    assert_exact(org)
    assert sum(org.live().values()) == 10


@pytest.mark.parametrize("shards", SHARDS)
def test_a_grow_its_account_refuses_is_undone_at_the_organization(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given a member that may hold 4 seats, holding 2, in an organization of 10
    org = split_org(10, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 4, kind=SEATS)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    # When x asks to grow to 5: the organization admits, the account refuses
    with pytest.raises(LimitExceeded) as refused:
        org.service.resize(a, "x", 5, kind=SEATS)
    # Then the refusal is the account's, and the organization's admission was undone
    assert (refused.value.scope, refused.value.limit) == ("account", 4)
    assert units_of(org, a, "x") == 2
    assert_exact(org)
    # And the other member can take all the rest
    org.service.create(b, "y", {}, "y", kind=SEATS, units=8)
    assert_exact(org)


@pytest.mark.parametrize("shards", SHARDS)
def test_members_growing_at_once_for_the_organizations_last_seats_are_admitted_exactly(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 12 seats, four members holding 2 each (4 seats free)
    org = split_org(12, shards)
    for account in org.accounts:
        org.service.create(account, "r", {}, "r", kind=SEATS, units=2)
    # When all four grow by 2 at once, each on a process of its own
    calls: list[Callable[[], Any]] = [
        partial(org.new_service().resize, account, "r", 4, kind=SEATS) for account in org.accounts
    ]
    admitted, refused, retryable = race(calls)
    # Then at most two are admitted; the rest are refused by the organization or left to a retry
    assert admitted + refused + retryable == 4
    assert admitted <= 2
    assert sum(org.live().values()) == 8 + 2 * admitted
    assert_exact(org)
    # And retries fill the organization exactly, never past it
    scopes = []
    for account in org.accounts:
        try:
            org.service.resize(account, "r", 4, kind=SEATS)
        except LimitExceeded as error:
            scopes.append(error.scope)
    assert set(scopes) <= {"organization"}
    assert sum(org.live().values()) == 12
    assert_exact(org)


@pytest.mark.parametrize("shards", SHARDS)
def test_a_lost_response_of_the_organizations_grow_is_confirmed_and_the_resize_goes_on(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    org = split_org(10, shards)
    a = org.accounts[0]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    # When the organization's grow applies but its response is lost
    with injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="after"):
        assert org.service.resize(a, "x", 6, kind=SEATS).units == 6
    # Then the grow went on, counted once at each level
    assert_exact(org)


@pytest.mark.parametrize("shards", SHARDS)
def test_a_grow_whose_process_died_between_the_levels_is_undone_at_the_organization_after_the_grace_period(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given a counted resource of 2 seats in an organization of 6
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.drain()
    # When its grow to 6 dies after the organization admitted it, before its account's move
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()  # the stream path notes the organization's move on the claim
    assert item(org, a, "x")["org_resized"]["S"] == item(org, a, "x")["resize_request"]["S"]
    # Then, meanwhile, the organization holds the 4 seats: a create of b's is refused, not admitted
    with pytest.raises(LimitExceeded):
        org.service.create(b, "y", {}, "y", kind=SEATS, units=1)
    # And after the grace period the sweeper's audit ends it at the size its account holds,
    # released at the organization too
    org.clock.now += org.settings.pending_grace_seconds + 1
    grace = org.settings.pending_grace_seconds
    sweeper = Sweeper(org.settings.table_name, org.counter, grace, org.clients, clock=org.clock)
    sweeper.request_audit("test")
    assert sweeper.audit().resizes_ended >= 1  # (the audit ends every dead resize of the table)
    assert units_of(org, a, "x") == 2
    assert_exact(org)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=4)
    assert_exact(org)


@pytest.mark.parametrize("shards", SHARDS)
def test_a_shrink_stopped_after_its_accounts_release_is_released_at_the_organization_after_the_grace_period(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given a resource of 5 seats in an organization of 6
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=5)
    # When its shrink to 1 is released at its account, and its organization's release is
    # throttled on every attempt
    with (
        injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=100, skip=1
        ),
        pytest.raises(StoreUnavailable),
    ):
        org.service.resize(a, "x", 1, kind=SEATS)
    # Then the stream path does not finish it (its organization still holds the 5), and a
    # retry before the grace period is told to retry
    org.drain()
    assert "resize_request" in item(org, a, "x")
    with pytest.raises(InProgress):
        org.service.resize(a, "x", 1, kind=SEATS)
    # And after the grace period a PATCH settles it: released at the organization, finished
    org.clock.now += org.settings.pending_grace_seconds + 1
    assert org.service.resize(a, "x", 1, kind=SEATS).units == 1
    assert_exact(org)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=5)
    assert_exact(org)


@pytest.mark.parametrize("shards", SHARDS)
def test_a_grow_its_account_refused_whose_undo_was_throttled_is_undone_after_the_grace_period(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given a member that may hold 4, holding 2, in an organization of 6
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 4, kind=SEATS)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    # When its grow to 5 is admitted by the organization, refused by the account, and the undo
    # at the organization is throttled on every attempt
    with (
        injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=100, skip=1
        ),
        pytest.raises(LimitExceeded) as refused,
    ):
        org.service.resize(a, "x", 5, kind=SEATS)
    assert refused.value.scope == "account"
    # Then the claim stays (the organization holds the 3 seats meanwhile, never less)
    assert "resize_request" in item(org, a, "x")
    with pytest.raises(LimitExceeded):
        org.service.create(b, "y", {}, "y", kind=SEATS, units=2)
    # And after the grace period the audit undoes it at the organization
    org.clock.now += org.settings.pending_grace_seconds + 1
    assert org.service.repairs.settle_stale_resize(a, "x", item(org, a, "x"))
    assert units_of(org, a, "x") == 2
    assert_exact(org)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=4)
    assert_exact(org)


@pytest.mark.parametrize("grow", [True, False], ids=["grow", "shrink"])
@pytest.mark.parametrize("shards", SHARDS)
def test_a_resize_whose_process_died_after_both_levels_moved_is_finished_by_the_stream_path(
    split_org: Callable[..., SplitOrg], shards: int, grow: bool
) -> None:
    # Given a resource of 3 seats in an organization of 10
    org = split_org(10, shards)
    a = org.accounts[0]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=3)
    target = 6 if grow else 1
    # When its resize moves both levels, then dies before giving the resource its new size
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.resize(a, "x", target, kind=SEATS)
    # Then the stream path finishes it (a grow on its account's move, a shrink on its
    # organization's), exactly at both levels, and counts it at both before any sweep
    # (the shrink's finishing write is on the account's item: its record comes after the
    # organization's partition was read, hence a second drain)
    org.drain()
    org.drain()
    assert units_of(org, a, "x") == target
    picture = org.picture()
    assert (picture.best_effort, picture.eventual) == (target, target), picture
    assert_exact(org)
