"""Review 54 (hostile): the settlement (Z5) of a member's dead resize trusts the organization's
marks (``org_resized``/``org_unresized``) or the shard's ``last_resize`` to say whether O5 applied
(org_level.holds_target). Both are missing when the organization's record is late past the grace
period (a failed batch waits in the retry queue: visibility timeout 360 s > grace 300 s, the
model of reliability.md line 60/312) and another member's resize on the same shard overwrote
``last_resize``. The delete's takeover in the same situation never guesses (the census of the
organization's range decides: mutations 93/94); the resize's settlement guesses "O5 did not
apply":

- a dead shrink whose O5 applied is released at the organization a second time: the
  organization undercounts, and admits past its limit;
- a dead grow whose O5 applied is not undone there: the organization holds the units for good.

Fixed (2026-11-27, twelfth session): where nothing confirms O5 (``holds_target`` None), the
settlement ends the claim at its account's size, moves nothing at the organization, and asks for
the census of the organization's range first (a durable request, ``ORG#<id>``/``REPAIR#...``),
which the sweeper takes at its next run (resize_settlement.py ``_org_moves``; mutation 194).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.counters.split import shard_of_resource
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk
from tests.faults import ProcessDied, injected
from tests.integration.test_member_resizes import grow_dies_between_the_levels, item, split_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def drain_accounts_only(org: SplitOrg) -> None:
    """The members' partitions are counted; the organization's records wait (late)."""
    for pk in [account_pk(a) for a in org.accounts]:
        while records := org.stream.records_of(pk):
            assert process_stream_batch(records, org.counter).failed_sequence_numbers == []


def same_shard_id(x: str, shards: int) -> str:
    want = shard_of_resource(x, shards)
    return next(f"y{n}" for n in range(1000) if shard_of_resource(f"y{n}", shards) == want)


def used_at_org(org: SplitOrg) -> tuple[int, int]:
    picture = org.picture()
    return picture.best_effort, picture.eventual


@pytest.mark.parametrize("shards", [1, 4])
def test_a_dead_members_shrink_whose_org_record_is_late_is_released_there_once(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats: member a holds x (4), member b holds y (1), counted
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    y = same_shard_id("x", shards)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
    org.service.create(b, y, {}, y, kind=SEATS, units=1)
    org.drain()
    assert item(org, a, "x").get("org_shard") == item(org, b, y).get("org_shard")
    assert used_at_org(org) == (5, 5)
    # And x's shrink to 1 released at its account (Z3) and at its organization (O5), its process
    # dead before Z4 (the claim stays)
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.resize(a, "x", 1, kind=SEATS)
    assert "resize_request" in item(org, a, "x")
    assert used_at_org(org) == (2, 2)
    # And the organization's records are late (its batch in the retry queue), while b's y grows
    # to 2 on the same shard (the shard's last_resize is now y's)
    drain_accounts_only(org)
    org.service.resize(b, y, 2, kind=SEATS)
    drain_accounts_only(org)
    assert used_at_org(org) == (3, 3)
    # When the sweeper settles x's dead shrink past the grace period (then the late records come)
    org.sweep_after_the_grace_period()
    assert "resize_request" not in item(org, a, "x")
    org.drain()
    org.sweep_after_the_grace_period()
    # Then the organization still holds what is live (x 1 + y 2 = 3): O5 applied once.
    # And b cannot create more than the 3 seats left.
    live = sum(org.live().values())
    held = used_at_org(org)
    admitted = 0
    for n in range(6):
        try:
            org.service.create(b, f"z{n}", {}, f"z{n}", kind=SEATS, units=1)
            admitted += 1
        except LimitExceeded:
            break
    org.drain()
    total = sum(org.live().values())
    assert (live, held, total) == (3, (3, 3), 6), f"live {live} held {held}; after creates: {total} of 6"


@pytest.mark.parametrize("shards", [1, 4])
def test_a_dead_members_grow_whose_org_record_is_late_is_undone_there(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats: member a holds x (2), member b holds y (1), counted
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    y = same_shard_id("x", shards)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, y, {}, y, kind=SEATS, units=1)
    org.drain()
    assert item(org, a, "x").get("org_shard") == item(org, b, y).get("org_shard")
    # And x's grow to 4 admitted at its organization (O5: +2), its process dead before Z3
    grow_dies_between_the_levels(org, a, "x", 4)
    assert used_at_org(org) == (5, 5)
    # And the organization's records are late, while b's y grows to 2 on the same shard
    drain_accounts_only(org)
    org.service.resize(b, y, 2, kind=SEATS)
    drain_accounts_only(org)
    # When the sweeper settles x's dead grow past the grace period, then the late records come,
    # and the sweeper runs twice more
    org.sweep_after_the_grace_period()
    assert "resize_request" not in item(org, a, "x")
    org.drain()
    org.sweep_after_the_grace_period()
    org.sweep_after_the_grace_period()
    # Then the organization holds what is live (x 2 + y 2 = 4), and the 2 seats left can be had
    live = sum(org.live().values())
    held = used_at_org(org)
    refused = None
    try:
        org.service.create(b, "z", {}, "z", kind=SEATS, units=2)
    except LimitExceeded as error:
        refused = (error.scope, error.limit, error.used)
    assert (live, held, refused) == (4, (4, 4), None)


@pytest.mark.parametrize("shards", [1, 4])
def test_another_members_expired_hold_blocks_a_create_at_the_organization_only_until_that_request(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats: member b holds h (4 seats) for 10 s, never confirmed
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.drain()
    # When its deadline passes (no sweeper run yet) and member a asks for 4 seats
    org.clock.now += 11
    refused = None
    try:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
    except LimitExceeded as error:
        refused = (error.scope, error.limit, error.used)
    # Then (as §12 promises for a refusal "at either level") the expired hold blocks it no longer
    # than that request: a's create is admitted
    assert refused is None
