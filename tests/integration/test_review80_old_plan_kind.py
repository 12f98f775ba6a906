"""Review 80: a plan move's marks are computed from the old plan as read before the move's
transaction, and nothing in that transaction fences the old plan (only the new plan's version
is checked, governance/changes.py ``_judged_by``). A kind that the old plan gains between the
move's read and its write is left unmarked, so a process that cached the account's profile
before the move judges that kind by the old plan after the move's answer: units admitted on a
plan that does not include the kind at all.

Two processes (two services, each its own caches) on one clock, as test_plan_move_marks.py."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import a_move, before_the_first, two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_a_kind_the_old_plan_gains_while_the_account_moves_off_it_is_not_admitted_after_the_move(
    two, clients, account
):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3})
    mover.put_plan(new, {"projects": 3})  # no seats
    mover.assign_plan(account, old)
    # Given the other process (which also serves the operator's PUT /plans) has cached the
    # account's profile (on the old plan) by creating a project
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved to the new plan, and the old plan gains seats (through the other
    # process) after the move read the old plan's kinds and before the move's transaction is sent
    with before_the_first(
        clients,
        "TransactWriteItems",
        a_move,
        lambda: other.put_plan(old, {"projects": 3, "seats": 5}),
    ) as ran:
        mover.assign_plan(account, new)
    assert ran == ["TransactWriteItems"]
    # (the move's answer: the account is on the new plan, which has no seats)
    assert mover.usage(account).plan_id == new
    # Then the other process refuses a seat: the account's plan has none (design §5.5: "takes
    # effect at once, in every process"; the move marks "every kind of the old plan or the new").
    # On HEAD: admitted, judged by the old plan (seats 5) through the profile that process cached
    # before the move, since the seats item was never marked (it had no item and the old plan, as
    # the move read it, had no seats).
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "s0", {}, kind="seats")
    assert refused.value.limit == 0
