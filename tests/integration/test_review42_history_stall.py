"""Review 42 (hostile): an organization's limit change whose process stalls between its record
item and its write past the grace period (the sweeper removes the record item: "its change never
happened"). Its write then applied, and if its process died before its history item nothing
recorded it: the limit in force came from a change history never listed. The write is now made
only while its record item is there (changes.py _made): refused, the change is judged again
under a new record."""

from __future__ import annotations

import pytest

from tests.explorer.scheduler import Race
from tests.integration.test_org_governance_review import (
    history,
    org_limit,
    sweep_changes_after_the_grace_period,
)
from tests.integration.test_split_review import is_override_write, split_org, stop_before

pytestmark = pytest.mark.integration
SEATS = "seats"
__all__ = ["split_org"]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_change_stalled_past_the_sweep_of_its_record_is_judged_again_and_recorded_once(split_org, shards):
    # Given an organization of 10 seats (its plan's), 2 held
    org = split_org(10, shards)
    org.create_on(0)
    org.create_on(shards - 1, n=1)
    alice = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers its limit to 5: her record item is put, and she stalls before the
        # override's write, past the grace period ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 5, by="alice"))
        stop_before(race, lowering, is_override_write)
        # ... the sweeper finds her record item with no item naming it and removes it ...
        sweep_changes_after_the_grace_period(org)
        # ... then her write is refused (her record is gone): she judges it again, writes a
        # record and the change, and her process dies before her history item
        race.step(lowering)
        assert org_limit(org)[:2] == (10, "plan")
        stop_before(race, lowering, is_override_write)
        race.step(lowering)
        race.step(lowering, fault="crash")
    assert lowering.done
    assert lowering.error is not None
    # The change took effect
    assert org_limit(org)[:2] == (5, "override")
    # Then (the sweeper, the next change) her change is recorded once
    sweep_changes_after_the_grace_period(org)
    org.service.set_org_limit(org.org_id, SEATS, 7, by="bob")
    sweep_changes_after_the_grace_period(org)
    changes = [(h["by"], h["old"], h["new"]) for h in history(org)]
    assert changes == [("bob", 5, 7), ("alice", None, 5)], changes
