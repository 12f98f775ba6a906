"""Review 71 (hostile, on 2e3eb8c: hold_levels.py). Against DynamoDB Local, one clock; members'
PATCHes of their holds made here, one dying on the way.

hold_levels.at_org knows a member resize's move at its organization only from the shard's
``last_resize`` being the grow's token (``org_resize_token(..., undo=False)``); else "not
known": the larger size for the 503 rule, the size before for a dry run. It reads neither the
undo's token (``... .undo``: the organization's admission of a grow its account refused,
released again) nor the stream path's notes on the item (``org_unresized``, ``org_resized``),
which say what the organization holds as surely as the token:

F2: a grow refused at its account, undone at its organization, its claim left (its process
died before the revert): the organization holds the size before, the undo's token says so, and
the refusal counts the larger size: 503 where 409 is certain.

F3: a grow moved at its organization (noted ``org_resized`` by the stream path), its process dead
before its account's move, the shard's ``last_resize`` then overwritten by another member's
resize: the organization holds the new size, and the dry run subtracts the size before: it
refuses a create every order admits.

Fixed the same day (resources/hold_levels.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.test_member_resizes import grow_dies_between_the_levels, item, split_org
from tests.integration.test_org_hold_reclaim import MADE, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


def test_a_grow_undone_at_the_organization_is_counted_there_at_its_size_before(
    split_org: Callable[..., SplitOrg],
) -> None:
    """Organization of 6 seats: member a holds x (3) for good; member b (1 seat of its own) a hold
    h (1) for 10 s (4 of 6). At +9 s b's owner PATCHes h to 3: admitted at the organization (6 of
    6), refused at b's account, undone at the organization (4 of 6, last_resize the undo's
    token), and the process dies before reverting its claim (503 to its caller). At +16 s a's
    create of 4: h holds 1 seat at the organization whatever becomes of it, so 3 + 4 > 6 in
    every order: 409 is certain. The reclaim gives h up (its resize 7 s old) and counts it at 3:
    4 - 3 + 4 <= 6, 503."""
    org = split_org(6, 1)
    MADE.append(org)
    a, b = org.accounts[:2]
    org.service.set_limit(b, 1, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "x", {}, "x", kind=SEATS, units=3)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=1, hold_seconds=10)
    org.drain()
    org.clock.now += 9

    owner = org.new_service()
    owner._resize._revert = lambda *_, **__: None  # type: ignore[method-assign]  # dies before it
    # (refused at b's account, its reclaim finds nothing, and the claim left: 503 to its caller)
    assert answer_of(lambda: owner.resize(b, "h", 3, kind=SEATS)).startswith("503")
    assert "resize_request" in item(org, b, "h")
    assert org.picture().get(0).state.last_resize.endswith(".undo")  # type: ignore[union-attr]
    assert org.picture().get(0).state.best_effort == 4
    org.clock.now += 7  # h past its deadline, its resize's claim 7 s old: given up at once

    answer = answer_of(lambda: org.new_service().create(a, "y", {}, "y", kind=SEATS, units=4), figures=True)
    org.sweep_after_the_grace_period()  # (the dead resize settled, h expired)
    assert answer == "409 organization (4 of 6, 4 asked)", (
        f"x holds 3 of 6 for good and h 1 at the organization (its grow undone there): 409 is "
        f"certain; the create answered {answer}"
    )


def test_a_dry_run_counts_a_grow_noted_at_the_organization_at_its_new_size(
    split_org: Callable[..., SplitOrg],
) -> None:
    """Organization of 6 seats: member a holds x (2) for good; member b a hold h (1) for 10 s. At
    +9 s b's owner PATCHes h to 3: moved at the organization (5 of 6), the process dies before
    its account's move; the stream path notes ``org_resized`` on h. a shrinks x to 1 (4 of 6;
    the shard's last_resize now x's). At +11 s (h past its deadline, its resize 2 s old) a dry
    run of a's create of 5: every order admits it (h expired by the create: 1 + 5 <= 6). The dry
    run subtracts h's 1 seat from a use holding its 3: 4 - 1 + 5 > 6, would not admit."""
    org = split_org(6, 1)
    MADE.append(org)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=1, hold_seconds=10)
    org.drain()
    org.clock.now += 9
    grow_dies_between_the_levels(org, b, "h", 3)
    org.drain()
    noted = item(org, b, "h")
    assert "resize_request" in noted
    assert noted.get("org_resized") == noted["resize_request"]
    org.service.resize(a, "x", 1, kind=SEATS)
    shard = org.picture().get(0).state
    assert shard.best_effort == 4
    assert not str(shard.last_resize).startswith(f"{b}/h#")
    org.clock.now += 2

    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS, units=5)
    org.sweep_after_the_grace_period()  # (the dead grow settled, h expired)
    assert dry.organization is not None
    assert dry.would_admit, (
        f"x holds 1 of 6 for good, h (expired) is released by the create: every order admits 5; "
        f"the dry run said would_admit=False (organization {dry.organization})"
    )
