"""Review 67 (hostile): ``Reclaimed.refused_again``'s rule ``used - given up + units <= limit``
assumes the units given up are still in ``used``. A member's expiry that died after its
account's release (before its organization's) leaves its claim in the HoldIndex, its units no
longer in the account's ``used``: a refusal at the account gives it up and answers 503 where
409 is certain. Against DynamoDB Local, one clock; the other request's steps made here."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.keys import token
from tests.integration.test_hold_expiry_in_flight import (
    claim_its_expiry,
    finish_what_is_left,
    waiting_service,
)
from tests.integration.test_holds import SEATS, World, world
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["finish_what_is_left", "world"]


@pytest.mark.parametrize(
    "drained",
    [
        pytest.param(False, id="stream-lagging"),
        pytest.param(True, id="stream-drained"),
    ],
)
def test_a_members_expiry_dead_after_its_accounts_release_turns_a_certain_409_into_503(
    world: World, drained: bool
) -> None:
    """A member (account limit 3) of an organization of 10: p (1) for good, h (2) a hold past
    its deadline. Another request's expiry claims h (H2), releases it at the account (D2
    applied: the account's used is 1), and dies before the organization's release. A create
    of 3 at the account: 1 + 3 > 3 whatever becomes of h (its units are off the account
    already), a certain 409. Its reclaim finds h's claim (still in the HoldIndex: only the stream
    path's note of the release takes it out), waits, gives it up (2 units, the account's own),
    and ``refused_again`` computed 1 - 2 + 3 = 2 <= 3: 503 "retry", for as long as the claim
    stood in the index (review 67 F4, a strict xfail until the fourteenth session). Fixed: a
    claim given up whose release at its account applied (the counter's ``last_release`` is its
    incarnation's, or the stream path's note) is not counted at that account."""
    plan, org = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    world.service.put_plan(plan, {SEATS: 10})
    world.service.put_org(org, plan)
    world.service.add_member(org, world.account)
    world.hold("h", units=2, seconds=10)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.clock.now += 11
    claim = claim_its_expiry(world, "h")
    deletes = world.service.holds._deletes
    released = deletes.counters.release(
        world.account, "h", token("h", claim.incarnation), claim.counted, kind=SEATS, units=claim.units
    )
    assert released.applied  # the account's release applied; the process dies here
    if drained:
        world.drain()  # the stream path sees the account's release (does it take h out of the index?)

    answer = answer_of(
        figures=True,
        call=lambda: waiting_service(world, []).create(world.account, "x", {}, "x", kind=SEATS, units=3),
    )
    assert answer.startswith("409 account"), (
        f"3 seats could never fit at the account (1 of 3 used, h's 2 released there already); "
        f"the create answered {answer}"
    )


def test_a_members_dead_expiry_noted_account_released_holds_the_organization_409(world: World) -> None:
    """Organization of 3 seats; member M: h (2) a hold past its deadline. Another request's
    expiry claims h (H2), releases it at M's account (D2 applied), and dies before the
    organization's release (O5). While the stream lags, member Q's create of 2 (2 + 2 > 3 at
    the organization) finds h's claim in the OrgHoldIndex and gives it up: 503, retry (h may
    be what holds the room: it is). Once the stream path notes M's release (``account_released``,
    ``REMOVE hold_account, hold_org``: out of the OrgHoldIndex), the same create finds nothing:
    409, while h's 2 seats are still counted at the organization, until the sweeper's census
    past the grace period; then it is admitted."""
    plan, org = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    world.service.put_plan(plan, {SEATS: 3})
    world.service.put_org(org, plan)
    world.service.add_member(org, world.account)
    world.service.set_limit(world.account, 10, kind=SEATS)
    other = f"hold-{uuid.uuid4().hex[:10]}"
    world.service.set_limit(other, 10, kind=SEATS)
    world.service.add_member(org, other)
    world.hold("h", units=2, seconds=10)
    world.clock.now += 11
    claim = claim_its_expiry(world, "h")
    deletes = world.service.holds._deletes
    released = deletes.counters.release(
        world.account, "h", token("h", claim.incarnation), claim.counted, kind=SEATS, units=claim.units
    )
    assert released.applied  # the account's release applied; the process dies here

    lagging = answer_of(
        figures=True, call=lambda: waiting_service(world, []).create(other, "y", {}, "y", kind=SEATS, units=2)
    )
    world.drain()  # the stream path notes M's release on h's claim
    noted = answer_of(
        figures=True, call=lambda: waiting_service(world, []).create(other, "y", {}, "y", kind=SEATS, units=2)
    )
    world.clock.now += world.settings.pending_grace_seconds + 1
    world.sweeper().sweep()
    world.drain()
    swept = answer_of(
        figures=True, call=lambda: waiting_service(world, []).create(other, "y", {}, "y", kind=SEATS, units=2)
    )
    assert swept == "admitted", swept
    assert not noted.startswith("409"), (
        f"h's dead expiry held 2 of the organization's 3 seats; Q's create answered {noted} "
        f"(before the stream's note: {lagging}; after the sweeper's census: {swept})"
    )
