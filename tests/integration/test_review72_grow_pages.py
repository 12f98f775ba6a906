"""Review 72 (hostile, on the day's hold changes as a whole): a member's grow (PATCH) refused
for room goes through ``service._reclaiming`` as a create does, but is judged at its
organization first (resize.py: a member's grow moves the organization's counter before its
account's). Against DynamoDB Local, one clock.

The dry run (``would_resize`` -> ``_would_admit``) counts the expired holds as a create reclaims
them when both levels refuse (``in_turn``, review 61): the account's page, then a page of the
organization's apart. The grow, refused at its organization first, reclaims ONE page of both
(``reclaimable(own=True, org=...)``), then, refused at its organization again, answers at once
(``org is not None``): the third judgement a create gets never comes. With more expired holds
than a page, the dry run says would_admit and the PATCH answers 409.

Fixed the same day (resources/service.py: ``_reclaiming``, ``_would_admit``).
"""

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
def test_a_dry_run_of_a_members_grow_agrees_with_the_patch(
    split_org: Callable[..., SplitOrg], shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RECLAIM_PAGE at 2 (for 100: the same with 100 expired holds of a's), as review 61's
    create test. a (its limit 3) holds ha1 and ha2 (1 each, past their deadline) and x (1) for
    good; b holds hb (1, past its deadline) and p (2) for good: the organization at 6; its limit
    is then lowered to 4 (forced). a PATCHes x to 2 (a grow of 1). The dry run: refused at a
    (3 + 1 > 3) and at the organization (6 + 1 > 4), counts a's page (ha1, ha2) and then the
    organization's apart (hb): 3 - 2 + 1 <= 3 and 6 - 3 + 1 <= 4, would_admit. The PATCH: refused
    at the organization first, reclaims one page of both (ha1, ha2: a's first), is refused there
    again (4 + 1 > 4) and answers 409 at once, hb never reclaimed."""
    from hybrid_counter.resources import holds

    monkeypatch.setattr(holds, "RECLAIM_PAGE", 2)
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 3, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "ha1", {}, "ha1", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(a, "ha2", {}, "ha2", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.service.create(b, "hb", {}, "hb", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=2)
    org.drain()
    org.service.set_org_limit(org.org_id, SEATS, 4, force=True)
    org.service = org.new_service()
    org.clock.now += 11

    dry = org.service.would_resize(a, "x", 2, kind=SEATS)
    real = answer_of(lambda: org.service.resize(a, "x", 2, kind=SEATS), figures=True)
    org.drain()
    assert (dry.would_admit, real.split(" (")[0]) in {
        (True, "admitted"),
        (False, "409 organization"),
        (False, "409 account"),
    }, f"the dry run: would_admit={dry.would_admit} (organization: {dry.organization}); the PATCH: {real}"
