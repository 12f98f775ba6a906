"""Review 69 (hostile, on b9ffd4b: every claim of an expired hold waited for, a refused create
judged again whatever its reclaim found); both findings fixed the same day. Against DynamoDB Local, one clock; the other
requests' steps are made here, call by call.

F1: b9ffd4b's own rule (design.md §12: a 409 while an operation on an expired hold is in flight
fits no order, since a create placed before it or after it would expire the hold and take its
room) is applied to a delete's claim but not to a resize's: an expired hold under a resize in
flight is passed over (``_let_go``: NOTHING), not waited for, and the create answers 409 at
once; a resize whose process died keeps that 409 for the grace period.

F2: the wait now reaches the owner's DELETE of an expired hold after its account's release
applied (its item not yet removed: D3 not made, the stream path lagging): the hold's units are
off the account already, so a 409 is certain, but the refusal waits, gives the claim up and
answers 503; and a dry run counts the units a second time (would_admit where no order admits).
Before b9ffd4b, an owner's claim read NOTHING: 409 and would_admit False. (Review 67's open F4,
for an expiry's claim, then reached every owner's delete of an expired hold.)

Fixed: a resize under way on an expired hold is waited for as a claim is (fresh: the Waiter's
bound; older: given up), then the hold expired; a claim given up whose release at its account
applied (``account_released``, or the counter's ``last_release`` is its incarnation's) is not
counted at that account (``Reclaimed.off_account``), nor by the dry run's account figure."""

from __future__ import annotations

import pytest

from hybrid_counter.keys import token
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


@pytest.mark.parametrize("lands", [True, False], ids=["the-resize-lands", "the-resize-died"])
def test_a_refusal_that_meets_a_resize_in_flight_of_an_expired_hold_never_answers_409(
    world: World, lands: bool
) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold for 10 s. At +9 s h's owner PATCHes h
    to 1 seat: the resize's claim is made (its counters not moved yet: the PATCH has not
    answered). At +11 s (h past its deadline) a create of 2 is refused (3 of 3). Whatever order
    the PATCH is placed in, the create finds h expired and takes its room: before the shrink
    (2 seats freed) or after it (1 freed by the shrink, 1 by the expiry). So 409 fits no order;
    waiting for the resize (fresh, as for an owner's delete) then expiring h admits it, and a
    resize that never ends is given up: 503."""
    world.hold("h", units=2, seconds=10)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.drain()
    world.clock.now += 9
    table = world.service.holds._table
    item = table.get(world.account, "h", kind=SEATS)
    assert item is not None
    claimed = table.claim_resize(
        world.account,
        "h",
        "owners-patch",
        kind=SEATS,
        incarnation=str(item["incarnation"]["S"]),
        units=2,
        target=1,
    )
    assert claimed.applied
    assert claimed.item is not None
    world.clock.now += 2  # h's deadline passed; the resize's claim is 2 s old (fresh)

    paused: list[str] = []
    resized = claimed.item

    def pause() -> None:
        paused.append("paused")
        if lands:  # the PATCH's shrink lands: counters moved, the item at 1 seat, the claim ended
            world.service._resize._move(
                world.account, SEATS, "h", "owners-patch", claimed=resized, judge=None
            )

    answer = answer_of(
        lambda: waiting_service(world, [pause]).create(world.account, "x", {}, "x", kind=SEATS, units=2),
        figures=True,
    )
    if not lands:
        world.clock.now += world.settings.pending_grace_seconds + 1
        world.sweeper().sweep()
        world.drain()
    assert answer in ("admitted", RETRY), (
        f"h (expired, 2 seats, under a resize in flight) held the room; the create answered "
        f"{answer}, waited {len(paused)} time(s)"
    )


def test_an_owners_delete_released_at_the_account_turns_a_certain_409_into_503(world: World) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold past its deadline. h's owner DELETEs it:
    its claim (D1) made, its account's release (D2) applied (the account uses 1), and the
    process dies before D3 (the stream path, lagging, removes the item later). A create of 3:
    1 + 3 > 3 whatever becomes of h, a certain 409 (h's seats are off the account already).
    Before b9ffd4b: 409, and the dry run would_admit False."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    table = world.service.holds._table
    item = table.get(world.account, "h", kind=SEATS)
    assert item is not None
    claimed = table.claim(
        world.account, "h", "owners-delete", kind=SEATS, incarnation=str(item["incarnation"]["S"])
    )
    assert claimed.applied
    assert claimed.item is not None
    incarnation = str(claimed.item["incarnation"]["S"])
    deletes = world.service.holds._deletes
    released = deletes.counters.release(
        world.account, "h", token("h", incarnation), True, kind=SEATS, units=2
    )
    assert released.applied  # D2 applied; the owner's process dies here
    assert world.counters()[0] == 1

    dry = world.service.would_create(world.account, "x", {}, "x", kind=SEATS, units=3)
    paused: list[str] = []
    answer = answer_of(
        lambda: waiting_service(world, [lambda: paused.append("paused")]).create(
            world.account, "x", {}, "x", kind=SEATS, units=3
        ),
        figures=True,
    )
    assert (answer, dry.would_admit) == ("409 account (1 of 3, 3 asked)", False), (
        f"h's 2 seats were released at the account already (1 of 3 used): no order admits 3; "
        f"the create waited {len(paused)} time(s) and answered {answer}, the dry run said "
        f"would_admit={dry.would_admit} (used {dry.used})"
    )
