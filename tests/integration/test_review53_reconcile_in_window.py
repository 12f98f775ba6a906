"""Review 53 (hostile): a reconcile (``_admit_split``: a rebase for the basis it read, handing lost
allowance out) during a lowering's window. The basis it reads is the lowering's
(``lowering:<until>``), but ``rebase`` replaces any asked basis by the override standing on shard 0
(``_target``), so the reconcile lays the standing (higher) override out again before the deadline:
creates in the window are admitted past the lowering, and the lowering, whose guard then fails,
is refused when it lays out again. Design §10.6: "until then admissions keep it rather than lay the
standing override out again"."""

from __future__ import annotations

from functools import partial

import pytest

from tests.explorer.scheduler import Race
from tests.faults import ProcessDied, injected
from tests.integration.test_org_governance_review import org_limit
from tests.integration.test_split_review import (
    SEATS,
    is_override_write,
    outcome_of,
    split_org,
    stop_before,
    summary,
)

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def credit_body(body: dict) -> bool:
    return "ADD #allowance" in body.get("UpdateExpression", "")


def test_a_reconcile_in_a_lowerings_window_keeps_the_lowering(split_org):
    # Given an override of 10 seats on 4 counter items, 2 held
    org = split_org(20, 4)
    org.service.set_org_limit(org.org_id, SEATS, 10, by="setup")
    org.create_on(0)
    org.create_on(3, n=1)
    alice, creator = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers it to 5 (not forced): her lowering basis of 5 is laid out and she
        # stalls before her override's write (within her window) ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 5, by="alice"))
        stop_before(race, lowering, is_override_write)
        laid = org.picture()
        print("lowering laid out:", laid.basis, summary(laid))
        assert laid.basis.limit == 5
        # ... a create whose shard has no room moves allowance, and its process dies between the
        # debit and the credit (allowance lost, never created) ...
        empty = min(laid.shards.values(), key=lambda s: (s.room, s.number)).number

        def fill_until_a_move_dies() -> None:
            for n in range(4):
                org.create_on(empty, service=org.new_service(), n=n)

        with (
            injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", where=credit_body),
            pytest.raises(ProcessDied),
        ):
            fill_until_a_move_dies()
        print("after the dead move:", summary(org.picture()))
        # ... and creates go on within her window: when the spare is gone, one reconciles
        outcomes = [outcome_of(partial(org.create_on, n % 4, service=creator, n=n)) for n in range(8)]
        within = org.held()
        after = org.picture()
        print("within the window:", outcomes, within, after.basis, summary(after))
        race.finish(lowering)
    limit, source, used = org_limit(org)
    print("alice:", lowering.error, limit, source, used)
    # Then creates within her window were held to her lowering's 5
    assert within <= 5, (within, outcomes, after.basis, summary(after), lowering.error)
