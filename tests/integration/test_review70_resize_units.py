"""Review 70 (hostile, on 75ef0d3: an expired hold under a resize in flight waited for, then
expired). Against DynamoDB Local, one clock; the PATCH's steps are made here, call by call.

A resize moves the counters first (step 3: by ``resize_to - resize_from``) and only then gives
the item its new units (step 4). The reclaim counts a hold under a resize by its index entry's
``units``, which is ``resize_from`` until step 4, whatever the counters hold:

F1 (a grow): a hold's grow, claimed before its deadline, its counters moved, its process dead
(or slower than the wait) past the deadline: the reclaim gives the hold up at its old size, so a
create its new size would make room for is answered 409. No order explains it: the grow placed
anywhere (or nowhere), the create after the deadline expires the hold and takes its room.

F2 (a shrink): a shrink of an expired hold, its counters moved, its item not finished: the dry
run subtracts the old size from a use that already lost the difference (would_admit where no
order admits), and the request, the shrink given up, counts the old size as what it could
free (503 where 409 is certain).

Fixed the same day: what a given-up (or dry-run counted) hold still holds at each level is read
from its counters' last tokens (resources/hold_levels.py; design.md §12).
"""

from __future__ import annotations

import pytest

from hybrid_counter.resources.table import Item
from tests.integration.test_hold_expiry_in_flight import (
    finish_what_is_left,
    past_the_deadline_of_a_hold_beside_a_seat,
    waiting_service,
)
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import RETRY_ANSWER as RETRY
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]


def resize_moved_not_finished(world: World, rid: str, units: int, target: int, *, grow: bool) -> Item:
    """The owner's PATCH of ``rid`` to ``target``: its claim (step 2) and its counters' move (step
    3) made, the item not finished (step 4): its process dies, or is slow, there."""
    table = world.service.holds._table
    item = table.get(world.account, rid, kind=SEATS)
    assert item is not None
    claimed = table.claim_resize(
        world.account,
        rid,
        "owners-patch",
        kind=SEATS,
        incarnation=str(item["incarnation"]["S"]),
        units=units,
        target=target,
        not_expired_at=world.clock() if grow else None,
    )
    assert claimed.applied
    assert claimed.item is not None
    moved = world.service._resize._move_account(
        world.account, SEATS, rid, "owners-patch", claimed=claimed.item, judge=None
    )
    assert moved.outcome.name == "ADMITTED"
    return claimed.item


def test_a_grown_hold_given_up_is_counted_at_the_size_its_counters_hold(world: World) -> None:
    """Account of 3 seats: p (1) for good, h (1) a hold for 10 s. At +9 s h's owner PATCHes h to
    2 (a grow, before the deadline): claimed, the counters moved (3 of 3), and the process dies
    before the item takes 2. At +11 s a create of 2 is refused (3 of 3). Every order admits it:
    the grow placed before the deadline or never, h is expired and the create takes its room
    (1 + 2 <= 3). The reclaim waits for the resize, gives it up, and counts h at 1 seat: 3 - 1
    + 2 > 3, so 409. At least 503 (h's 2 seats may be what holds the room)."""
    world.hold("h", units=1, seconds=10)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.drain()
    world.clock.now += 9
    resize_moved_not_finished(world, "h", 1, 2, grow=True)
    assert world.counters()[0] == 3
    world.clock.now += 2  # h past its deadline; the resize's claim 2 s old (fresh)

    paused: list[str] = []
    answer = answer_of(
        lambda: waiting_service(world, [lambda: paused.append("paused")]).create(
            world.account, "x", {}, "x", kind=SEATS, units=2
        ),
        figures=True,
    )
    assert answer in ("admitted", RETRY), (
        f"h (expired, grown to 2 seats on the counter, its item still at 1) holds the room; "
        f"the create waited {len(paused)} time(s) and answered {answer}"
    )


@pytest.mark.parametrize("lands", [True, False], ids=["the-shrink-lands", "the-shrink-died"])
def test_a_dry_run_beside_a_shrink_in_flight_of_an_expired_hold_agrees_with_the_create(
    world: World, lands: bool
) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold past its deadline. h's owner PATCHes h to
    1: claimed, the counters moved (2 of 3), the item not finished. A create of 3: p alone
    leaves 2 seats, so no order admits it (409 certain). The dry run subtracts h's 2 seats from
    a use of 2 that already lost one of them: 2 - 2 + 3 <= 3, would_admit. The request (the
    shrink landing while it waits, then h expired: 1 + 3 > 3) answers 409."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    claimed = resize_moved_not_finished(world, "h", 2, 1, grow=False)
    assert world.counters()[0] == 2

    dry = world.service.would_create(world.account, "x", {}, "x", kind=SEATS, units=3)

    def land() -> None:
        if lands:
            world.service._resize._finish(
                world.account, SEATS, "h", "owners-patch", claimed=claimed, target=1
            )

    answer = answer_of(
        lambda: waiting_service(world, [land]).create(world.account, "x", {}, "x", kind=SEATS, units=3),
        figures=True,
    )
    assert (dry.would_admit, answer.split(" (")[0]) == (False, "409 account"), (
        f"p holds 1 of 3 for good: no order admits 3; the dry run said would_admit="
        f"{dry.would_admit} (used {dry.used}), the create answered {answer}"
    )


def test_a_dead_shrink_of_an_expired_hold_never_turns_a_certain_409_into_503(world: World) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold past its deadline, its owner's shrink to 1
    moved on the counters (2 of 3) and dead. A create of 3: at most 1 + 3 > 3 whatever becomes
    of h (it holds 1 seat now): 409 is certain. The reclaim gives h up at 2 seats: 2 - 2 + 3 <=
    3, so 503."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    resize_moved_not_finished(world, "h", 2, 1, grow=False)
    answer = answer_of(
        lambda: waiting_service(world, []).create(world.account, "x", {}, "x", kind=SEATS, units=3),
        figures=True,
    )
    assert answer == "409 account (2 of 3, 3 asked)", (
        f"h holds 1 seat on the counter (2 of 3 used, p's 1 for good): 409 is certain; the create "
        f"answered {answer}"
    )
