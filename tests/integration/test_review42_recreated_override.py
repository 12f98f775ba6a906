"""Review 42 (hostile): an organization's override judged before DELETE /orgs and written after
the organization was created again under its id lands on the new creation. That request
overlapped both the deletion and the creation, so it may take effect after them (linearizable:
PUT /orgs/{id}/limits names the id, not a creation; design.md §9). What must hold is that the
new creation is judged by its own use: a lowering judged on the deleted creation's (nothing
held) never lands below what the new one holds unless forced."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import LimitBelowUsage
from tests.explorer.scheduler import Race
from tests.integration.test_org_governance_review import org_limit
from tests.integration.test_split_review import SEATS, is_override_write, split_org, stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_lowering_judged_before_a_deletion_never_lands_below_the_new_creations_use(split_org, shards):
    # Given an organization of 10 seats (its plan's) without members
    org = split_org(10, shards, members=0)
    setter = org.new_service()
    member = f"m-{uuid.uuid4().hex[:8]}"
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When an operator lowers its limit to 5 (not forced: nothing held), has judged it, and
        # stalls before its write ...
        change = race.start("limit", lambda: setter.set_org_limit(org.org_id, SEATS, 5, by="old"))
        stop_before(race, change, is_override_write)
        # ... the organization is deleted and created again under its id on the same plan, an
        # account joins it and holds 8 seats ...
        org.new_service().delete_org(org.org_id)
        again = org.new_service()
        again.put_org(org.org_id, org.plan, shards=shards)
        again.set_limit(member, 100, kind=SEATS)
        again.add_member(org.org_id, member)
        for n in range(8):
            again.create(member, f"s{n}", {}, f"s{n}", kind=SEATS)
        # ... and the stalled request goes on
        race.finish(change)
    # Then it is refused on the new creation's use (8 of a limit of 5), which keeps its plan's 10
    assert isinstance(change.error, LimitBelowUsage), change.error
    assert org_limit(org) == (10, "plan", 8)
