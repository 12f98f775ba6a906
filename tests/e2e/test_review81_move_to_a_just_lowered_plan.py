"""Review 81: a move to a plan whose limits were lowered just before it is judged (and answered)
by the lowered limits, but the environments that had cached the plan's old limits admit the
moved account's creates by those after the move's answer (design.md §5.5 says a move takes
effect at once in every process; its mark names the plan, not the limits it was judged by)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Target
from tests.e2e.test_org_hostile_findings import SEATS, create, live_units, new_id, ok

pytestmark = pytest.mark.e2e


def test_a_move_to_a_plan_lowered_just_before_holds_its_new_limit_at_once(target: Target) -> None:
    # Given a plan "target" of 10 seats, which another account is on (so that every API
    # environment reads and caches its limits), and an account X on a plan of 50 with 1 seat used
    big, lowered = new_id("big"), new_id("target")
    other, account = new_id("other"), new_id("acct")
    ok(target.call("PUT", f"/plans/{big}", {"limits": {SEATS: 50}}))
    ok(target.call("PUT", f"/plans/{lowered}", {"limits": {SEATS: 10}}))
    ok(target.call("PUT", f"/accounts/{other}/plan", {"plan_id": lowered}))
    ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": big}))
    assert create(target, account, "first") == 201
    with ThreadPoolExecutor(max_workers=16) as pool:
        for _ in range(2):  # (within the e2e stack's PlanCacheSeconds of 2 s)
            list(pool.map(lambda _: ok(target.call("GET", f"/accounts/{other}/usage")), range(32)))
            list(pool.map(lambda _: ok(target.call("GET", f"/accounts/{account}/usage")), range(32)))
        # When an operator lowers "target" to 2 seats
        ok(target.call("PUT", f"/plans/{lowered}", {"limits": {SEATS: 2}}))
        # And moves X onto it, unforced (its use, 1, fits 2: the move checks the plan's new
        # version in its own write, and answers 200)
        ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": lowered}))
        # And, after that answer, X creates 10 seats at once
        statuses = list(pool.map(lambda n: create(target, account, f"after-{n}"), range(10)))
    target.settle()
    # Then at most 1 more is admitted: X's limit is the plan's 2, which the move was judged by
    # (observed on HEAD: environments that cached "target" at 10 seats admit by 10)
    assert live_units(target, account) <= 2, statuses
    assert statuses.count(201) <= 1, statuses
