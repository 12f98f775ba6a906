"""Review 66 (hostile): the organization-wide reclaim's page since review 64 (holds.py
``reclaimable``: the account's entries, live then claimed, then the organization's). Against
DynamoDB Local, one clock."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from tests.integration.test_hold_expiry_in_flight import claim_its_expiry  # noqa: F401 (pattern)
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import MADE, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


def _claim(org: SplitOrg, account: str, rid: str, *, expiring: bool) -> None:
    """Another request's claim of the hold (its owner's DELETE, or an expiry's H2), its release
    not landed (not answered, or its process died)."""
    table = org.service.holds._table
    item = table.get(account, rid, kind=SEATS)
    assert item is not None
    claimed = table.claim(
        account,
        rid,
        f"other-{uuid.uuid4().hex[:8]}",
        kind=SEATS,
        incarnation=str(item["incarnation"]["S"]),
        expiring=float(item["hold_until"]["N"]) if expiring else None,
    )
    assert claimed.applied


@pytest.mark.parametrize("claims", ["owners-deletes", "dead-expiries"])
def test_an_accounts_claims_crowd_another_members_live_expired_hold_out_of_the_page(
    split_org: Callable[..., SplitOrg], claims: str
) -> None:
    """Organization of 110 seats. Member a holds a0..a99 (1 seat each), past their deadline,
    each claimed by another request (its owner's DELETE not answered yet, or an expiry whose
    process died: either way, not this refusal's to release). Member b holds hb (10), past its
    deadline, live: nobody is expiring it. a's create of 10 is refused at the organization (110
    of 110); its reclaim reads a's own page (live first, then claims: 100 claims) and appends
    the organization's, then cuts the whole at RECLAIM_PAGE (100): hb is cut out, never
    expired. Before review 64's change a's page held live entries only and hb was reclaimed:
    admitted. Now: 409 (owners' deletes, not waited for) or 503 after the wait (dead expiries),
    on every retry, until the sweeper's run expires hb."""
    org = split_org(110, 1)
    MADE.append(org)
    a, b = org.accounts[:2]
    for account in (a, b):
        org.service.set_limit(account, 1000, kind=SEATS)
    org.service = org.new_service()
    for n in range(100):
        org.service.create(a, f"a{n:02}", {}, f"a{n:02}", kind=SEATS, hold_seconds=10)
    org.service.create(b, "hb", {}, "hb", kind=SEATS, units=10, hold_seconds=10)
    org.drain()
    org.clock.now += 11
    for n in range(100):
        _claim(org, a, f"a{n:02}", expiring=claims == "dead-expiries")

    answer = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS, units=10))
    finish_the_claims(org, a)
    assert answer == "admitted", (
        f"hb (b's expired hold, live, 10 seats) held the room and was never reclaimed: {answer}"
    )


def finish_the_claims(org: SplitOrg, account: str) -> None:
    """The 100 claims made here finished by the sweeper's takeovers past the grace period: left
    in the shared table's PendingIndex, they would be another test's sweep's to finish (one
    that checks the index holds no resource after its own runs)."""
    for _ in range(5):
        org.sweep_after_the_grace_period()
        left = org.clients.dynamodb.query(
            TableName=org.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            FilterExpression="attribute_exists(pending_shard)",
            ExpressionAttributeValues={":pk": {"S": f"ACCOUNT#{account}"}, ":prefix": {"S": "RESOURCE#"}},
            ConsistentRead=True,
        )["Items"]
        if not left:
            return
    raise AssertionError(f"{len(left)} claims left in the PendingIndex after five sweeps")
