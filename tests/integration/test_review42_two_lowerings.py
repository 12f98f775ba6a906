"""Review 42 (hostile): two lowerings to different limits at once at a split organization, with
creates on other shards between their steps (held: kept as a check)."""

from __future__ import annotations

from functools import partial

import pytest

from tests.explorer.scheduler import Race
from tests.integration.test_org_governance_review import (
    history,
    org_limit,
    sweep_changes_after_the_grace_period,
)
from tests.integration.test_split_review import is_override_write, outcome_of, split_org, stop_before

pytestmark = pytest.mark.integration
SEATS = "seats"
__all__ = ["split_org"]


@pytest.mark.parametrize("stall", [0.0, 31.0])
def test_two_lowerings_at_once_never_leave_more_held_than_the_limit(split_org, stall):
    org = split_org(10, 4)
    org.create_on(0)
    org.create_on(3, n=1)
    alice, bob, creator = org.new_service(), org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        a = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 5, by="alice"))
        stop_before(race, a, is_override_write)
        org.clock.now += stall  # (past LOWERING_SECONDS or not)
        outcomes = [outcome_of(partial(org.create_on, 1 + n % 3, service=creator, n=n)) for n in range(3)]
        b = race.start("bob", lambda: bob.set_org_limit(org.org_id, SEATS, 7, by="bob"))
        stop_before(race, b, is_override_write)
        outcomes += [outcome_of(partial(org.create_on, 1 + n % 3, service=creator, n=n)) for n in range(3)]
        race.finish(a)
        outcomes += [outcome_of(partial(org.create_on, n % 4, service=creator, n=n)) for n in range(3)]
        race.finish(b)
    outcomes += [outcome_of(partial(org.create_on, n % 4, service=creator, n=n)) for n in range(4)]
    sweep_changes_after_the_grace_period(org)
    limit, _, used = org_limit(org)
    made = [h["new"] for h in reversed(history(org))]
    assert org.held() <= limit, (outcomes, limit, used, org.held(), a.error, b.error)
    assert used == org.held()
    assert made[-1] == limit, (made, a.error, b.error)
    assert len(made) == sum(op.error is None for op in (a, b)), (made, a.error, b.error)
