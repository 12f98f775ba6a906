"""Review 83: design §5.5 says an admission judged by a plan "is conditional on the mark it read
(`plan_move` as read, or absent), so a move that lands between its read and its write refuses
it". That holds only for kinds the move marks: every kind with an item, and every kind of the
old plan or the new *as the move reads them*. A kind's first create that judged by the old plan
(fresh, no cache involved: it read the plan itself) while the old plan had the kind, and whose
admission is written after the old plan dropped the kind and the account was moved to a plan
without it, finds no item and no mark: its write ("absent") applies. The seat is admitted after
the move's answer on a plan without seats, and the unforced move (judged by use: no seats then)
answered 200 with the account over its new plan: no order of the three requests gives that
(create first: the move is refused, LimitBelowUsage; the move first: the create is refused).
Review 82's ``seen_profile`` does not help: the membership read came before the move.

Two processes (two services, each its own caches) on one clock, as test_plan_move_marks.py."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import an_admission, before_the_first, two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_a_first_create_judged_before_a_drop_and_a_move_is_judged_again(two, clients, account):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3})
    mover.put_plan(new, {"projects": 3})  # no seats
    mover.assign_plan(account, old)
    # Given the old plan gains seats after the account's move onto it (so no seats item)
    mover.put_plan(old, {"projects": 3, "seats": 5})

    # When the other process's first seat, judged by the old plan (5 seats), is about to be
    # admitted, the old plan drops seats and the account is moved (unforced) to the new plan
    def drop_and_move() -> None:
        mover.put_plan(old, {"projects": 3})
        mover.assign_plan(account, new)

    with (
        before_the_first(clients, "UpdateItem", an_admission, drop_and_move) as ran,
        pytest.raises(LimitExceeded) as refused,
    ):
        other.create(account, "s0", {}, kind="seats")
    assert ran
    assert mover.usage(account).plan_id == new
    # Then the seat is refused (judged again by the new plan: no seats).
    # On HEAD: its write, conditional on there being no mark, applies (the move marked no seats
    # item: the old plan as the move read it had none): a seat live on a plan without seats.
    assert refused.value.limit == 0
