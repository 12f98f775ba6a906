"""Review 55 (hostile, evidence that held): a lowering whose process dies at each step of
lower_first (after its record, after a freeze, after its layout, after its override's write)
blocks creates only until its deadline (LOWERING_SECONDS), never past it, and never admits past
the limit in force."""

from __future__ import annotations

from functools import partial

import pytest

from hybrid_counter.resources.org_level import LOWERING_SECONDS
from tests.explorer.scheduler import Race
from tests.integration.test_org_governance_review import org_limit
from tests.integration.test_split_review import (
    SEATS,
    is_apply,
    is_freeze,
    is_override_write,
    is_rebase_put,
    outcome_of,
    split_org,
    stop_before,
    summary,
)

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


@pytest.mark.parametrize(
    ("point", "after"),
    [
        ("record", True),
        ("freeze", False),
        ("apply", False),
        ("override", False),
        ("override", True),
    ],
)
def test_a_dead_lowering_blocks_creates_only_until_its_deadline(split_org, point, after):
    org = split_org(20, 4)
    org.service.set_org_limit(org.org_id, SEATS, 10, by="setup")
    for n in range(3):
        assert outcome_of(partial(org.create_on, n % 4, n=n)) == "admitted"
    alice = org.new_service()
    matches = {
        "record": is_rebase_put,
        "freeze": is_freeze,
        "apply": is_apply,
        "override": is_override_write,
    }[point]
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        op = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 4, by="alice"))
        stop_before(race, op, matches)
        if after:
            race.step(op)
        race.step(op, fault="crash")
    limit, _, _ = org_limit(org)
    within = [outcome_of(partial(org.create_on, n % 4, service=org.new_service(), n=n)) for n in range(3)]
    print(point, after, "limit", limit, "within:", within, org.held(), org.picture().basis)
    assert org.held() <= max(limit, 3)
    org.clock.now += LOWERING_SECONDS + 1
    past = [outcome_of(partial(org.create_on, n % 4, service=org.new_service(), n=n)) for n in range(10)]
    limit, _, _ = org_limit(org)
    print("past:", past, "limit", limit, org.held(), org.picture().basis, summary(org.picture()))
    assert org.held() == limit, (org.held(), limit, past)
    # (a strict record its creates did not need is the sweeper's: design §10.6's table)
    org.sweep_after_the_grace_period()
    assert org.held() == limit
    org.assert_exact(limit)
