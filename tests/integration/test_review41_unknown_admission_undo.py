"""Review 41 (hostile): a member's create whose organization's admission (O2) failed before it
was sent (outcome unknown to the client, never applied), not confirmed, then refused at its
account (C4 throttled): the undo released at the organization an admission that never applied
(best_effort 0 with x live), and three more creates were admitted past 3 seats until the heal.
The undo now only marks it; the sweeper's census settles it."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import DomainError, LimitExceeded
from tests.faults import at_an_organization, injected
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _account_counter(body: dict) -> bool:
    key = body.get("Key", {})
    return str(key.get("pk", {}).get("S", "")).startswith("ACCOUNT#") and str(
        key.get("sk", {}).get("S", "")
    ).startswith("COUNTER#")


def test_an_undo_of_an_unconfirmed_org_admission_releases_nothing_and_the_census_settles_it(
    settings, clients, stream
) -> None:
    org = Org(settings, clients, stream, limit=3)
    first, second = org.members
    org.service.create(first, "x", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 1)
    # When second's create: its organization's admission fails before it is sent (a TLS
    # handshake failure: the client cannot tell), not confirmed; its account's admission throttled
    single = org.clients.dynamodb_single_attempt
    with (
        injected(single, "UpdateItem", when="before", lost="ssl", times=1, where=at_an_organization),
        injected(single, "UpdateItem", error="ThrottlingException", times=100, where=_account_counter),
        pytest.raises(DomainError),
    ):
        org.service.create(second, "y", {}, kind=SEATS)
    after_undo = org.org_counters()
    # Then the organization still holds x's seat only (nothing of y was ever admitted there) ...
    # and, before the stream path heals it, three more creates are refused past the third seat
    admitted = 0
    for n in range(3):
        try:
            org.service.create(second, f"z{n}", {}, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    org.drain()
    assert (after_undo, admitted, org.live_units()) == ((1, 1), 2, 3)
    # And past the grace period the sweeper's census of y's range settles it there (it held
    # nothing) and removes it: nothing of y is left, the organization's count exact
    for _ in range(2):
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        org.drain()
    left = org.resources(second)
    assert sorted(str(i["state"]["S"]) for i in left) == ["live", "live"]
    assert org.org_counters() == (3, 3)
