"""Review 82: review 81's fix (plans/limits.py ``plan_judged`` reading the marked plan at least
at the marked version, ``plan_at_least``) applies only where the item's mark is *later* than the
process's cached profile. A process that reads the account's profile after the move (no profile
cached, or its entry expired) finds the profile's ``plan_moves`` equal to the mark, takes the
profile's branch and reads the plan through its plain cache, which may hold a version from
before the plan was lowered. So the move onto a plan lowered just before it is judged by the
plan's old limits after the move's answer, exactly review 81's symptom, whenever the process
had cached the plan but not the account (design §5.5: "by that plan's limits at the marked
version or later").

Two processes (two services, each its own caches) on one clock, as test_plan_move_marks.py."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_a_process_that_reads_the_profile_after_the_move_judges_by_the_marked_version(two, new_account):
    mover, other = two
    big, target = new_plan(), new_plan()
    mover.put_plan(big, {"projects": 50})
    mover.put_plan(target, {"projects": 10})
    account, neighbour = new_account(), new_account()
    mover.assign_plan(account, big)
    mover.assign_plan(neighbour, target)
    mover.create(account, "p0", {}, kind="projects")
    # Given the other process has cached the target plan at 10 (a neighbour's usage), and has
    # never read the account's profile
    assert other.usage(neighbour).kinds["projects"].limit == 10
    # When the target plan is lowered to 2 and the account (1 in use: fits) is moved onto it
    mover.put_plan(target, {"projects": 2})
    mover.assign_plan(account, target)
    # Then the other process, reading the account's profile only now (plan_moves equal to the
    # items' mark), judges by the version the move was judged by: one more project is admitted,
    # the next refused at 2 of 2.
    # On HEAD: the profile's branch of plan_judged reads the target plan through the cache
    # (version 1, 10 projects) and admits up to 10 on a plan of 2.
    other.create(account, "p1", {}, kind="projects")
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "p2", {}, kind="projects")
    assert (refused.value.limit, refused.value.used) == (2, 2)
