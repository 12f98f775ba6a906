"""Review 44 (hostile): review 42's fix makes a change's write a transaction with a check that
its record item is still there. The sweeper's ``complete_pending`` still reads the changed item
(no change named: "its change never happened"), then deletes the record item on a condition of
the record alone. A stalled request's write landing between that read and that delete passes
its record check (the record is still there); the sweeper then removes the record, and if the
request dies before its history item, nothing records the change: the limit in force comes from
a change history never lists (review 42's defect, in the window between the sweeper's two
calls). The removal is now a transaction with a check that the changed item does not name the
change; refused, the sweeper reads again and completes it."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.explorer.scheduler import Race
from tests.faults import target_of
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
def test_a_change_written_between_the_sweepers_read_and_its_removal_of_the_record_is_recorded(
    split_org, shards
):
    # Given an organization of 10 seats (its plan's), 2 held
    org = split_org(10, shards)
    org.create_on(0)
    org.create_on(shards - 1, n=1)
    alice = org.new_service()
    main = threading.current_thread()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers its limit to 5: her record item is put, and she stalls before the
        # override's write, past the grace period ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 5, by="alice"))
        stop_before(race, lowering, is_override_write)
        [record_pk] = [
            c.body["Item"]["pk"]["S"]
            for c in lowering.calls
            if c.operation == "PutItem" and c.body["Item"]["pk"]["S"].startswith("CHANGE#")
        ]
        fired = {"n": 0}

        def before_record_removal(request: Any, **_: Any) -> None:
            if threading.current_thread() is not main or fired["n"]:
                return
            if target_of(request) not in ("DeleteItem", "TransactWriteItems"):
                return
            body = json.loads(request.body or b"{}")
            removals = [body] + [a["Delete"] for a in body.get("TransactItems", []) if "Delete" in a]
            if not any(r.get("Key", {}).get("pk", {}).get("S") == record_pk for r in removals):
                return
            fired["n"] = 1
            # ... the sweeper has read the organization's item (no change named) and is about
            # to remove her record: her write lands now (her record is still there), and her
            # process dies right after it, before her history item
            race.step(lowering)
            race.step(lowering, fault="crash")

        client = org.clients.dynamodb

        client.meta.events.register_first("before-send.*.*", before_record_removal)
        try:
            sweep_changes_after_the_grace_period(org)
        finally:
            client.meta.events.unregister("before-send.*.*", before_record_removal)
        assert fired["n"] == 1
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
