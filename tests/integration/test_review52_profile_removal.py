"""Review 52 (hostile): DELETE /orgs stalled just before its removal of the organization's item
(``_remove_profile``), the one removal review 50 left unfenced by the creation it marked.

Its condition is only ``deleting = :yes`` (and no members): "an organization created again under
the id since has no mark". But a creation of the id that is itself being deleted has one.
"""

from __future__ import annotations

import contextlib
import uuid

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import ORG_PROFILE_SK
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_deletion_review import profile_of
from tests.integration.test_review50_stalled_org_deletion import is_partition_query, item_of
from tests.integration.test_split_review import SEATS, split_org, stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def is_profile_removal(call: Call) -> bool:
    return call.operation == "TransactWriteItems" and any(
        action.get("Delete", {}).get("Key", {}).get("sk", {}).get("S") == ORG_PROFILE_SK
        for action in call.body.get("TransactItems", [])
    )


def test_a_deletion_stalled_before_its_profile_removal_removes_a_later_creation_being_deleted(split_org):
    # Given an empty organization on a plan of 3 seats
    org = split_org(3, 1, members=0)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When DELETE /orgs (D1) has removed everything but the organization's item, and stalls
        # before that last removal ...
        first = race.start("D1", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, first, is_profile_removal)
        # ... a retry (D2) finishes: 204 ...
        second = race.run("D2", lambda: org.new_service().delete_org(org.org_id))
        assert second.error is None, second.error
        assert profile_of(org) is None
        # ... the operator creates the organization again (3 seats), raises its override to 10,
        # and then deletes it (D3), which marks it and is slow before its removals ...
        service = org.new_service()
        service.put_org(org.org_id, org.plan)
        service.set_org_limit(org.org_id, SEATS, 10)
        assert item_of(org).get("limit") == {"N": "10"}, item_of(org)
        third = race.start("D3", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, third, is_partition_query)
        assert "deleting" in (profile_of(org) or {})
        # ... D1 goes on: its removal of the item marked (D3's mark, not its own) ...
        race.finish(first)
        # ... and D3 goes on
        race.finish(third)
        d1, d3 = first.error, third.error
    leftover = item_of(org)
    # Then (whatever each answered) nothing of the second creation is left under the id
    assert profile_of(org) is None, (d1, d3)
    # And the organization created a third time, on 3 seats, admits its member 3 seats
    service = org.new_service()
    service.put_org(org.org_id, org.plan)
    member = f"m-{uuid.uuid4().hex[:8]}"
    service.set_limit(member, 100, kind=SEATS)
    service.add_member(org.org_id, member)
    org.accounts.append(member)
    admitted = 0
    for n in range(6):
        rid = f"s{n}-{uuid.uuid4().hex[:6]}"
        with contextlib.suppress(LimitExceeded):
            org.new_service().create(member, rid, {}, rid, kind=SEATS)
            admitted += 1
    assert admitted == 3, (
        f"{admitted} seats live at an organization on a 3-seat plan; D1: {d1!r}, D3: {d3!r}, "
        f"the second creation's counter left: {leftover}"
    )
