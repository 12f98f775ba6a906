"""Review 52 (hostile): the stream path's count of a create left pending, arriving past half the
grace period (counting/eventual.py, review 51's fix), is dropped as "the census's". But nothing
asks for that census: the pending item is in no index (items.pending_item puts no PendingIndex
keys; only the stream path's _leave_to_sweeper or make_live(index=True) do), the replayed batch
succeeds (no audit is requested), and the only other trigger is DynamoDB's TTL of the pending item
(PENDING_TTL_SECONDS: 15 days). Until then the account's best_effort holds a unit for a resource
nobody can see, and creates are refused with room under the limit. Before review 51's fix the
same late record made the create live (its unit held by a visible resource)."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.faults import ProcessDied, injected, on_a_resource
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_review51_recount_late_count import _live_units

pytestmark = pytest.mark.integration


def test_a_late_count_dropped_as_the_censuss_leaves_its_unit_held_with_no_census_to_come(
    settings, clients, stream
) -> None:
    # Given an account of no organization, limit 2, holding x (counted)
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "x", {}, "x", kind=SEATS)
    org.drain(account)
    # ... and c's create, admitted at the account (2 of 2), whose process dies as it makes c live
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=on_a_resource),
        pytest.raises(ProcessDied),
    ):
        org.service.create(account, "c", {}, "c", kind=SEATS)
    state = org.service.counters.read(account, kind=SEATS)
    assert (state.best_effort, state.eventual) == (2, 1)
    # When the stream path's batch with c's admission record is late past half the grace period
    # (its batch retried from the retry queue: visibility timeout 360 s) and is applied then ...
    org.clock.now += org.settings.pending_grace_seconds / 2 + 1
    org.drain(account)
    # ... and the sweeper runs, every 5 minutes, for a day
    for _ in range(3):
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        org.drain(account)
    org.clock.now += 24 * 3600
    org.sweeper().sweep()
    org.drain(account)
    # Then c's unit is given back (c was never made live: nobody was told it exists), and a
    # create of y fits under the limit of 2 beside x
    items = {i["resource_id"]["S"]: i["state"]["S"] for i in org.resources(account)}
    state = org.service.counters.read(account, kind=SEATS)
    try:
        org.service.create(account, "y", {}, "y", kind=SEATS)
        outcome = "201"
    except LimitExceeded:
        outcome = "409"
    assert outcome == "201", (
        f"y refused with {_live_units(org, account)} unit live of limit 2 a day later: items {items}, "
        f"best_effort {state.best_effort}, eventual {state.eventual}"
    )
