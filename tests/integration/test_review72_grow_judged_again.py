"""Review 72 (hostile): the cost of a member's grow refused at an organization where no hold was
ever used, since every refused admission is judged again whatever its reclaim found
(``service._reclaiming``, the fourteenth session; design.md §12: "a refusal where holds were
ever used costs those Queries and one more judgement").

A grow is judged at its organization first (resize.py), so its refusal there carries no state of
its account (``LimitExceeded.holds`` None): its reclaim asks the account's HoldIndex (documented).
But then it is judged again, a whole second PATCH: a second claim of the resource, a second
organization move refused, a second revert, though the refusal's own picture says no member's
hold ever counted there (``org_holds`` False) and the Query found none of the account's: no hold
can have been what refused it, nor gone since. A create refused the same way (its account read
first) answers at once. Against DynamoDB Local, one clock.

Fixed the same day (resources/service.py: ``_reclaiming``, ``_would_admit``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.resources.holds import HOLD_INDEX
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import Requests
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_grow_refused_where_no_hold_was_ever_used_is_not_made_twice(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 4 seats, full (a uses x, b three seats), no hold ever used
    org = split_org(4, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS)
    for n in range(3):
        org.service.create(b, f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    assert not any(shard.state.holds_used for shard in org.picture().shards.values())

    # When a's grow of x by one is refused at the organization
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.resize(a, "x", 2, kind=SEATS)
    assert (refused.value.scope, refused.value.org_holds) == ("organization", False)

    # Then it was made once: one claim of x and its revert, and (the fix) no HoldIndex Query
    # either: the organization's mark says no member ever held there, so no expired hold can be
    # what refused it (before the fix: 4 UpdateItems and 1 Query)
    writes, queries = requests.seen["UpdateItem"], requests.seen[f"Query:{HOLD_INDEX}"]
    assert (writes, queries) == (2, 0), (
        f"{writes} UpdateItems (claims and reverts of x) and {queries} HoldIndex Query(ies) for one "
        f"refused grow where no hold was ever used: {dict(requests.seen)}"
    )
