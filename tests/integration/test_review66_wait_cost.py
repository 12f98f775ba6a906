"""Review 66: what one refusal costs that meets dead expiry claims (design.md §12): a claim
younger than CLAIM_FRESH_SECONDS is waited for (its release usually lands within milliseconds),
each such claim read once per poll of the Waiter, up to CLAIMS_WAITED_FOR of them; an older one
is given up at once, read once. Before the fix a refusal read each of 10 dead claims 20 times
(216 GetItems, 1.4 to 2 s) for as long as they stood, up to the grace period."""

from __future__ import annotations

import pytest

from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import StoreUnavailable
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources.holds import CLAIM_FRESH_SECONDS, CLAIMS_WAITED_FOR
from tests.integration.test_hold_expiry_in_flight import claim_its_expiry, finish_what_is_left
from tests.integration.test_holds import SEATS, World, world

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]

POLLS = 20


def refused_with_reads(world: World) -> int:
    """One create of 1 refused (503): the GetItems it made."""
    waiter = Waiter(attempts=POLLS, delay=0, sleep=lambda _: None)
    service = ResourceService(
        world.settings, world.clients, effects=Effects(clock=world.clock, waiter=waiter)
    )
    gets: list[str] = []
    handler = world.clients.dynamodb.meta.events
    handler.register("provide-client-params.dynamodb.GetItem", lambda **_: gets.append("g"))
    try:
        with pytest.raises(StoreUnavailable):
            service.create(world.account, "x", {}, "x", kind=SEATS)
    finally:
        handler.unregister("provide-client-params.dynamodb.GetItem")
    return len(gets)


def test_a_refusal_meeting_ten_dead_expiry_claims_reads_within_its_bound(world: World) -> None:
    # Given an account of 10 seats, ten holds of 1 past their deadline, each claimed by an
    # expiry whose process died just now
    world.service.set_limit(world.account, 10, kind=SEATS)
    for n in range(10):
        world.hold(f"h{n}", units=1, seconds=10)
    world.drain()
    world.clock.now += 11
    for n in range(10):
        claim_its_expiry(world, f"h{n}")

    # When a create of 1 is refused while the claims are fresh, and again once they are old
    fresh = refused_with_reads(world)
    world.clock.now += CLAIM_FRESH_SECONDS + 1
    old = refused_with_reads(world)

    # Then the fresh claims were read once more a poll each, and the old ones once: given up
    # at once (the rest of the reads are the create's own, the same both times)
    print(f"\nfresh dead claims: {fresh} GetItems; old: {old}")
    assert fresh - old == CLAIMS_WAITED_FOR * POLLS
    assert old <= 10 + 8
