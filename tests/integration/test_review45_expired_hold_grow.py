"""Review 45 (hostile, over HTTP): a PATCH grew a hold whose deadline had passed, answered 200
with the hold 9 units strong and its deadline in the past, and its organization held the grown
units (another member refused) until the sweeper's run. A grow of an expired hold is now refused
(409 HoldExpired), by a read and by its claim's condition (the other side of the expiry's); a
shrink is still made (it only gives units back)."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import HoldExpired, NotFound
from tests.explorer.scheduler import Race
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration
__all__ = ["world"]


def test_a_grow_of_a_hold_past_its_deadline_is_refused_and_a_shrink_is_made(world: World) -> None:
    # Given a hold of 2 seats for 10 s, counted, its deadline passed (no sweeper run yet)
    world.hold("h", units=2, seconds=10)
    world.drain()
    world.clock.now += 11
    # When it is grown, or a dry run of the grow asks
    # Then both are refused as expired, and nothing moved
    with pytest.raises(HoldExpired):
        world.service.resize(world.account, "h", 3, kind=SEATS)
    with pytest.raises(HoldExpired):
        world.service.would_resize(world.account, "h", 3, kind=SEATS)
    world.assert_exact()
    # And a shrink is made
    assert world.service.resize(world.account, "h", 1, kind=SEATS).units == 1
    world.drain()
    world.assert_exact()


def test_a_grow_judged_before_the_deadline_is_made_and_its_expiry_releases_all_of_it(world: World) -> None:
    # Given a hold of 2 seats for 10 s, counted
    world.hold("h", units=2, seconds=10)
    world.drain()
    grower = world.service
    with Race(world.clients.dynamodb, world.clients.dynamodb_single_attempt) as race:
        # When a grow to 3 has judged it by its clock before the deadline, and its claim is about
        # to be sent as the deadline passes ...
        grow = race.start("grow", lambda: grower.resize(world.account, "h", 3, kind=SEATS))
        stop_before(race, grow, lambda call: "resize_request = :req" in call.body.get("UpdateExpression", ""))
        world.clock.now += 11
        race.finish(grow)
    # Then it is made (before its deadline by its own clock, as a confirm would be: the expiry
    # waits for no resize in flight), and the expiry then releases all 3 seats, once
    assert grow.error is None, grow.error
    world.drain()
    assert world.sweeper().sweep().holds_expired >= 1  # (the table's other tests' holds too)
    world.drain()
    with pytest.raises(NotFound):
        world.service.get(world.account, "h", kind=SEATS)
    world.assert_exact()
