"""Review 58 (hostile): a member's create dead between C4 and C5 whose account's admission record
is late past half the grace period (its batch in the retry queue) and whose organization's records
are late too (the same retry queue), while another member's admission overwrites the shard's
``last_admission``.

Before review 51's rule, the late account count made the item live and its own MODIFY record
counted it at its organization (records.py ``_made_live_unsure_of_its_org``). Now the count is
dropped (eventual.py ``_still_needed``: too late to make live) and a census of its account's range
is asked for. The sweeper takes that census past the grace period: it gives the account's unit
back and then removes the item (repairs.py ``roll_back_stale_pending``). The item is not
``org_counted`` (its organization's record is still late), and the shard's ``last_admission``
names the other member's create, so ``_admitted_at_org`` says False: the item is removed by a
plain roll back, with no mark and no census of its organization's range (the path that the
sweeper's ``_finish_undo`` takes for marked items). Its organization's late O2 record then finds
no item: its count is dropped. The organization's best_effort keeps the seat of a create nobody
holds, for good (nothing is indexed; only an operator's ``org-recount`` finds it).

Fixed (2026-11-27, twelfth session): a member's pending item rolled back without a confirmed
admission at its organization first asks for the census of its organization's range (a durable
request the sweeper takes at its next run: repairs.py ``roll_back_stale_pending``; mutation 195)."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk, org_pk
from tests.faults import ProcessDied, injected, on_a_resource
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def test_a_members_create_whose_account_count_is_dropped_leaves_no_seat_held_at_its_organization(
    settings, clients, stream
) -> None:
    # Given an organization of 3 seats, members a and b (10 each), a holding x (counted)
    org = Org(settings, clients, stream, limit=3)
    a, b = org.members[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS)
    org.drain()
    # ... and a's create of c, admitted at the organization (O2) and at a (C4), whose process dies
    # as it makes c live
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=on_a_resource),
        pytest.raises(ProcessDied),
    ):
        org.service.create(a, "c", {}, "c", kind=SEATS)
    assert org.org_counters() == (2, 1)
    # ... and b's create of y, admitted there next (3 of 3: the shard's last_admission names y)
    org.service.create(b, "y", {}, "y", kind=SEATS)
    org.deliver(account_pk(b))
    # When the stream path's batches of a's and the organization's records are late (retry queue):
    # a's arrives past half the grace period (c's count dropped as the census's, a census asked for)
    org.clock.now += org.settings.pending_grace_seconds / 2 + 1
    org.deliver(account_pk(a))
    # ... the sweeper takes that census past the grace period ...
    org.clock.now += org.settings.pending_grace_seconds / 2 + 1
    org.sweeper().sweep()
    org.deliver(account_pk(a), account_pk(b))
    # ... and the organization's batch arrives after (then the sweeper runs on for a day)
    org.deliver(org_pk(org.org_id))
    for _ in range(4):
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        org.drain()
    org.clock.now += 24 * 3600
    org.sweeper().sweep()
    org.drain()
    # Then c is gone (told 503/never answered), x and y are live (2 of 3 seats), and a third seat
    # can be had: the organization holds no seat for c
    live = sorted(
        i["resource_id"]["S"] for m in (a, b) for i in org.resources(m) if i["state"]["S"] == "live"
    )
    left = sorted(i["resource_id"]["S"] for m in (a, b) for i in org.resources(m))
    assert live == ["x", "y"], (live, left)
    counters = org.org_counters()
    try:
        org.service.create(b, "z", {}, "z", kind=SEATS)
        outcome = "201"
    except LimitExceeded:
        outcome = "409"
    assert outcome == "201", (
        f"z refused with {live} live of 3 seats a day later: items {left}, organization "
        f"(best_effort, eventual) {counters}"
    )
