"""Review 41 (hostile): the stream path's count at the account made live a create the sweeper's
repair had marked ``undoing`` (its condition did not refuse ``undoing``, as make_live's does
since review 35); the repair's release at the organization then applied and its removal was
refused (no longer pending): a live resource its organization no longer held, and two more
creates admitted past the organization's 3 seats. The count now refuses a marked item.

Since review 51 the count also refuses an item put longer ago than half the grace period, by
the stream process's clock, which alone refuses this sequence's late count; a stream process
whose clock is behind the repair's by the grace period ("behind") reaches the ``undoing`` guard."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk, org_pk
from tests.faults import ProcessDied, at_an_organization, injected, on_a_resource, target_of
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _item(org: Org, account: str) -> dict[str, Any]:
    found = org.resources(account)
    [item] = found
    return dict(item)


@pytest.mark.parametrize("stream_clock", ["same", "behind"])
def test_a_late_count_never_makes_live_a_create_the_sweeper_is_undoing(
    settings, clients, stream, stream_clock
) -> None:
    org = Org(settings, clients, stream, limit=3)
    lag = settings.pending_grace_seconds if stream_clock == "behind" else 0
    late_counter = EventualCounter(
        settings.table_name, "batched", org.clients, sleep=lambda _: None, clock=lambda: org.clock() - lag
    )
    first, second = org.members
    org.service.create(second, "x", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 1)
    # Given first's create of y admitted at both levels, its process dead before it made y live
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=on_a_resource),
        pytest.raises(ProcessDied),
    ):
        org.service.create(first, "y", {}, kind=SEATS)
    # ... its organization's record counted (y pending, org_counted, indexed), its account's
    # records late (the account's batch failing in the retry queue)
    while records := org.stream.records_of(org_pk(org.org_id)):
        assert process_stream_batch(records, org.counter).failed_sequence_numbers == []
    late = org.stream.records_of(account_pk(first))
    assert _item(org, first)["state"]["S"] == "pending"
    assert org.org_counters() == (2, 2)
    y_id = _item(org, first)["resource_id"]["S"]
    # When, past the grace period, the sweeper's repair marks y undoing, and the late account
    # batch is delivered just before that repair's release at the organization
    org.clock.now += org.settings.pending_grace_seconds + 1
    fired = {"n": 0}

    def before_org_release(request: Any, **_: Any) -> None:
        if target_of(request) != "UpdateItem" or fired["n"]:
            return
        if not at_an_organization(json.loads(request.body or b"{}")):
            return
        fired["n"] = 1
        assert process_stream_batch(late, late_counter).failed_sequence_numbers == []

    single = org.clients.dynamodb_single_attempt
    single.meta.events.register_first("before-send.*.*", before_org_release)
    try:
        org.service.repairs.roll_back_stale_pending(first, y_id, _item(org, first))
    finally:
        single.meta.events.unregister("before-send.*.*", before_org_release)
    assert fired["n"] == 1
    org.drain()
    # ... and the sweeper's runs since (nothing of y is left in its index)
    for _ in range(2):
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        org.drain()
    # Then y is not live: the late count at its account refused it (marked ``undoing``), the
    # repair released its seat at the organization and removed it, and the census its audit asks
    # for gives its account's unit back; of 3 seats (x live) two more creates are admitted
    leftover = org.resources(first)
    assert leftover == []
    admitted = 0
    for n in range(3):
        try:
            org.service.create(second, f"z{n}", {}, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    org.drain()
    assert (admitted, org.live_units(), org.org_counters()) == (2, 3, (3, 3))
