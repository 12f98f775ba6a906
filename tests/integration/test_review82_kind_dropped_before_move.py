"""Review 82: a plan move marks "every kind with an item, and every kind of the old plan or the
new" as the move reads the old plan (governance/changes.py ``_plan_marks``). A kind the old plan
*dropped* shortly before the move (a PUT /plans that a process has not seen yet, within
PlanCacheSeconds) and that the account never used has no item and is not marked. A process that
cached the account's profile and the old plan's earlier version then judges that kind, after the
move's answer, by the old plan's earlier limits: units admitted on the plan the account was
moved to, which does not include the kind at all. Design §5.5 promises the move "takes effect at
once, in every process"; its list of what is not marked names a kind the old plan *gains after*
the move, not one it lost before.

(A kind's first create already reads the account's profile consistently, for its membership,
orgs ``membership``: judging by that read would close this, and the documented residual, at no
cost.)

Two processes (two services, each its own caches) on one clock, as test_plan_move_marks.py."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_a_kind_the_old_plan_dropped_before_the_move_is_refused_after_the_move(two, account):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3})
    mover.put_plan(new, {"projects": 3})  # no seats
    mover.assign_plan(account, old)
    # (the old plan gains seats after the account's move onto it: the move's marks made items
    # only for the kinds the plans had then)
    mover.put_plan(old, {"projects": 3, "seats": 5})
    # Given the other process cached the account's profile (on the old plan) and the old plan
    # with its 5 seats (a project created), and no seat was ever taken
    other.create(account, "p0", {}, kind="projects")
    # When the old plan drops seats, and then the account is moved to the new plan (no seats)
    mover.put_plan(old, {"projects": 3})
    mover.assign_plan(account, new)
    assert mover.usage(account).plan_id == new
    # Then a seat is refused in every process: the account's plan (new) has none.
    # On HEAD: the other process admits it, by the old plan's 5 seats it cached (no item for
    # seats, so no mark; its cached profile still names the old plan).
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "s0", {}, kind="seats")
    assert refused.value.limit == 0
