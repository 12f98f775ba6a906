"""Review 49 (hostile): a lowering of a split organization's override (not forced) that stalls
between its strict rebase and its write, past LOWERING_SECONDS and past the grace period (the
sweeper removes its record item), while creates and a member's grows admit on other shards.
(Held: kept as a check.)"""

from __future__ import annotations

from functools import partial

import pytest

from hybrid_counter.errors import LimitBelowUsage, LimitExceeded
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


def _grow(org, service, account, rid, units) -> str:
    try:
        service.resize(account, rid, units, kind=SEATS)
    except LimitExceeded:
        return "refused"
    return "grown"


@pytest.mark.parametrize("fill", [True, False])
def test_a_lowering_stalled_past_its_window_and_the_grace_period_never_leaves_more_held_than_the_limit(
    split_org, fill
):
    # Given an organization with an override of 10 seats on 4 counter items, 2 held
    org = split_org(20, 4)
    org.service.set_org_limit(org.org_id, SEATS, 10, by="setup")
    org.create_on(0)
    grown = org.rid_on(2)
    member = org.accounts[1]
    org.service.create(member, grown, {}, grown, kind=SEATS)
    alice, creator = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers it to 5: her strict rebase lays 5 out, her record item is put, and she
        # stalls before her write ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 5, by="alice"))
        stop_before(race, lowering, is_override_write)
        # ... a member grows its resource by 2 and creates come, within her window (held to 5) ...
        outcomes = [_grow(org, creator, member, grown, 3)]
        outcomes += [outcome_of(partial(org.create_on, 1 + n % 3, service=creator, n=n)) for n in range(4)]
        assert org.held() <= 5, (outcomes, org.held())
        # ... her window passes; creates (or none) come under the standing 10 ...
        org.clock.now += 31
        if fill:
            outcomes += [outcome_of(partial(org.create_on, n % 4, service=creator, n=n)) for n in range(8)]
            outcomes.append(_grow(org, creator, member, grown, 5))
        held_before = org.held()
        # ... and the sweeper runs past the grace period (her record item: no item names it) ...
        sweep_changes_after_the_grace_period(org)
        race.finish(lowering)
    limit, source, used = org_limit(org)
    changes = [(h["by"], h["old"], h["new"]) for h in history(org) if h["by"] == "alice"]
    if fill:
        # Then she is refused (more than 5 held), nothing of hers recorded, the 10 holds the use
        assert isinstance(lowering.error, LimitBelowUsage), (lowering.error, outcomes)
        assert (limit, source) == (10, "override")
        assert changes == []
    else:
        # Then her change is made once, and recorded once
        assert lowering.error is None, lowering.error
        assert (limit, source) == (5, "override")
        assert changes == [("alice", 10, 5)], changes
    assert used <= limit, (used, limit, held_before, outcomes)
    assert org.held() <= limit
    # And creates from now on never take it over its limit
    more = [outcome_of(partial(org.create_on, n % 4, service=creator, n=n)) for n in range(6)]
    assert org.held() <= limit, (more, org.held())
    org.assert_exact()
