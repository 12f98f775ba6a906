"""Review 67 (hostile): the third judgement path of service._reclaiming (refused at its
account, then at its organization) sums the two reclaims with ``Reclaimed.and_then``; the
second (the organization's, ``own=False``) reads the OrgHoldIndex, which holds the account's own
holds too, so an expiry of the account's given up by the first is given up (and counted) a
second time, and ``refused_again``'s ``used - given up + units <= limit`` answers 503 where 409
is certain. Against DynamoDB Local, one clock; the other member's create made here, between the
two judgements."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.test_hold_expiry_in_flight import (
    claim_its_expiry,
    finish_what_is_left,
    waiting_service,
)
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]


def test_an_own_expiry_given_up_twice_turns_a_certain_409_at_the_organization_into_503(world: World) -> None:
    """Organization of 10; member M (account limit 5): h (2) a hold past its deadline whose
    expiry died after its claim (6 s ago), k (3) a hold past its deadline, live. M creates x
    (3): the organization admits it (5 + 3 <= 10), the account refuses it (5 + 3 > 5). The
    reclaim (M's HoldIndex) expires k and gives h up ({M: 2}). Between it and the second
    judgement, member Q creates 8: the organization is 10 of 10 (h's 2 among them). Judged
    again: refused at the organization; its reclaim (the OrgHoldIndex, ``own=False``) finds h
    again and gives it up again: {M: 4}. Judged a third time: refused (10 + 3 > 10), and
    refused_again computes 10 - 4 + 3 = 9 <= 10: 503 "retry". Whatever becomes of h, 10 - 2 +
    3 = 11 > 10: a certain 409 (and each retry meets the same until h's takeover)."""
    plan, org = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    world.service.put_plan(plan, {SEATS: 10})
    world.service.put_org(org, plan)
    world.service.add_member(org, world.account)
    world.service.set_limit(world.account, 5, kind=SEATS)
    other = f"hold-{uuid.uuid4().hex[:10]}"
    world.service.set_limit(other, 10, kind=SEATS)
    world.service.add_member(org, other)
    world.hold("h", units=2, seconds=10)
    world.hold("k", units=3, seconds=10)
    world.clock.now += 11
    claim_its_expiry(world, "h")  # its process dies here
    world.clock.now += 6  # (older than CLAIM_FRESH_SECONDS: given up at once)

    service = waiting_service(world, [])
    reclaim = service.holds.reclaim
    calls: list[str] = []

    def reclaim_then_q_creates(*args, **kwargs):
        done = reclaim(*args, **kwargs)
        calls.append(f"reclaim {kwargs} -> {done}")
        if len(calls) == 1:
            world.service.create(other, "q", {}, "q", kind=SEATS, units=8)
        return done

    service.holds.reclaim = reclaim_then_q_creates  # type: ignore[method-assign]
    answer = answer_of(
        figures=True, call=lambda: service.create(world.account, "x", {}, "x", kind=SEATS, units=3)
    )
    assert len(calls) == 2, calls
    assert answer.startswith("409 organization"), (
        f"10 of 10 used at the organization, h's 2 among them: 3 more never fit whatever becomes "
        f"of h; the create answered {answer} ({calls})"
    )
