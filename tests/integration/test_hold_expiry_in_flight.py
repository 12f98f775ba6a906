"""A refusal for room that meets an expired hold another request is already expiring (review
64: its claim made, its release not landed yet) waits for that release, within the Waiter's
bound, and is judged again; one that outlasts the wait (a dead expiry, finished by its takeover
after the grace period) is given up: 503, retry, never 409 while that expired hold may be what
holds the room. Before: 409 to every concurrent create but the one whose expiry released the
hold (over HTTP, 9 creates at an organization of 5 full of expired holds: 2 to 4 admitted, the
rest refused, seats left free). Deterministic: the other request's expiry is made here by its
steps (its claim, then its release), the release landing while the refusal waits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import StoreUnavailable
from hybrid_counter.keys import RESOURCE_PREFIX
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources.delete import Claim
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import RETRY_ANSWER, answer_of

pytestmark = pytest.mark.integration
__all__ = ["world"]


@pytest.fixture(autouse=True)
def finish_what_is_left(world: World) -> Iterator[None]:
    """After each test, the claims it left (dead expiries, owners' deletes never answered)
    finished by the sweeper past the grace period, its records drained: left in the shared
    table's PendingIndex, they are another test's sweep's to finish (one checks the index holds
    no resource after its own runs)."""
    yield
    for _ in range(5):
        world.clock.now += world.settings.pending_grace_seconds + 1
        world.sweeper().sweep()
        world.drain()
        left = [k for k in world.sweeper().pending_keys() if k["sk"]["S"].startswith(RESOURCE_PREFIX)]
        if not left:
            return


def past_the_deadline_of_a_hold_beside_a_seat(world: World) -> None:
    """The account (3 seats) holds h, 2 seats for 10 s, and uses p, 1 seat for good: full; and
    the clock is past h's deadline."""
    world.hold("h", units=2, seconds=10)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.drain()
    world.clock.now += 11


def claim_its_expiry(world: World, rid: str) -> Claim:
    """Another request's expiry of the hold ``rid``: its claim (H2), its release not made yet."""
    flow = world.service.holds
    item = flow._table.get(world.account, rid, kind=SEATS)
    assert item is not None
    request_id = f"other-{uuid.uuid4().hex[:8]}"
    claimed = flow._table.claim(
        world.account,
        rid,
        request_id,
        kind=SEATS,
        incarnation=str(item["incarnation"]["S"]),
        expiring=float(item["hold_until"]["N"]),
    )
    assert claimed.applied
    assert claimed.item is not None
    return Claim.of(request_id, claimed.item)


def waiting_service(world: World, on_wait: list) -> ResourceService:
    """A process whose Waiter runs ``on_wait``'s first step at its first pause (then none)."""

    def sleep(_: float) -> None:
        while on_wait:
            on_wait.pop(0)()

    effects = Effects(clock=world.clock, waiter=Waiter(attempts=5, delay=0, sleep=sleep))
    return ResourceService(world.settings, world.clients, effects=effects)


def test_a_refusal_waits_for_another_requests_expiry_of_the_hold_and_is_admitted(world: World) -> None:
    # Given an account of 3 seats: a hold of 2, expired, and 1 seat used for good
    past_the_deadline_of_a_hold_beside_a_seat(world)
    # and another request's expiry of h under way: claimed, its release not landed
    claim = claim_its_expiry(world, "h")
    release = [lambda: world.service.holds._deletes.finish(world.account, "h", claim)]

    # When a create of 2 is refused, finds h claimed, and waits (h's release lands meanwhile)
    created, _ = waiting_service(world, release).create(world.account, "x", {}, "x", kind=SEATS, units=2)

    # Then it is admitted: 3 of 3, h gone
    assert created.resource_id == "x"
    world.assert_exact()
    assert world.counters() == (3, 3)


def test_a_refusal_that_outlasts_a_dead_expiry_answers_retry_not_409(world: World) -> None:
    # Given the same, but the other request's expiry died after its claim
    past_the_deadline_of_a_hold_beside_a_seat(world)
    claim_its_expiry(world, "h")

    # When a create of 2 is refused and waits in vain
    with pytest.raises(StoreUnavailable):
        waiting_service(world, []).create(world.account, "x", {}, "x", kind=SEATS, units=2)

    # Then nothing was written for it, and the takeover after the grace period frees the room
    world.clock.now += world.settings.pending_grace_seconds + 1
    world.sweeper().sweep()
    world.drain()
    created, _ = world.service.create(world.account, "x", {}, "x", kind=SEATS, units=2)
    assert created.resource_id == "x"
    world.assert_exact()


@pytest.mark.parametrize("lands", [True, False], ids=["the-delete-lands", "the-delete-stalls"])
def test_a_refusal_that_meets_its_owners_delete_of_an_expired_hold_waits_for_it(
    world: World, lands: bool
) -> None:
    """An owner's delete of an expired hold, under way, is a release like an expiry's: a create
    placed before it would have expired the hold and taken its room, one placed after it finds
    the room free, so 409 fits no order (the explorer's member holds, 2026-11-27, fourteenth
    session; before, since review 64, it answered 409 at once)."""
    # Given an account of 3 seats: 1 used for good, a hold of 2, expired, that its owner is
    # deleting (the delete's claim made, its release not landed: the delete has not answered)
    past_the_deadline_of_a_hold_beside_a_seat(world)
    item = world.service.holds._table.get(world.account, "h", kind=SEATS)
    assert item is not None
    claimed = world.service.holds._table.claim(
        world.account, "h", "owners-delete", kind=SEATS, incarnation=str(item["incarnation"]["S"])
    )
    assert claimed.applied
    assert claimed.item is not None
    owners = Claim.of("owners-delete", claimed.item)

    # When a create of 2 is refused, and the delete's release lands during its wait (or never)
    paused: list[str] = []

    def pause() -> None:
        paused.append("paused")
        if lands:
            world.service.holds._deletes.finish(world.account, "h", owners)

    answer = answer_of(
        lambda: waiting_service(world, [pause]).create(world.account, "x", {}, "x", kind=SEATS, units=2)
    )

    # Then it waited for the delete: admitted once it landed; else 503 (that hold's release
    # could let it in), never 409
    assert paused == ["paused"]
    assert answer == ("admitted" if lands else RETRY_ANSWER)


def test_a_dry_run_counts_an_expiry_under_way_as_the_request_would(world: World) -> None:
    # Given an account of 3 seats: a hold of 2, expired, another request's expiry of it under
    # way (claimed, not released), and 1 seat used for good
    past_the_deadline_of_a_hold_beside_a_seat(world)
    claim = claim_its_expiry(world, "h")

    # When a dry run of a create of 2 is asked, then the release lands and another is asked
    during = world.service.would_create(world.account, "x", {}, "x", kind=SEATS, units=2)
    world.service.holds._deletes.finish(world.account, "h", claim)
    after = world.service.would_create(world.account, "x", {}, "x", kind=SEATS, units=2)

    # Then both say yes, as the request would be admitted (waiting for the release, or after it),
    # and the units of a hold already released are not taken off twice
    assert (during.would_admit, during.used) == (True, 3)
    assert (after.would_admit, after.used) == (True, 1)
