"""Review 61 (hostile): a hold counted without its admission (an admission whose outcome stayed
unknown and did not apply: made live, indexed, counted by the stream path, P1's exception)
carries no ``holds_used`` mark, so the account's refusals never look for it once it expired."""

from __future__ import annotations

import json

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.faults import injected
from tests.integration.test_holds import SEATS, World, world

pytestmark = pytest.mark.integration
__all__ = ["world"]


def _the_holds_admission(body: dict) -> bool:
    return "holds_used" in json.dumps(body)


def test_an_expired_hold_whose_admission_was_lost_is_reclaimed_by_a_refusal(world: World) -> None:
    """Account of 2 seats. Its first create, a hold h of 1 seat for an hour: the admission's
    request is lost before it reaches DynamoDB (the client sees the connection closed: outcome
    unknown), nothing says it applied, so h is made live and indexed (201) and the stream path
    counts it (the sweeper past the grace period, then the stream path): 1 of 2, but the counter item was never marked
    ``holds_used``. p (1) fills the account. Past h's deadline, a create of 1 is refused at the
    account; h, expired, holds the very seat it needs: the refusal must reclaim it (§12: "an
    expired hold blocks a create for no longer than that request"), not answer 409 until the
    sweeper's run."""
    world.service.set_limit(world.account, 2, kind=SEATS)
    world.service = world.service_at(world.clock)
    with injected(
        world.clients.dynamodb_single_attempt,
        "UpdateItem",
        when="before",
        lost="closed",
        times=1,
        where=_the_holds_admission,
    ) as fault:
        world.hold("h", units=1, seconds=3600)
    assert fault.fired == 1
    world.drain()
    world.clock.now += world.settings.pending_grace_seconds + 1
    world.sweeper().sweep()  # the uncertain create counted (before h's deadline)
    world.drain()
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.drain()
    counters = world.counters()
    world.clock.now += 3600
    try:
        world.service.create(world.account, "q", {}, "q", kind=SEATS)
        answer = "admitted"
    except LimitExceeded as refused:
        answer = f"409 {refused.scope} (holds={refused.holds})"
    world.sweeper().sweep()
    world.drain()
    assert answer == "admitted", (
        f"{answer} while h, past its deadline, held the seat (counters {counters} of 2)"
    )
