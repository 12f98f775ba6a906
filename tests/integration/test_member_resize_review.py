"""Hostile review of member resizes (design.md §10.7; commit 5e193d3): sequences that end with a
counter not equal to the live units, a unit released twice or never, or a stream path stuck.
Each was proven first as an xfail(strict=True) test, then fixed: a lease on the claim for its one
settler (D1), an organization's count of a resource under resize left to the end of the resize
(D2, D3), a grow whose organization cannot be read reverted (D4)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk, org_pk
from hybrid_counter.resources.resize_settlement import ResizeSettlement
from tests.faults import ProcessDied, injected
from tests.integration.test_member_resizes import (
    assert_exact,
    grow_dies_between_the_levels,
    item,
    split_org,
    units_of,
)
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration

__all__ = ["split_org"]  # the fixture, re-exported


STUCK: list[Any] = []  # batches whose processing raised: redelivered by redeliver() (as Lambda retries)


def drain_pk(org: SplitOrg, pk: str) -> list[Any]:
    """Process one item collection's records (in order); what failed (a batch that raised is
    kept, in order, for redeliver)."""
    failed: list[Any] = []
    while records := org.stream.records_of(pk):
        try:
            failed += process_stream_batch(records, org.counter).failed_sequence_numbers
        except Exception as error:  # the Lambda invocation would fail: its batch is retried
            STUCK.append(records)
            failed.append(repr(error))
        if failed:
            break
    return failed


def redeliver(org: SplitOrg) -> None:
    while STUCK:
        assert process_stream_batch(STUCK.pop(0), org.counter).failed_sequence_numbers == []


def shard0(org: SplitOrg) -> tuple[int, int]:
    state = org.picture().get(0).state
    return state.best_effort, state.eventual


# ---- D1: two settlements each undo the same grow at the organization -----------------------------
def test_two_settlements_of_a_dead_grow_release_it_once_at_the_organization(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization of 10 seats (its single item): a holds x (2), b holds y (2), counted
    org = split_org(10, 1)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=2)
    org.drain()
    # And x's grow to 6 died after the organization admitted it (+4 there), before its account's move
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()  # org_resized marked on the claim
    org.clock.now += org.settings.pending_grace_seconds + 1
    # When a first settlement undoes it at the organization (-4), then dies before reverting the claim
    # (its first write names it the claim's settler; its second would have reverted the claim)
    with injected(org.clients.dynamodb, "UpdateItem", when="crash", skip=1), pytest.raises(ProcessDied):
        org.new_service().repairs.settle_stale_resize(a, "x", item(org, a, "x"))
    assert shard0(org)[0] == 4  # 2 + 2 (+4 - 4)
    # And another member's resize lands on the same shard (its last_resize is now b's), before the
    # stream path has marked the undo on x's claim
    assert org.service.resize(b, "y", 3, kind=SEATS).units == 3
    # And a second settlement (the sweeper's audit, a PATCH, a DELETE's takeover) comes at once:
    # the first one's lease stands, so it leaves the claim alone
    assert not org.new_service().repairs.settle_stale_resize(a, "x", item(org, a, "x"))
    # And once the lease is older than the grace period (the stream path has noted the undo on
    # the claim by then), the next settlement takes it over
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    assert org.new_service().repairs.settle_stale_resize(a, "x", item(org, a, "x"))
    # Then x is back at 2 and the organization holds exactly 2 + 3: not the 4 seats released twice
    assert units_of(org, a, "x") == 2
    org.drain()
    # And the organization, holding 5 of its 10 seats, refuses a create of 9 (it would be 14 of 10)
    c = org.accounts[2]
    with pytest.raises(LimitExceeded):
        org.service.create(c, "z", {}, "z", kind=SEATS, units=9)
    assert shard0(org) == (5, 5)
    assert_exact(org)


# ---- D2: an organization's count of a resource a resize holds, already counted at its account ---
def test_the_organizations_count_of_a_resource_under_resize_does_not_stall_the_stream(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given a member's resource x (2) whose account counted it, its organization's record not yet seen
    org = split_org(10, 1)
    a = org.accounts[0]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    assert drain_pk(org, account_pk(a)) == []
    assert item(org, a, "x")["counter_processed"]["BOOL"] is True
    # And a grow of x to 4 whose process died after its organization's move (the claim stands)
    grow_dies_between_the_levels(org, a, "x", 4)
    # When the stream path reads the organization's records (the admission of x, then the grow)
    failed = drain_pk(org, org_pk(org.org_id))
    # Then they are processed (the count left to the end of the resize, the grow marked on the claim)
    STUCK.clear()
    assert failed == []
    assert item(org, a, "x").get("org_resized", {}).get("S") == item(org, a, "x")["resize_request"]["S"]


def test_a_dead_grow_of_a_resource_not_yet_counted_at_its_organization_is_undone_there(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization of 10 seats: b holds y (2), counted; a creates x (2), its account's
    # record seen, its organization's not yet
    org = split_org(10, 1)
    a, b = org.accounts[:2]
    org.service.create(b, "y", {}, "y", kind=SEATS, units=2)
    org.drain()
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    assert drain_pk(org, account_pk(a)) == []
    # And x's grow to 6 dies after its organization admitted it, before its account's move
    grow_dies_between_the_levels(org, a, "x", 6)
    # And y grows to 3 (the shard's last_resize is now y's)
    assert org.service.resize(b, "y", 3, kind=SEATS).units == 3
    drain_pk(org, account_pk(b))
    drain_pk(org, org_pk(org.org_id))  # stuck or not: whatever the stream path can do
    # When, after the grace period, the audit settles x's dead grow
    org.clock.now += org.settings.pending_grace_seconds + 1
    org.new_service().repairs.settle_stale_resize(a, "x", item(org, a, "x"))
    # Then x holds 2 and once everything is drained (the stuck records retried) the organization
    # holds exactly 2 + 3
    assert units_of(org, a, "x") == 2
    redeliver(org)
    org.drain()
    assert shard0(org) == (5, 5)
    # And a create of the 5 seats left is admitted (not refused 409 on seats nobody holds)
    org.service.create(org.accounts[2], "z", {}, "z", kind=SEATS, units=5)
    assert_exact(org)


# ---- D4: a grow whose organization could not be read leaves its claim ---------------------------
def test_a_grow_whose_organization_could_not_be_read_is_reverted(
    split_org: Callable[..., SplitOrg],
) -> None:
    org = split_org(10, 1)
    a = org.accounts[0]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.drain()
    # When x's grow finds its organization's counter unreadable (throttled on every attempt)
    with (
        injected(org.clients.dynamodb, "Query", error="ThrottlingException", times=100),
        pytest.raises(Exception),  # noqa: B017 - the API answers 429 for it (app.py)
    ):
        org.service.resize(a, "x", 4, kind=SEATS)
    # Then nothing moved, and the claim was reverted (answered 429, "retry"): the resource can be
    # resized (or deleted) again at once, not 503 InProgress for the grace period
    assert "resize_request" not in item(org, a, "x")
    assert org.service.resize(a, "x", 4, kind=SEATS).units == 4
    assert_exact(org)


def test_two_settlements_at_once_of_a_dead_grow_release_it_once_at_the_organization(
    split_org: Callable[..., SplitOrg], monkeypatch: pytest.MonkeyPatch
) -> None:
    org = split_org(10, 1)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=2)
    org.drain()
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    seen = item(org, a, "x")
    # When two settlers read what the counters hold, then both go on (the schedule pinned by a
    # barrier after each one's read)
    both_read = threading.Barrier(2)
    settlers = [org.new_service() for _ in range(2)]
    read = ResizeSettlement.held

    def pinned(*args: Any, **kwargs: Any) -> Any:
        held = read(*args, **kwargs)
        both_read.wait(timeout=10)
        return held

    monkeypatch.setattr(ResizeSettlement, "held", pinned)
    ended: list[bool] = []
    threads = [
        threading.Thread(target=lambda s=s: ended.append(s.repairs.settle_stale_resize(a, "x", seen)))
        for s in settlers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then one of them ended it, and the organization released the 4 seats once
    assert sorted(ended) == [False, True]
    assert units_of(org, a, "x") == 2
    org.drain()
    assert shard0(org) == (4, 4)
    assert_exact(org)


def test_a_settler_slower_than_its_lease_leaves_the_organizations_move_to_the_next_one(
    split_org: Callable[..., SplitOrg], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a: x (2) whose grow to 6 died after its organization admitted it (+4 there), and b: y
    # (2), at an organization of 10 seats; past the grace period
    org = split_org(10, 1)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=2)
    org.drain()
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    # When a settler takes the lease, then stalls (a sweeper's process, throttled reads retried)
    # past the grace period before its organization's write; meanwhile another settler takes the
    # stale lease over and settles it (the 4 seats released there, the claim reverted), the
    # stream path notes it, and b's resize of y lands on the same shard (its last_resize is b's)
    from hybrid_counter.resources.org_level import OrgLevel

    read = OrgLevel.holds_target

    def stalled(self: OrgLevel, *args: Any, **kwargs: Any) -> Any:
        target = read(self, *args, **kwargs)
        monkeypatch.setattr(OrgLevel, "holds_target", read)
        org.clock.now += org.settings.pending_grace_seconds + 1
        assert org.new_service().repairs.settle_stale_resize(a, "x", item(org, a, "x"))
        org.drain()
        assert org.service.resize(b, "y", 3, kind=SEATS).units == 3
        return target

    monkeypatch.setattr(OrgLevel, "holds_target", stalled)
    ended = org.new_service().repairs.settle_stale_resize(a, "x", item(org, a, "x"))
    # Then the slow settler made no write at the organization (its lease too old to be the only
    # settler's): the 4 seats were released there once, and the organization holds 2 + 3
    assert not ended
    org.drain()
    assert units_of(org, a, "x") == 2
    assert shard0(org) == (5, 5)
    c = org.accounts[2]
    with pytest.raises(LimitExceeded):
        org.service.create(c, "z", {}, "z", kind=SEATS, units=6)
    assert_exact(org)
