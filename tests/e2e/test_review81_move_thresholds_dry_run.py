"""Review 81 (checks that held): after an account's move, the near-limit list and dry runs judge by
the new plan at once, as the real answers do."""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.conftest import Target, eventually
from tests.e2e.test_org_hostile_findings import new_id, ok
from tests.e2e.test_usage_over import listed

pytestmark = pytest.mark.e2e


def test_a_move_down_lists_the_account_near_its_limit_and_dry_runs_agree(target: Target) -> None:
    kind = f"k{uuid.uuid4().hex[:10]}"
    big, small, account = new_id("big"), new_id("small"), new_id("acct")
    ok(target.call("PUT", f"/plans/{big}", {"limits": {kind: 20}}))
    ok(target.call("PUT", f"/plans/{small}", {"limits": {kind: 5}}))
    ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": big}))
    base = f"/accounts/{account}/kinds/{kind}/resources"
    for n in range(4):
        ok(target.call("POST", base, {"name": f"r{n}"}), 201)
    for _ in range(16):
        ok(target.call("GET", f"/accounts/{account}/usage"))
    target.settle()
    assert [row for row in listed(target, f"kind={kind}") if row[0] == account] == []
    # When it moves to a plan of 5 (unforced, 4 fit)
    ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": small}))
    # Then dry runs say what the real requests then do, in every environment
    for _ in range(8):
        dry = ok(target.call("POST", base + "?dry_run=true", {"name": "x", "units": 2}))
        assert (dry["would_admit"], dry["limit"], dry["used"]) == (False, 5, 4), dry
    assert target.call("POST", base, {"name": "two", "units": 2}).status_code == 409
    ok(target.call("POST", base, {"name": "one"}), 201)
    # And the near-limit list has it at 100 % of 5
    target.settle()
    eventually(
        lambda: (
            [r for r in listed(target, f"kind={kind}") if r[0] == account] == [(account, 100, 5)]
            or (_ for _ in ()).throw(AssertionError(listed(target, f"kind={kind}")))
        ),
        timeout=30,
    )
    # When it moves back up: it leaves the list
    ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": big}))
    target.settle()
    eventually(
        lambda: (
            [r for r in listed(target, f"kind={kind}") if r[0] == account] == []
            or (_ for _ in ()).throw(AssertionError(listed(target, f"kind={kind}")))
        ),
        timeout=30,
    )
