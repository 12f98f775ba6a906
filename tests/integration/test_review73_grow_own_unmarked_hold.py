"""Review 73 (hostile, on 360b3df): ``_reclaiming`` answers a refusal at an organization whose
items carry no ``holds_used`` mark at once unless the refusing account is *known* to have held
(``holds is True``), "an account that held is still searched: its holds from before the mark".

A member's grow is judged at its organization first (resize.py), so its refusal there never
knows its account (``holds`` None): an account that DID hold is never searched on a grow. Its
own expired hold from before the mark (design.md §12, "The organization's mark": an
organization's items carry no mark for holds made before it existed) holds the room, and the
grow answers 409 at once, while a create of the same units by the same account (``holds``
True) reclaims that hold and is admitted. Before 360b3df the grow searched its account's holds
(``own`` True) and was admitted. Against DynamoDB Local, one clock.

Fixed the same day: where the refusal does not say whether the account held, its counter
item is read (``ResourceService._ever_held``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.keys import org_counter_key
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import an_org, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


def unmark(org: SplitOrg) -> None:
    """The organization's items of seats as a hold made before the mark existed left them."""
    for n in org.picture().shards:
        org.clients.dynamodb.update_item(
            TableName=org.settings.table_name,
            Key=org_counter_key(org.org_id, kind=SEATS, shard=n),
            UpdateExpression="REMOVE holds_used",
        )
    assert not any(shard.state.holds_used for shard in org.picture().shards.values())


@pytest.mark.parametrize("shards", [1, 4])
def test_a_grow_by_an_account_that_held_reclaims_its_own_hold_from_before_the_mark(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats, full: a holds h (1, a hold) and x (1) for good, b holds 4
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 10, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "h", {}, "h", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=4)
    org.drain()
    # ... h made before the organization's mark existed (the upgrade window, design.md §12)
    unmark(org)
    org.clock.now += 11  # h past its deadline: it holds a seat it no longer should

    # When a grows x by one (a create of one seat by a would reclaim h: its account held)
    dry = org.service.would_resize(a, "x", 2, kind=SEATS)
    real = answer_of(lambda: org.service.resize(a, "x", 2, kind=SEATS), figures=True)
    org.drain()

    # Then it is admitted: a's own expired hold h is what holds the room, and a is an account
    # that held (before 360b3df its holds were searched; now 409 at once)
    assert real == "admitted", f"the PATCH: {real}; the dry run: would_admit={dry.would_admit}"
