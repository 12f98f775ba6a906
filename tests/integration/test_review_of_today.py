"""A hostile review of the changes of 2026-11-26 (``git diff d313e02 HEAD -- layers/``): the census
of a left claim on the DELETE and PUT paths, the split image of a refused threshold record, the
governance transactions (an override's removal, a plan move, an organization's override), each
attempt's time in history, and DELETE /orgs completing the history of the changes its items name.

Each test was first a strict xfail (2026-11-26); both defects are fixed, and the comment above
each test says what it was.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest

from hybrid_counter.errors import InProgress, NotFound
from hybrid_counter.keys import org_key
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_governance_review import sweep_changes_after_the_grace_period
from tests.integration.test_split_review import Clock, SplitOrg, split_org, stop_before

pytestmark = pytest.mark.integration

SEATS = "seats"
DAY = 86_400
__all__ = ["split_org"]  # the fixture, from the split counter's review


# ---- helpers ---------------------------------------------------------------------------------------
def org_history(org: SplitOrg) -> list[tuple[str, Any, Any, str]]:
    """Every change of the organization in its history, newest first: (what, old, new, by)."""
    items = org.new_service().org_history(org.org_id).items
    return [(h["what"], h["old"], h["new"], h["by"]) for h in items]


def expire_history(org: SplitOrg) -> int:
    """What the table's TTL does once ``HistoryRetentionDays`` have passed: the organization's
    history items whose ``expires_at`` is behind the clock are deleted. Returns how many."""
    table, dynamodb = org.settings.table_name, org.clients.dynamodb
    found = dynamodb.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"HISTORY#ORG#{org.org_id}"}},
        ConsistentRead=True,
    )["Items"]
    expired = [item for item in found if "expires_at" in item and int(item["expires_at"]["N"]) <= org.clock()]
    for item in expired:
        dynamodb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
    return len(expired)


def org_item(org: SplitOrg) -> dict[str, Any] | None:
    return org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=org_key(org.org_id), ConsistentRead=True
    ).get("Item")


def is_history_put(call: Call) -> bool:
    return call.operation == "PutItem" and str(
        call.body.get("Item", {}).get("pk", {}).get("S", "")
    ).startswith("HISTORY#")


def is_org_item_delete(call: Call) -> bool:
    """DELETE /orgs's last write: the organization's item, in a transaction of its own."""
    if call.operation != "TransactWriteItems":
        return False
    actions = call.body.get("TransactItems", [])
    return any(
        "Delete" in a and a["Delete"]["Key"]["sk"]["S"] == org_key("x")["sk"]["S"] for a in actions
    ) and any("Delete" in a and a["Delete"]["Key"]["pk"]["S"].startswith("ORG#") for a in actions)


# ---- A. DELETE /orgs after HistoryRetentionDays ---------------------------------------------------
# (fixed: its settle raised after the deleting mark, the change named on its item having neither
# history nor record any more, so the organization stayed marked for ever; any later change of
# such an item was refused the same way, since before today. A named change without a record is
# one completed long ago: a record is removed only once its change is in history.)
def test_an_organization_whose_last_change_outlived_its_history_can_still_be_deleted(
    settings, clients, stream
):
    # Given a deployment that keeps history 30 days (HistoryRetentionDays=30), and an empty
    # organization of 10 seats whose override was set to 5, completed at once
    kept = replace(settings, history_retention_days=30)
    org = SplitOrg(kept, clients, stream, Clock(), 10, 1, 0)
    org.service.set_org_limit(org.org_id, SEATS, 5, by="alice")
    # And the sweeper has removed the change's record item (its work done), as it does after the
    # grace period; 31 days later the table's TTL has removed its history items
    sweep_changes_after_the_grace_period(org)
    org.clock.now += 31 * DAY
    assert expire_history(org) >= 1
    # When the operator changes its override again, then deletes the organization
    org.new_service().set_org_limit(org.org_id, SEATS, 6, by="bob")
    org.new_service().delete_org(org.org_id)
    # Then both are done: the organization is gone, not left marked
    with pytest.raises(NotFound):
        org.new_service().get_org(org.org_id)
    assert org_item(org) is None


# ---- B. a plan move lands between DELETE /orgs's settle and its last delete -------------------------
# (fixed: a plan move was not refused on an organization marked deleting, so one written after the
# deletion's settle, whose process then died before its history, was dropped with the
# organization's item. Now refused once the deletion began: 503, then 404.)
def test_a_plan_move_written_while_its_organization_is_deleted_is_never_dropped_from_history(split_org):
    # Given an empty organization of 10 seats (its plan's) and another plan of 20
    org = split_org(10, 1, members=0)
    bigger = f"big-{uuid.uuid4().hex[:8]}"
    org.service.put_plan(bigger, {SEATS: 20})
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When DELETE /orgs has marked it, completed the history its items name, and is about to
        # delete its item, an operator moves it to the plan of 20
        deletion = race.start("delete", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, deletion, is_org_item_delete)
        move = race.run("move", lambda: org.new_service().put_org(org.org_id, bigger, by="bob"))
        race.finish(deletion)
    # Then the move is refused (the organization is being deleted: nothing written, nothing to
    # record), and the deletion finishes
    assert isinstance(move.error, InProgress), move.error
    assert deletion.error is None, deletion.error
    with pytest.raises(NotFound):
        org.new_service().get_org(org.org_id)
    sweep_changes_after_the_grace_period(org)
    assert not [h for h in org_history(org) if h[0] == "org_plan" and h[2] == bigger], org_history(org)
