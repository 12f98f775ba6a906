"""Review 74 (hostile, on f0ea3e9): where a member's grow is refused at an organization whose
items say no member ever held (``org_holds`` False), the account's counter item is read
(``ResourceService._ever_held``) and, if it ever held (``holds_used``), its holds are searched and
the grow is judged again: a second PATCH (its claim, its move refused at the organization, its
revert). ``holds_used`` is never removed, and an account keeps it when it joins an organization
(an account joins only while empty: orgs/store.py ``_check_empty``; the join's counter update
leaves the mark). So an account that used a hold once, on its own, then (empty) joined an
organization where no member ever held has every refused grow there made twice, though none of
its holds can hold that organization's room: the cost review 72 removed
(``test_review72_grow_judged_again.py``), back for such accounts for good. Against DynamoDB
Local, one clock.
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
def test_a_grow_by_an_account_that_held_only_before_it_joined_is_not_made_twice(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an account a that, out of any organization, used a hold once (confirmed, then
    # deleted), and then, empty, joined an organization of 4 seats where no member ever held
    org = split_org(4, shards)
    a, b = org.accounts[:2]
    assert org.service.remove_member(org.org_id, a)
    org.service.create(a, "h", {}, "h", kind=SEATS, units=1, hold_seconds=10)
    org.service.confirm(a, "h", kind=SEATS)
    org.service.delete(a, "h", kind=SEATS)
    org.drain()
    assert org.service.add_member(org.org_id, a)
    org.service = org.new_service()
    # ... full: a uses x (1), b three seats
    org.service.create(a, "x", {}, "x", kind=SEATS)
    for n in range(3):
        org.service.create(b, f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    assert not any(shard.state.holds_used for shard in org.picture().shards.values())

    # When a's grow of x by one is refused at the organization
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.resize(a, "x", 2, kind=SEATS)
    assert (refused.value.scope, refused.value.org_holds) == ("organization", False)

    # Then it was made once (one claim of x and its revert) and no HoldIndex Query: no hold of
    # a's can be at the organization (a was empty when it joined, and none was made since)
    writes, queries = requests.seen["UpdateItem"], requests.seen[f"Query:{HOLD_INDEX}"]
    assert (writes, queries) == (2, 0), (
        f"{writes} UpdateItems (claims and reverts of x) and {queries} HoldIndex Query(ies) for one "
        f"refused grow where no hold can be what refused it: {dict(requests.seen)}"
    )
