"""Review 51 (hostile, lost responses, accounts without an organization): a hold's expiry whose
claim (H2) applied but whose response was lost.

botocore resends the claim; the resend is refused (the item is ``deleting`` now, claimed by this
very request), and ``HoldFlow.expire`` takes any refusal for "confirmed, deleted, resized or
expired by another meanwhile" and returns False: it never recognises its own claim (as the
delete's ``_claim`` does: "our own claim, resent by botocore after a lost response"). So nothing
finishes the expiry it started: the expired hold's units stay held (visible, ``deleting``) until
the sweeper takes the claim over as a dead delete's, past the grace period. Meanwhile the create
whose refusal triggered the reclaim is answered 409 though the hold had expired and its units were
claimed for release, and so is every create and grow of the account for the whole grace period
(design.md §12: "an expired hold never blocks a create longer than that request")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.faults import injected, on_a_resource
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _expiry_claim(body: dict[str, Any]) -> bool:
    return on_a_resource(body) and "expired = :true" in body.get("UpdateExpression", "")


@pytest.mark.parametrize("who", ["reclaim", "sweeper"])
def test_an_expiry_whose_claim_response_is_lost_still_releases_the_hold(
    settings, clients, stream, who
) -> None:
    # Given an account of no organization, limit 2, whose hold h of 2 units is past its deadline
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "h", {}, "h", kind=SEATS, units=2, hold_seconds=60)
    org.drain(account)
    org.clock.now += 61
    # When its expiry's claim (H2) applies and its response is lost (botocore resends it) ...
    with injected(org.clients.dynamodb, "UpdateItem", when="after", where=_expiry_claim) as lost:
        if who == "reclaim":
            # ... made by the reclaim of a create of 1 refused for room
            outcome: str
            try:
                org.service.create(account, "y", {}, "y", kind=SEATS, units=1)
                outcome = "201"
            except LimitExceeded:
                outcome = "409"
        else:
            # ... made by the sweeper's run
            org.sweeper().sweep()
            outcome = "swept"
    assert lost.fired == 1
    org.drain(account)
    # ... and the account's next creates come within the grace period (the sweeper runs too)
    org.clock.now += org.settings.pending_grace_seconds / 2
    org.sweeper().sweep()
    org.drain(account)
    later: list[str] = []
    for n in range(2):
        try:
            org.service.create(account, f"z{n}", {}, f"z{n}", kind=SEATS, units=1)
            later.append("201")
        except LimitExceeded:
            later.append("409")
    h = [i for i in org.resources(account) if i["resource_id"]["S"] == "h"]
    # Then the expired hold no longer holds its 2 units: the creates are admitted (the refused
    # create itself, and the two after it up to the limit of 2)
    state = h[0]["state"]["S"] if h else None
    assert (outcome if who == "reclaim" else "201", later) == (
        "201",
        ["201", "201"] if who == "sweeper" else ["201", "409"],
    ), f"first create: {outcome}, later creates: {later}, h: {state}"
