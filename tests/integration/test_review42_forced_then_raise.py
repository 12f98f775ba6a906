"""Review 42 (hostile): a forced lowering below use, then a raise whose write's response is lost
(botocore resends it) and whose caller retries the whole request."""

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


@pytest.mark.parametrize("shards", [1, 4])
def test_a_raise_after_a_forced_lowering_whose_response_is_lost_is_made_and_recorded_once(split_org, shards):
    org = split_org(10, shards)
    for n in range(5):
        org.create_on(n % shards, n=n)
    # Given a forced lowering to 3 (5 held)
    org.service.set_org_limit(org.org_id, SEATS, 3, force=True, by="forced")
    assert outcome_of(lambda: org.create_on(0, n=5)) == "refused"
    raiser = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When a raise to 8 has its write's response lost (the write applied)
        raise_ = race.start("raise", lambda: raiser.set_org_limit(org.org_id, SEATS, 8, by="raise"))
        stop_before(race, raise_, is_override_write)
        race.step(raise_, fault="lost")
        race.finish(raise_)
    # ... and the caller retries it all the same
    org.new_service().set_org_limit(org.org_id, SEATS, 8, by="raise")
    sweep_changes_after_the_grace_period(org)
    # Then the limit is 8, three more seats are admitted and no more
    assert org_limit(org)[:2] == (8, "override"), raise_.error
    service = org.new_service()
    outcomes = [outcome_of(partial(org.create_on, n % shards, service=service, n=n)) for n in range(6)]
    assert outcomes.count("admitted") == 3, outcomes
    assert org.held() == 8
    # And the history has each change once
    changes = [(h["by"], h["old"], h["new"]) for h in history(org)]
    assert changes == [("raise", 3, 8), ("forced", None, 3)], changes
