"""Review 70 (hostile, on 75ef0d3's ``off_account``). Against DynamoDB Local, one clock; the
owner's DELETE is made here by a process that dies after its last release, before D3.

F3: ``off_account`` knows a given-up claim whose release at its account applied; nothing knows
one whose release at its organization applied too. A member's DELETE of its expired hold that
released at both levels and died before removing the item (the stream path, lagging, removes it
later) is waited for at the organization and counted there: the dry run subtracts its units
from an organization's use that no longer holds them (would_admit where no order admits), and
the request, the claim given up, answers 503 where 409 is certain.

Fixed the same day: what a given-up (or dry-run counted) hold still holds at each level is read
from its counters' last tokens (resources/hold_levels.py; design.md §12).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.test_hold_expiry_in_flight import waiting_service
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import an_org, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


class _Org:
    """What waiting_service needs of a world: settings, clients, clock."""

    def __init__(self, org: SplitOrg) -> None:
        self.settings, self.clients, self.clock = org.settings, org.clients, org.clock


@pytest.mark.parametrize("lands", [True, False], ids=["the-stream-removes-it", "the-stream-lags"])
def test_a_members_delete_released_at_its_organization_is_not_counted_there_again(
    split_org: Callable[..., SplitOrg], lands: bool
) -> None:
    """Organization of 6 seats: member a holds x (2) for good; member b a hold h (4) for 10 s. Past
    h's deadline, b's owner DELETEs h: claimed, released at b's account and at the organization
    (2 of 6 used), and the process dies before removing the item. a's create of 5: x alone
    leaves 4 seats, so 409 is certain in every order. The dry run: 2 - 4 + 5 <= 6, would_admit.
    The create waits for h's claim; the stream path removing it meanwhile: 409; lagging past the
    wait: given up, counted at the organization, 503."""
    org = an_org(split_org)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.drain()
    org.clock.now += 11

    owner = org.new_service()
    owner._delete._remove = lambda *_, **__: None  # type: ignore[method-assign]  # dies before D3
    owner.delete(b, "h", kind=SEATS)

    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS, units=5)
    assert dry.organization is not None
    assert dry.organization.used == 2  # h's 4 released there already
    answer = answer_of(
        lambda: waiting_service(_Org(org), [org.drain] if lands else []).create(  # type: ignore[arg-type]
            a, "y", {}, "y", kind=SEATS, units=5
        ),
        figures=True,
    )
    org.drain()
    assert (dry.would_admit, answer.split(" (")[0]) == (False, "409 organization"), (
        f"x holds 2 of 6 for good, h's 4 released at both levels: no order admits 5; the dry run "
        f"said would_admit={dry.would_admit} (organization {dry.organization}), the create "
        f"answered {answer}"
    )


def test_a_refusal_at_an_organization_reads_no_other_members_counters_for_its_given_up_claims(
    split_org: Callable[..., SplitOrg],
) -> None:
    """Organization of 6 seats: members b, c, d each hold a hold of 2 (6 of 6), past its deadline,
    each claimed by an expiry whose process died 6 s ago (given up at once). a's create of 1 is
    refused at the organization: 503. ``Reclaimed.off_account`` is read only for the refuser's
    own holds at an account refusal, so nothing it learns of b's, c's or d's can change the
    answer; yet ``reclaim`` reads each one's counter (one GetItem per member: up to a page of
    100 members' claims, 100 GetItems; a given-up live hold, its item again too)."""
    org = an_org(split_org)
    a, *others = org.accounts
    table = org.service.holds._table
    for n, member in enumerate(others[:3]):
        org.service.create(member, f"h{n}", {}, f"h{n}", kind=SEATS, units=2, hold_seconds=10)
    org.drain()
    org.clock.now += 11
    for n, member in enumerate(others[:3]):
        held = table.get(member, f"h{n}", kind=SEATS)
        assert held is not None
        claimed = table.claim(
            member,
            f"h{n}",
            f"dead-{n}",
            kind=SEATS,
            incarnation=str(held["incarnation"]["S"]),
            expiring=float(held["hold_until"]["N"]),
        )
        assert claimed.applied
    org.clock.now += 6  # the claims older than CLAIM_FRESH_SECONDS: given up at once

    counters_read: list[str] = []

    def on_get(params: dict, **_: object) -> None:
        pk, sk = str(params["Key"]["pk"]["S"]), str(params["Key"]["sk"]["S"])
        if sk.startswith("COUNTER#") and any(m in pk for m in others):
            counters_read.append(pk)

    events = org.clients.dynamodb.meta.events
    events.register("provide-client-params.dynamodb.GetItem", on_get)
    try:
        answer = answer_of(lambda: org.new_service().create(a, "y", {}, "y", kind=SEATS), figures=True)
    finally:
        events.unregister("provide-client-params.dynamodb.GetItem", on_get)
        for _ in range(3):
            org.sweep_after_the_grace_period()
    assert answer.startswith("503")
    assert counters_read == [], f"the refusal at the organization read {counters_read}"
