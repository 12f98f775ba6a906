"""Review 65: the organization's holds mark (design.md §12) against the counter's layout
changing under a member's hold: the hold admitted on the single item, which its first split
then freezes and lays out again; and a hold on a shard that S going back to fewer leaves
beyond S. Past the deadline, both the dry run and the create must find the expired hold."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_member_resizes import split_org  # noqa: F401
from tests.integration.test_org_hold_reclaim import an_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("first", "then"), [(1, 4), (4, 2), (4, 1), (2, 16)])
def test_an_expired_hold_is_found_whatever_the_layout_became(
    split_org: Callable[..., SplitOrg],  # noqa: F811
    first: int,
    then: int,
) -> None:
    org = an_org(split_org, first)
    a, b, c = org.accounts[:3]
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.service.create(c, "p", {}, "p", kind=SEATS, units=2)
    org.drain()
    org.service.set_org_shards(org.org_id, then)
    org.drain()
    org.clock.now += 11
    dry = org.service.would_create(a, "x", {}, "x", kind=SEATS, units=4)
    try:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
        answer = "admitted"
    except LimitExceeded as refused:
        answer = f"409 {refused.scope} org_holds={refused.org_holds}"
    assert (dry.would_admit, answer) == (True, "admitted")
