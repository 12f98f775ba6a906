"""Review 68 (fixed): the cost of a refusal at a split organization's shard (``org_level.refused``:
a member's grow refused there, or a create refused at its shard after its precheck found room).
Such a refusal carried neither the organization's holds mark nor its key count, so its reclaim
read the organization's ``usage_keys`` (a consistent GetItem) and Queried every one of its 4 S
OrgHoldIndex keys, even where no member ever held: 1 GetItem and 64 Queries at S = 16, where it
made 1 Query before the keys were spread. The split counter's own read of every shard item has
both the mark (``held``) and the item count (``hold_keys``): the refusal now carries them
(``Admission.holds_used``, ``Admission.items``), and a refusal where no member ever held makes
no Query of the index (design.md §12)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.resources.holds import ORG_HOLD_INDEX
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import Requests
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def test_a_grow_refused_at_a_split_organization_whose_members_never_held_reads_no_hold_key(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization of 40 seats split over 16, full, no member ever held
    org = split_org(40, 16)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS)
    for n in range(39):
        org.service.create(b, f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    assert not any(shard.state.holds_used for shard in org.picture().shards.values())

    # (a create refused there, at its precheck, reads none: the mark)
    with Requests(org) as creating, pytest.raises(LimitExceeded):
        org.service.create(a, "y", {}, "y", kind=SEATS)
    assert creating.seen[f"Query:{ORG_HOLD_INDEX}"] == 0

    # When a's grow of x by one is refused at the organization
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.resize(a, "x", 2, kind=SEATS)
    assert refused.value.scope == "organization"

    # Then it read none of the organization's hold keys (as a create refused there does)
    queries = requests.seen[f"Query:{ORG_HOLD_INDEX}"]
    assert queries <= 1, f"{queries} OrgHoldIndex Queries and {requests.seen['GetItem']} GetItem(s)"
