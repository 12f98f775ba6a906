"""Review 80: the counter items a plan move makes to hold only its marks (governance/changes.py
``_plan_marks``: an item is made for every kind of the old plan and the new) count as kinds for a
membership change (orgs/store.py ``_move``: registered kinds | counter items, at most
MAX_KINDS = 97, one transaction action each). An account that a move marked with 96 items and
that then has two overrides of its own can no longer leave its organization (nor join one); before
the marks it had only its two override items. (And an organization with a member that cannot
leave can never be deleted.)"""

from __future__ import annotations

import uuid

import pytest

from tests.integration.test_kinds_plans_units import new_plan
from tests.integration.test_plan_move_marks import two

pytestmark = pytest.mark.integration
__all__ = ["two"]  # the fixture


def test_an_account_moved_to_a_plan_of_many_kinds_can_still_leave_its_organization(two, account):
    mover, _ = two
    # Given a plan of 95 kinds, never used by the account, and an organization on it
    many = new_plan()
    mover.put_plan(many, {f"k{n:03d}": 1 for n in range(95)})
    org = f"org-{uuid.uuid4().hex[:8]}"
    mover.put_org(org, many)
    # And the account (on the default plan: one kind) moved to that plan: 96 kinds to mark, the
    # most a move marks (MAX_MARKS), so 96 counter items made that hold only the move's mark
    mover.assign_plan(account, many)
    # And it joins the organization while empty (96 kinds: fits in one membership transaction)
    assert mover.add_member(org, account) is True
    # And it is given two overrides of kinds of its own (two counter items, as before the marks)
    mover.set_limit(account, 2, kind="extra-a")
    mover.set_limit(account, 2, kind="extra-b")
    # When it leaves the organization, still empty (it never held anything)
    # Then it leaves. On HEAD: ValidationError "has 98 kinds; at most 97 can change
    # organization": the 96 items that hold only marks are counted as kinds it has (before the
    # marks: 2 items, and it left)
    assert mover.remove_member(org, account) is True
