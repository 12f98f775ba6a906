"""Review 83: review 82 claims ``Limits.seen_profile`` "also closes the residual design §5.5 had
listed (a kind the old plan gains after the move)": a kind with no item, so no mark, is judged at
its first create by the profile that create reads consistently for its membership. But only the
process that makes the kind's *first* create reads it. Once another process has made that first
create (after the move, by the new plan), the kind's counter item exists and says its
organization (``org_known``), so no membership read follows, and it carries no mark (it was
made after the move). A process that cached the account's profile before the move then judges
the kind by that profile: by the plan the account left, after the move's answer, for as long as
its cache lasts (PlanCacheSeconds).

Two processes (two services, each its own caches) on one clock, as test_plan_move_marks.py."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_a_kind_first_created_elsewhere_after_the_move_is_judged_by_the_new_plan(two, account):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3})
    mover.put_plan(new, {"projects": 3})
    mover.assign_plan(account, old)
    # Given the other process cached the account's profile (on the old plan): a project created
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved to the new plan (neither plan has seats: only projects marked),
    # then both plans gain seats: 5 on the old, 1 on the new (the other process serves the old
    # plan's change, so it reads that plan afresh), and the mover takes the account's first seat
    mover.assign_plan(account, new)
    other.put_plan(old, {"projects": 3, "seats": 5})
    mover.put_plan(new, {"projects": 3, "seats": 1})
    mover.create(account, "s0", {}, kind="seats")
    assert mover.usage(account).plan_id == new
    # Then a second seat is refused in every process: 1 of 1 on the account's plan.
    # On HEAD: the other process admits it. The seats item exists (no membership read, so no
    # seen_profile) and has no mark (made after the move); its cached profile names the old
    # plan: judged by the old plan's 5 seats, 2 seats live on a plan of 1.
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "s1", {}, kind="seats")
    assert (refused.value.limit, refused.value.used) == (1, 1)
