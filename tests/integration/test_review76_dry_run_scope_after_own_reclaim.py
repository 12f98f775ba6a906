"""Review 76 (on 59d0cbc's ``WouldAdmit.scope``): the dry run's level is chosen from the
account's figures before its own expired holds are counted (``account_admits`` reads ``used``,
not ``used - mine``), while its ``would_admit`` is judged after them. A member's create refused at
both levels, whose own expired hold frees its account but not its organization: the request
(refused at its account first, its hold reclaimed, judged again: refused at its organization,
whose members' holds are reclaimed, a third time: refused there) answers ``409 organization``;
its dry run, ``"scope": "account"``. The guide: "`scope` says which level refuses, as the
request's `409` would". Against DynamoDB Local, one clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import an_org, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_creates_dry_run_names_the_organization_where_its_own_reclaim_frees_only_its_account(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats, full: a (its own limit 4) holds h (2, a hold, past its
    # deadline) and p (1) for good; b holds q (3)
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 4, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "h", {}, "h", kind=SEATS, units=2, hold_seconds=10)
    org.service.create(a, "p", {}, "p", kind=SEATS, units=1)
    org.service.create(b, "q", {}, "q", kind=SEATS, units=3)
    org.drain()
    org.clock.now += 11

    # When a asks the dry run of a create of 3 seats, then makes it
    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS, units=3)
    real = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS, units=3), figures=True)
    org.drain()

    # Then both refuse, and name the same level: h's release makes room at a (1 + 3 <= 4) but
    # not at the organization (4 + 3 > 6), where the request is refused last
    assert real.startswith("409 organization"), real
    assert dry.would_admit is False
    assert dry.scope == "organization", f"the dry run named {dry.scope}; the PUT: {real} ({dry})"
