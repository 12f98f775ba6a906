"""Review 42 (hostile): a lowering's basis (``lowering:<until>``, resources/org_level.py
lower_first) stands against every later change of the organization's limit until its deadline:
``_wanted`` answers None while it stands, whatever the override on shard 0 or the plan says. A
change that does not lay itself out before it answers (a forced lowering whose process dies
after its write, a plan change, which never lays out) is then not enforced until the deadline."""

from __future__ import annotations

import uuid
from functools import partial

import pytest

from tests.explorer.scheduler import Race
from tests.integration.test_org_governance_review import org_limit
from tests.integration.test_split_review import is_override_write, outcome_of, split_org, stop_before

pytestmark = pytest.mark.integration
SEATS = "seats"
__all__ = ["split_org"]


def _fill(org, tries: int = 10) -> list[str]:
    """Creates from a fresh process, round the shards, one seat each: their outcomes."""
    service = org.new_service()
    return [outcome_of(partial(org.create_on, n % org.shards, service=service, n=n)) for n in range(tries)]


def test_a_forced_lowering_whose_process_dies_before_laying_out_is_held_while_another_lowering_stands(
    split_org,
):
    # Given an organization of 10 seats (its plan's) on 4 counter items, 2 held
    org = split_org(10, 4)
    org.create_on(0)
    org.create_on(3, n=1)
    alice, bob = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers its limit to 7 (not forced): her strict rebase lays 7 out as a
        # lowering, and her process dies before her override's write ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 7, by="alice"))
        stop_before(race, lowering, is_override_write)
        race.step(lowering, fault="crash")
        # ... and bob forces it to 3 (2 held: it fits): his override is written, and his process
        # dies before laying it out (his rebalance)
        forced = race.start("bob", lambda: bob.set_org_limit(org.org_id, SEATS, 3, force=True, by="bob"))
        stop_before(race, forced, is_override_write)
        race.step(forced)
        race.step(forced, fault="crash")
    assert org_limit(org)[:2] == (3, "override")
    # Then creates (a fresh process, a few seconds later) are held to 3: one more seat
    org.clock.now += 5
    outcomes = _fill(org)
    limit, source, used = org_limit(org)
    assert (limit, used, org.held()) == (3, 3, 3), (outcomes, limit, source, used, org.held())


def test_a_plan_change_is_held_while_a_dead_lowerings_basis_stands(split_org):
    # Given an organization of 10 seats (its plan's) on 4 counter items, 2 held, and a plan of 3
    org = split_org(10, 4)
    org.create_on(0)
    org.create_on(3, n=1)
    small = f"small-{uuid.uuid4().hex[:8]}"
    org.service.put_plan(small, {SEATS: 3})
    alice = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers its limit to 7 (not forced), and her process dies before her
        # override's write (her basis of 7 laid out as a lowering) ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 7, by="alice"))
        stop_before(race, lowering, is_override_write)
        race.step(lowering, fault="crash")
    # ... and the organization is moved to the plan of 3 (not forced: 2 held fit)
    org.new_service().put_org(org.org_id, small)
    assert org_limit(org)[:2] == (3, "plan")
    # Then creates (a fresh process, a few seconds later) are held to 3: one more seat
    org.clock.now += 5
    outcomes = _fill(org)
    limit, source, used = org_limit(org)
    assert (limit, used, org.held()) == (3, 3, 3), (outcomes, limit, source, used, org.held())
