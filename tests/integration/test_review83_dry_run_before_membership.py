"""Review 83: review 82 made a kind's first create judge by the profile its membership read
returns (``Limits.seen_profile``, called from ``OrgLevel.membership``), because ``_try_create``
reads the membership *before* it judges. The dry run (``ResourceService._would_admit``, POST
.../dry-run) does the same two reads in the other order: it judges by the profile this process
has cached, then reads the membership (which then seeds the cache). So for review 82's kind (no
item, so no mark) the dry run answers by the plan the account was moved away from, while the
create it stands for, sent right after, is refused: a dry run promises the verdict the request
would get now (design §5.5: a move takes effect at once in every process; dry runs "judged as
the request would be").

Two processes (two services, each its own caches) on one clock, as test_plan_move_marks.py."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_a_dry_run_after_the_move_answers_as_the_create_is_answered(two, account):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3})
    mover.put_plan(new, {"projects": 3})  # no seats
    mover.assign_plan(account, old)
    mover.put_plan(old, {"projects": 3, "seats": 5})  # (gained after the move onto it: no mark)
    # Given the other process cached the account's profile (on the old plan) and the old plan
    # with its 5 seats (a project created), and no seat was ever taken
    other.create(account, "p0", {}, kind="projects")
    # When the old plan drops seats, and then the account is moved to the new plan (no seats)
    mover.put_plan(old, {"projects": 3})
    mover.assign_plan(account, new)
    assert mover.usage(account).plan_id == new
    # Then the other process's dry run of a seat says what its create says: refused, limit 0.
    # On HEAD: the dry run judges before its membership read, by the cached profile (the old
    # plan, cached with 5 seats): would_admit True, limit 5; the create right after is refused
    # (limit 0), and a second dry run answers False (the first one's read seeded the cache).
    answer = other.would_create(account, "s0", {}, kind="seats")
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "s0", {}, kind="seats")
    assert refused.value.limit == 0
    assert (answer.would_admit, answer.limit) == (False, 0)
