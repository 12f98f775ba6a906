"""Review 66 (hostile): the reclaim's wait for another request's expiry (holds.py
``_released_by_others``, ``_let_go``; design.md §12, "an expiry already under way"). Against
DynamoDB Local, one clock; the other requests' steps are made here, call by call."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.resources.delete import Claim
from tests.integration.test_hold_expiry_in_flight import (
    claim_its_expiry,
    finish_what_is_left,
    past_the_deadline_of_a_hold_beside_a_seat,
    waiting_service,
)
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import RETRY_ANSWER, answer_of

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]


def owners_delete_claim(world: World, rid: str) -> None:
    """The hold's owner's DELETE: its claim (D1) made, its release not landed (not answered)."""
    table = world.service.holds._table
    item = table.get(world.account, rid, kind=SEATS)
    assert item is not None
    claimed = table.claim(
        world.account,
        rid,
        f"owners-delete-{uuid.uuid4().hex[:6]}",
        kind=SEATS,
        incarnation=str(item["incarnation"]["S"]),
    )
    assert claimed.applied


def test_an_owners_delete_of_a_hold_whose_expiry_was_reverted_is_waited_for_as_a_release(
    world: World,
) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold past its deadline. An expiry claims h
    (H2) and its release is refused (throttled): the claim reverted, h live again, ``expired``
    kept on it (table.revert keeps it, for the confirm). Then h's owner DELETEs it: its claim
    made, its release not landed. A create of 2 is refused. Review 66 read §12 as it then stood
    ("a claim that is not an expiry's is not waited for": 409 at once) and found the owner's
    claim taken for an expiry's by its ``expired`` mark: waited for, given up, 503. Since the
    fourteenth session every claim of an expired hold is waited for (the explorer's member holds:
    409 while its owner's delete is under way fits no order; design.md §12), so waited for it
    is, by what it is, not by the mark: its release never landing here, given up, 503."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    # an expiry's claim of h, then its revert (what delete.py's _not_released does on a throttle)
    claim = claim_its_expiry(world, "h")
    world.service.holds._deletes._revert(world.account, SEATS, "h", claim.request_id, claim)
    item = world.service.holds._table.get(world.account, "h", kind=SEATS)
    assert item is not None
    assert (item["state"]["S"], "expired" in item) == ("live", True)
    # the owner's DELETE of h: claimed, not answered
    owners_delete_claim(world, "h")

    paused: list[str] = []
    answer = answer_of(
        lambda: waiting_service(world, [lambda: paused.append("paused")]).create(
            world.account, "x", {}, "x", kind=SEATS, units=2
        )
    )
    assert (answer, paused) == (
        RETRY_ANSWER,
        ["paused"],
    ), f"the owner's delete was waited for {len(paused)} time(s) and the create answered {answer}"


def test_an_expiry_in_flight_beyond_ten_not_expiry_claims_is_not_waited_for_409(world: World) -> None:
    """Account of 16 seats: ten holds h0..h9 of 1 seat (deadline +10 s) and a hold z of 6
    (deadline +20 s), all past their deadline. h0..h9's owners are DELETEing them (claims made,
    not answered: §12, not waited for); z is being expired by another request (its claim H2
    made, its release landing a few ms later). A create of 6 is refused (16 of 16); its reclaim
    finds eleven claims, h0..h9 first (by deadline), and waits for the first ten only
    (CLAIMS_WAITED_FOR), all settled at once (not expiries): z, the one expiry under way, is
    never looked at, nothing is given up, and the create answers 409 while z's release was
    about to free the 6 seats it needs (the very defect of review 64, past ten claims)."""
    world.service.set_limit(world.account, 16, kind=SEATS)
    for n in range(10):
        world.hold(f"h{n}", units=1, seconds=10)
    world.hold("z", units=6, seconds=20)
    world.drain()
    world.clock.now += 21
    for n in range(10):
        owners_delete_claim(world, f"h{n}")
    z = claim_its_expiry(world, "z")
    release = [lambda: world.service.holds._deletes.finish(world.account, "z", z)]

    answer = answer_of(
        lambda: waiting_service(world, release).create(world.account, "x", {}, "x", kind=SEATS, units=6)
    )
    assert answer in ("admitted", RETRY_ANSWER), (
        f"the create answered {answer} while z, an expired hold whose expiry was under way, "
        f"held the 6 seats it needed (z's release {'never ran' if release else 'ran'})"
    )


def test_eleven_expiries_in_flight_the_eleventh_dead_answers_409_not_503(world: World) -> None:
    """Account of 16 seats: ten holds h0..h9 of 1 seat and z of 6, all past their deadline,
    each being expired by another request (H2 made). h0..h9's releases land during the wait; z's
    expiry died after its claim (its takeover after the grace period finishes it). A create of
    11 is refused (16 of 16), waits for h0..h9 (the first ten), each gone: judged again, 6 of 16
    used by z's dead claim, 6 + 11 > 16, refused. z was never looked at, so nothing was given up:
    409, where §12 says an expiry still claimed is given up (503, retry: after z's takeover the
    create is admitted)."""
    world.service.set_limit(world.account, 16, kind=SEATS)
    for n in range(10):
        world.hold(f"h{n}", units=1, seconds=10)
    world.hold("z", units=6, seconds=20)
    world.drain()
    world.clock.now += 21
    claims: dict[str, Claim] = {f"h{n}": claim_its_expiry(world, f"h{n}") for n in range(10)}
    claim_its_expiry(world, "z")  # its process dies here
    flow = world.service.holds
    releases = [
        (lambda rid=rid, c=c: flow._deletes.finish(world.account, rid, c)) for rid, c in claims.items()
    ]

    answer = answer_of(
        lambda: waiting_service(world, releases).create(world.account, "x", {}, "x", kind=SEATS, units=11)
    )
    assert answer.startswith("503"), (
        f"z's expiry still claimed (6 seats, dead) and never looked at; the create answered {answer}"
    )


def test_another_requests_expiry_reverted_during_the_wait_leaves_an_expired_hold_live_409(
    world: World,
) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold past its deadline, being expired by
    another request (H2 made). A create of 2 is refused (3 of 3), finds h claimed, and waits.
    Meanwhile the other request's release is refused (throttled): its claim reverted (delete.py
    _not_released), h live again, past its deadline, holding the 2 seats, expirable by anyone.
    _let_go reads it live: "not an expiry's after all" (False), nothing to judge again for, so
    409 while an expired hold holds the room (§12 / review 57: never 409 then; this refusal
    could expire h itself, or answer 503)."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    claim = claim_its_expiry(world, "h")
    revert = [
        lambda: world.service.holds._deletes._revert(world.account, SEATS, "h", claim.request_id, claim)
    ]

    answer = answer_of(
        lambda: waiting_service(world, revert).create(world.account, "x", {}, "x", kind=SEATS, units=2)
    )
    # (fixed: the waiting refusal reads h live again past its deadline and expires it itself)
    assert answer == "admitted", (
        f"h (expired, live again after the other expiry's revert, 2 seats) held the room: {answer}"
    )
    assert world.service.holds._table.get(world.account, "h", kind=SEATS) is None
    world.assert_exact()


def test_a_dead_expiry_of_one_seat_turns_a_definite_409_into_503_for_the_grace_period(world: World) -> None:
    """Account of 10 seats: p (8) for good, h (1) a hold past its deadline, and q (1) a hold not
    yet past it. h's expiry (another request's) died after its claim. A create of 5 is
    refused: 8 + 1 + 5 > 10 whatever becomes of h (9 + 5 > 10 without it too); its reclaim
    waits the Waiter's bound for h and gives it up: 503 "retry", and every retry the same for
    the grace period (300 s), though no outcome of h's claim can make room for it."""
    world.service.set_limit(world.account, 10, kind=SEATS)
    world.service.create(world.account, "p", {}, "p", kind=SEATS, units=8)
    world.hold("h", units=1, seconds=10)
    world.hold("q", units=1, seconds=600)
    world.drain()
    world.clock.now += 11
    claim_its_expiry(world, "h")  # its process dies here
    paused: list[str] = []
    answer = answer_of(
        lambda: waiting_service(world, [lambda: paused.append("p")]).create(
            world.account, "x", {}, "x", kind=SEATS, units=5
        )
    )
    world.clock.now += world.settings.pending_grace_seconds + 1
    world.sweeper().sweep()
    world.drain()
    assert answer == "409 account", (
        f"5 seats could never fit (9 of 10 held without h); the create waited and answered {answer}"
    )
