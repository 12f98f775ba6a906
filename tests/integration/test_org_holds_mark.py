"""An organization's counter items say whether its members ever held (``holds_used``, design.md
§12): a member's hold marks the item (or the split counter's shard) that admits it, and its count
does where its admission is not known to have applied. A refusal at an organization whose items
of the kind carry no mark makes no Query of the OrgHoldIndex (one Query of each of its keys for
the organization: 1, or 4 S for one split over S, which every refusal of a busy organization at
its limit would read); one whose items do looks for its members' expired holds as before."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import org_usage_keys
from hybrid_counter.resources.holds import ORG_HOLD_INDEX
from tests.faults import injected
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import Requests, an_org
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review73_grow_own_unmarked_hold import unmark

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def marked(org: SplitOrg) -> dict[int, bool]:
    return {n: shard.state.holds_used for n, shard in org.picture().shards.items()}


@pytest.mark.parametrize("shards", [1, 4])
def test_an_organization_whose_members_never_held_refuses_without_reading_its_holds(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats (split over `shards`) that member b fills, no hold ever
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    for n in range(6):
        org.service.create(b, f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    assert not any(marked(org).values())

    # When a's create is refused at the organization, and a dry run of it is asked
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.create(a, "x", {}, "x", kind=SEATS)
    with Requests(org) as dry:
        answer = org.service.would_create(a, "x", {}, "x", kind=SEATS)

    # Then neither read the organization's holds, nor a's (a never held)
    assert refused.value.scope == "organization"
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == dry.seen[f"Query:{ORG_HOLD_INDEX}"] == 0
    assert requests.seen["Query:HoldIndex"] == dry.seen["Query:HoldIndex"] == 0
    assert answer.would_admit is False


@pytest.mark.parametrize("shards", [1, 4])
def test_an_unmarked_organization_refusing_an_account_that_held_reads_only_that_accounts_holds(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats (split over `shards`) that b fills but one, and a that held
    # once (a hold confirmed), the organization's items unmarked (as before the mark existed)
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "h", {}, "h", kind=SEATS, hold_seconds=60)
    org.service.confirm(a, "h", kind=SEATS)
    for n in range(5):
        org.service.create(b, f"s{n}", {}, f"s{n}", kind=SEATS)
    org.drain()
    unmark(org)

    # When a's create is refused at the organization
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.create(a, "x", {}, "x", kind=SEATS)

    # Then it looked for a's own expired holds, never for its members' (none of them held there)
    # (mutation 218: the organization's keys were read too, since review 72's answer at once
    # covers only an account that never held)
    assert refused.value.scope == "organization"
    assert requests.seen["Query:HoldIndex"] == 1
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == 0


@pytest.mark.parametrize("shards", [1, 4])
def test_a_members_hold_marks_the_item_that_admits_it_and_its_expiry_is_reclaimed(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats: member b holds 4 for 10 s, member c uses 2 for good
    org = an_org(split_org, shards)
    a, b, c = org.accounts[:3]
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.service.create(c, "p", {}, "p", kind=SEATS, units=2)
    org.drain()

    # Then the item that admitted the hold is marked, and only it
    [(_, admitting)] = [held for key, held in org.live_on_shards().items() if key.endswith("/h")]
    assert [n for n, m in marked(org).items() if m] == [admitting]

    # When, past its deadline, a's create of 4 is refused at the organization
    org.clock.now += 11
    with Requests(org) as requests:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=4)

    # Then it looked (one Query a key of the index: 1, or 4 S for one split over S), expired the
    # hold and was admitted
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == org_usage_keys(shards)
    org.drain()
    assert org.picture().used == 6


def _the_orgs_hold_admission(body: dict) -> bool:
    """The organization's admission of the hold: a member's token, and the mark."""
    text = json.dumps(body)
    return "holds_used" in text and "ORG#" in text


def test_a_hold_counted_at_its_organization_without_its_admission_marks_it(
    split_org: Callable[..., SplitOrg],
) -> None:
    """The organization's admission of member b's hold is lost before it reaches DynamoDB (the
    client sees the connection closed: outcome unknown); the create goes on, its account admits
    it, it is made live and the stream path counts it at both levels (P1's exception): the
    organization's counter item now holds the seats with no mark from an admission. Past the
    deadline, a refusal at the organization must still find that expired hold."""
    org = an_org(split_org)
    a, b, c = org.accounts[:3]
    with injected(
        org.clients.dynamodb_single_attempt,
        "UpdateItem",
        when="before",
        lost="closed",
        times=1,
        where=_the_orgs_hold_admission,
    ) as fault:
        org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=3600)
    assert fault.fired == 1
    org.drain()
    org.sweep_after_the_grace_period()  # (whatever the create left indexed, counted)
    org.service.create(c, "p", {}, "p", kind=SEATS, units=2)
    org.drain()
    assert org.picture().used == 6
    assert marked(org) == {0: True}  # marked by the count

    org.clock.now += 3600
    try:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
        answer = "admitted"
    except LimitExceeded as refused:
        answer = f"409 {refused.scope}"
    assert answer == "admitted"
