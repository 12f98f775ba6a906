"""Review 38 (hostile, fixed): an undo's release at the organization, when the stream path is late past
the grace period (design §10.4's own premise: a failed batch waits in the retry queue, 360 s,
longer than PendingGraceSeconds, 300 s)."""

from __future__ import annotations

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk
from tests.explorer.scheduler import Race
from tests.faults import ProcessDied, injected
from tests.integration.test_org_races import SEATS, Org, org

pytestmark = pytest.mark.integration
__all__ = ["org"]  # the fixture: 2 seats, members a and b


def _deliver(org: Org, pk: str) -> None:
    while records := org.stream.records_of(pk):
        assert process_stream_batch(records, org.counter).failed_sequence_numbers == []


def _sweep(org: Org) -> None:
    org.clock.now += org.settings.pending_grace_seconds + 1
    Sweeper(
        org.settings.table_name, org.counter, org.settings.pending_grace_seconds, org.clients, clock=org.clock
    ).sweep()


def test_a_sweepers_undo_that_dies_after_its_release_is_not_released_again_when_the_stream_is_late(
    org: Org,
) -> None:
    # Given b holds y; a's create dies between its organization's admission and its account's
    # (the organization counts it: 2 of 2)
    org.service.create(org.b, "y", {}, kind=SEATS)
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(org.a, "x", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (2, 2)
    # When the sweeper, past the grace period, undoes it at the organization and dies before it
    # removes the item (its process killed at the DeleteItem)
    with injected(org.clients.dynamodb, "DeleteItem", when="crash"), pytest.raises(ProcessDied):
        _sweep(org)
    assert org.org_counters() == (1, 1)  # the undo's release applied
    # and the organization's records are late (a batch in the retry queue), the accounts' are not
    _deliver(org, account_pk(org.a))
    _deliver(org, account_pk(org.b))
    # and the sweeper runs again past the grace period
    _sweep(org)
    org.drain()
    # Then the undone create was released at the organization once, and the organization admits
    # exactly up to its limit of 2 (y and one more)
    assert org.held(org.a) == []
    admitted = ["y"]
    for rid in ("z1", "z2"):
        try:
            org.service.create(org.b, rid, {}, kind=SEATS)
            admitted.append(rid)
        except LimitExceeded:
            pass
    org.drain()
    assert admitted == ["y", "z1"], f"the organization of 2 seats holds {admitted}: {org.org_counters()}"


def test_a_requests_undo_that_dies_after_its_release_is_not_released_again_when_the_stream_is_late(
    org: Org,
) -> None:
    # Given an organization of 3 seats; b holds y; a at its own limit of 1 but for a create
    # ("late") admitted at the organization before another ("early") took a's last slot, and
    # counted there by the stream path meanwhile (its account's admission was slow)
    org.service.set_org_limit(org.org_id, SEATS, 3)
    org.service.set_limit(org.a, 1, kind=SEATS)
    org.service.create(org.b, "y", {}, kind=SEATS)
    slow, fast = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        late = race.start("late", lambda: slow.create(org.a, "late", {}, kind=SEATS))
        while True:  # up to its organization's admission (an UpdateItem of the ORG# partition)
            call = race.scheduler.step(late)
            if call is not None and call.operation == "UpdateItem" and str(call.partition).startswith("ORG#"):
                break
        race.run("early", lambda: fast.create(org.a, "early", {}, kind=SEATS))
        org.drain()
        assert org.org_counters() == (3, 3)
        # When its account refuses it and its undo releases it at the organization, then its
        # process dies before it removes the item
        with injected(org.clients.dynamodb, "DeleteItem", when="crash"):
            race.finish(late)
    assert isinstance(late.error, ProcessDied)
    assert org.org_counters() == (2, 2)
    # and the organization's records are late past the grace period (the retry queue), the
    # accounts' are not; the sweeper runs
    _deliver(org, account_pk(org.a))
    _deliver(org, account_pk(org.b))
    _sweep(org)
    org.drain()
    # Then the undone create was released at the organization once (it holds y and early), and
    # the organization admits exactly up to its limit of 3
    assert org.held(org.a) == [("live", 1)]
    admitted = ["y", "early"]
    for rid in ("z1", "z2"):
        try:
            org.service.create(org.b, rid, {}, kind=SEATS)
            admitted.append(rid)
        except LimitExceeded:
            pass
    assert admitted == ["y", "early", "z1"], (
        f"the organization of 3 seats holds {admitted}: {org.org_counters()}"
    )
