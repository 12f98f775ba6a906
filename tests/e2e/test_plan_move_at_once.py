"""An account's move to a smaller plan holds at once in every environment (design.md §5.5), over
HTTP: the API's environments have each cached the account's old plan when the move answers, and
the creates sent after that answer are judged by the new plan all the same. (Before the move's
marks, an environment that had cached the old plan admitted by it for PlanCacheSeconds: the
organization's own move still does, test_org_hostile_findings.py.)"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Target
from tests.e2e.test_org_hostile_findings import SEATS, create, live_units, new_id, ok

pytestmark = pytest.mark.e2e


def test_an_accounts_move_to_a_smaller_plan_holds_at_once_in_every_environment(target: Target) -> None:
    # Given an account on a plan of 50 seats, one in use
    big, small, account = new_id("big"), new_id("small"), new_id("acct")
    ok(target.call("PUT", f"/plans/{big}", {"limits": {SEATS: 50}}))
    ok(target.call("PUT", f"/plans/{small}", {"limits": {SEATS: 3}}))
    ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": big}))
    assert create(target, account, "first") == 201
    with ThreadPoolExecutor(max_workers=16) as pool:
        # And the API's environments have read its plan (its usage, through each one: once to
        # start them, then again just before the move, within the e2e stack's PlanCacheSeconds
        # of 2 s)
        for _ in range(2):
            list(pool.map(lambda _: ok(target.call("GET", f"/accounts/{account}/usage")), range(32)))
        # When an operator moves it to a plan of 3 seats (its use, 1, fits: not forced)
        ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": small}))
        # And, after that answer, it creates 10 seats at once
        statuses = list(pool.map(lambda n: create(target, account, f"after-{n}"), range(10)))
    # Then exactly 2 are admitted, the rest refused, and 3 are live: the new plan's limit
    assert sorted(statuses) == [201] * 2 + [409] * 8, statuses
    target.settle()
    assert live_units(target, account) == 3
    usage = ok(target.call("GET", f"/accounts/{account}/usage"))["kinds"][SEATS]
    assert (usage["limit"], usage["limit_source"], usage["used"]) == (3, "plan", 3), usage
