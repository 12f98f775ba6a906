"""Review 71 (hostile, on 2e3eb8c: hold_levels.py). Against DynamoDB Local, one clock; the PATCH's
steps made here, call by call (review 70's fixture).

F4: where a hold's resize in flight is "not known" at a level (another resize on that counter
overwrote ``last_resize``), hold_levels counts it for a dry run at its size before. For a grow
that is the smaller size; for a shrink, the larger: a shrink moved at the account (its item not
finished yet: its process slow or dead, the stream path lagging) is subtracted at its old size
from a use that already lost the difference. The dry run admits what no order admits, and the
request (the shrink landing while it waits, then the hold expired) answers 409: review 70 F2's
disagreement, back whenever any other resize of the account's kind comes between.

Fixed the same day (resources/hold_levels.py).
"""

from __future__ import annotations

import pytest

from tests.integration.test_hold_expiry_in_flight import finish_what_is_left, waiting_service
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import answer_of
from tests.integration.test_review70_resize_units import resize_moved_not_finished

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]


def test_a_dry_run_beside_a_shrink_whose_token_was_overwritten_agrees_with_the_create(
    world: World,
) -> None:
    """Account of 5 seats: p (1) and q (2) for good, h (2) a hold past its deadline (5 of 5). h's
    owner PATCHes h to 1: claimed, the counter moved (4 of 5), the item not finished. q's owner
    PATCHes q to 1 (3 of 5; last_resize now q's). A create of 4: p and q hold 2 for good, so 2 +
    4 > 5 in every order. The dry run: 3 - 2 + 4 <= 5, would_admit. The request (the shrink
    landing while it waits, then h expired: 2 + 4 > 5) answers 409."""
    world.service.set_limit(world.account, 5, kind=SEATS)
    world.hold("h", units=2, seconds=10)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.service.create(world.account, "q", {}, "q", kind=SEATS, units=2)
    world.drain()
    world.clock.now += 11
    claimed = resize_moved_not_finished(world, "h", 2, 1, grow=False)
    world.service.resize(world.account, "q", 1, kind=SEATS)
    assert world.counters()[0] == 3

    dry = world.service.would_create(world.account, "x", {}, "x", kind=SEATS, units=4)

    def land() -> None:
        world.service._resize._finish(world.account, SEATS, "h", "owners-patch", claimed=claimed, target=1)

    answer = answer_of(
        lambda: waiting_service(world, [land]).create(world.account, "x", {}, "x", kind=SEATS, units=4),
        figures=True,
    )
    assert (dry.would_admit, answer.split(" (")[0]) == (False, "409 account"), (
        f"p and q hold 2 of 5 for good: no order admits 4; the dry run said would_admit="
        f"{dry.would_admit} (used {dry.used}), the create answered {answer}"
    )
