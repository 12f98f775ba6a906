"""Review 74 (hostile, on f0ea3e9): review 73 made a member's grow refused at an organization
whose items carry no ``holds_used`` mark search its own account's expired holds when the
account's counter says it held (``ResourceService._ever_held``), and a create refused there
(its refusal carries ``holds`` True) already did. The dry run (``_would_admit``) was not
changed: it counts expired holds only where the organization is marked (``org_held``) or the
account itself refuses (``state.holds_used and not admits``). So where the account has room,
the organization refuses, its items are unmarked and the account's own expired hold from before
the mark holds the room, the dry run answers ``would_admit`` False and the same request, made
at once, is admitted. Against DynamoDB Local, one clock.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import an_org, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of
from tests.integration.test_review73_grow_own_unmarked_hold import unmark

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


def a_full_org_with_an_unmarked_own_hold(split_org: Callable[..., SplitOrg], shards: int) -> SplitOrg:
    """6 seats, full: a holds h (1, a hold, past its deadline, made before the mark) and x (1)
    for good, b holds 4; a's own limit 10 (room at its account)."""
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 10, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "h", {}, "h", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=4)
    org.drain()
    unmark(org)  # (h made before the organization's mark existed: design.md §12)
    org.clock.now += 11
    return org


@pytest.mark.parametrize("shards", [1, 4])
def test_a_grows_dry_run_agrees_with_the_grow_that_reclaims_its_own_unmarked_hold(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given a full organization whose only expired hold is a's own h, from before the mark
    org = a_full_org_with_an_unmarked_own_hold(split_org, shards)
    a = org.accounts[0]

    # When a asks the dry run of growing x by one, then grows it
    dry = org.service.would_resize(a, "x", 2, kind=SEATS)
    real = answer_of(lambda: org.service.resize(a, "x", 2, kind=SEATS), figures=True)
    org.drain()

    # Then both say the same: the PATCH reclaims h and is admitted (review 73), so the dry run,
    # judged "as the request would be", says would_admit
    assert real == "admitted"
    assert dry.would_admit, f"the dry run refused what the PATCH then admitted ({dry})"


@pytest.mark.parametrize("shards", [1, 4])
def test_a_creates_dry_run_agrees_with_the_create_that_reclaims_its_own_unmarked_hold(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given the same organization
    org = a_full_org_with_an_unmarked_own_hold(split_org, shards)
    a = org.accounts[0]

    # When a asks the dry run of a create of one seat, then makes it
    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS, units=1)
    real = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS, units=1), figures=True)
    org.drain()

    # Then both say the same (the create's refusal at the organization carries holds True: h
    # is reclaimed, and it is admitted)
    assert real == "admitted"
    assert dry.would_admit, f"the dry run refused what the PUT then admitted ({dry})"
