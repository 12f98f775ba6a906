"""Review 67 (hostile): the refusal's reclaim meets a takeover of a dead expiry's claim
(holds.py ``_let_go``, ``_an_expirys_claim``; table.claim(taking_over=) rewrites
``delete_request`` but leaves ``expiry_request``). Against DynamoDB Local, one clock; the other
requests' steps are made here, call by call."""

from __future__ import annotations

import contextlib

import pytest

from hybrid_counter.errors import DomainError
from tests.integration.test_hold_expiry_in_flight import (
    claim_its_expiry,
    finish_what_is_left,
    past_the_deadline_of_a_hold_beside_a_seat,
    waiting_service,
)
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]


def test_a_takeover_of_a_dead_expiry_in_flight_answers_409_where_the_dead_claim_answered_503(
    world: World,
) -> None:
    """Account of 3 seats: p (1) for good, h (2) a hold past its deadline. Another request's
    expiry claims h (H2) and dies. A create of 2 then is refused and gives h up: 503 (right:
    h's dead claim may be what holds the room). Past the grace period the sweeper (or a
    retried DELETE) takes the claim over (table.claim(taking_over=): delete_request is now the
    takeover's, expiry_request still the dead expiry's) and stalls before its release. A create
    of 2 now reads h as NOTHING (``_an_expirys_claim`` false): 409 "at its limit", while the
    only thing holding the room is an expired hold whose release is under way (its takeover);
    a moment later the same create is admitted. The same 409 for as long as the takeover's
    claim stands (a dead takeover: until the next takeover, one more grace period)."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    claim_its_expiry(world, "h")  # its process dies here

    before = answer_of(
        lambda: waiting_service(world, []).create(world.account, "x", {}, "x", kind=SEATS, units=2)
    )
    assert before.startswith("503"), before

    # past the grace period: the takeover of the dead expiry's claim, stalled before its release
    world.clock.now += world.settings.pending_grace_seconds + 1
    deletes = world.service.holds._deletes
    seen = deletes._table.get(world.account, "h", kind=SEATS)
    assert seen is not None
    taken = deletes.take_over(world.account, "h", seen)
    assert taken is not None

    during = answer_of(
        lambda: waiting_service(world, []).create(world.account, "y", {}, "y", kind=SEATS, units=2)
    )

    # the takeover goes on (or the sweeper's next run): the room was the expired hold's
    with contextlib.suppress(DomainError):
        deletes.finish(world.account, "h", taken)  # (its census of the range finishes it)
    world.sweeper().sweep()
    world.drain()
    after = answer_of(
        lambda: waiting_service(world, []).create(world.account, "z", {}, "z", kind=SEATS, units=2)
    )
    assert after == "admitted", after
    assert during != "409 account", (
        f"while the takeover of h's dead expiry was in flight the create answered {during} "
        f"(before it: {before}; once it landed: {after})"
    )


def test_a_dead_expiry_claimed_before_expiry_request_existed_answers_409(world: World) -> None:
    """The same account (3 seats: p 1, h 2 past its deadline). h's expiry claimed it with the
    code before review 66 (``expired`` written, no ``expiry_request``) and died (or was still
    releasing at the deploy). A create of 2 after the deploy reads h's claim as not an expiry's
    (``_an_expirys_claim`` needs ``expiry_request``): NOTHING, 409, where the code it replaced
    (and §12: "never 409 while that expired hold may be what holds the room") answered 503."""
    past_the_deadline_of_a_hold_beside_a_seat(world)
    claim_its_expiry(world, "h")  # its process dies here
    table = world.service.holds._table
    item = table.get(world.account, "h", kind=SEATS)
    assert item is not None
    table.clients.dynamodb.update_item(  # the claim as the code before review 66 wrote it
        TableName=table.name,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="REMOVE expiry_request",
    )
    answer = answer_of(
        lambda: waiting_service(world, []).create(world.account, "x", {}, "x", kind=SEATS, units=2)
    )
    assert answer != "409 account", f"h's dead legacy expiry claim held the 2 seats: {answer}"
