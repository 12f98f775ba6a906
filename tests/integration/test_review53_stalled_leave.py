"""Review 53 (hostile): a membership change (orgs/store.py ``_move``) stalled past the grace period
between its reads (the account empty) and its transaction, while the account creates and a
delete dies between its two levels (released at the account, owed at the organization). The
transaction checks the counters, not the resource items: it commits with a delete in flight.
(Checked: what the organization holds afterwards, the sweeper's finish and the recount.)"""

from __future__ import annotations

import contextlib

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.explorer.scheduler import Race
from tests.faults import ProcessDied, at_an_organization, injected
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def is_move(call) -> bool:
    return call.operation == "TransactWriteItems" and any(
        "members" in a.get("Update", {}).get("UpdateExpression", "")
        for a in call.body.get("TransactItems", [])
    )


def release_at_org(body: dict) -> bool:
    return (
        at_an_organization(body)
        and "best_effort" in str(body.get("UpdateExpression", ""))
        and ("-" in str(body.get("ExpressionAttributeValues", {})) or "last_release" in str(body))
    )


@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("rejoin", [False, True])
def test_a_leave_stalled_past_a_dead_members_delete_leaves_nothing_held(
    settings, clients, stream, shards, rejoin
):
    # Given an organization of 2 seats, member m1 holding 1, member m0 empty
    org = Org(settings, clients, stream, limit=2, shards=shards)
    m0, m1 = org.members
    org.service.create(m1, "b", {}, kind=SEATS)
    org.drain()
    operator = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When m0's leave has read it empty and stalls before its transaction ...
        leave = race.start("leave", lambda: operator.remove_member(org.org_id, m0))
        stop_before(race, leave, is_move)
        # ... m0 creates a seat, and its delete dies after the account's release, before the
        # organization's
        org.service.create(m0, "x", {}, "x", kind=SEATS)
        org.drain()
        with (
            injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", where=release_at_org),
            injected(org.clients.dynamodb, "UpdateItem", when="crash", where=release_at_org),
            contextlib.suppress(ProcessDied),
        ):
            org.new_service().delete(m0, "x", kind=SEATS)
        org.drain()
        print("after the dead delete:", org.org_counters(), [i["state"]["S"] for i in org.resources(m0)])
        # ... past the grace period, the leave goes on
        org.clock.now += settings.pending_grace_seconds + 1
        race.finish(leave)
    print("leave:", leave.error, [i["state"]["S"] for i in org.resources(m0)])
    if rejoin:
        with contextlib.suppress(Exception):
            org.service.add_member(org.org_id, m0)
    # And the sweeper runs, and the recount
    org.sweeper().sweep()
    org.drain()
    org.clock.now += settings.pending_grace_seconds + 1
    org.sweeper().sweep()
    org.drain()
    report = org.recounter().recount(org.org_id, kind=SEATS, fix=True)
    org.drain()
    print("recount:", report.to_json())
    # Then the organization holds exactly its live seat, and admits exactly one more
    assert org.org_counters() == (1, 1), (org.org_counters(), leave.error)
    made = 0
    for rid in ("y", "z", "w"):
        try:
            org.service.create(m1, rid, {}, kind=SEATS)
            made += 1
        except LimitExceeded:
            pass
    org.drain()
    assert made == 1, (made, org.live_units(), org.org_counters())
    assert org.live_units() == 2, (made, org.live_units(), org.org_counters())
