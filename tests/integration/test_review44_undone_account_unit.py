"""Review 44 (hostile): a member's create admitted at both levels whose process died before it
made the item live (between C4 and C5), its account's stream records late past the grace period
(the account's batch failing in the retry queue). The sweeper's repair marks it ``undoing``,
releases its seat at the organization and removes it; the late count at the account is refused
(review 41's fix: the count refuses ``undoing``; or the item is gone). The account's admission
(C4) applied, so its ``best_effort`` holds a unit nobody holds. Design P2 / §10.3 say "the
account's unit its admission took is the census's (the audit that found it asks for the census
of its range)": but no audit runs (only an operator or lost stream records request one), and
nothing in the sweeper's path asks for that census. The account's unit is held for good: an
account at a limit of 1 refuses every create from then on."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk, org_pk
from tests.faults import ProcessDied, at_an_organization, injected, on_a_resource
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _items(org: Org, account: str) -> list[dict[str, Any]]:
    return [dict(i) for i in org.resources(account)]


def _sweep(org: Org, times: int = 3) -> None:
    for _ in range(times):
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        org.drain()


@pytest.mark.parametrize("late_batch", ["after_removal", "before_sweep_after_mark"])
def test_an_undone_create_admitted_at_its_account_gives_its_account_unit_back(
    settings, clients, stream, late_batch
) -> None:
    org = Org(settings, clients, stream, limit=3)
    first, _second = org.members
    org.service.set_limit(first, 1, kind=SEATS)
    org.drain()
    # Given first's create of y admitted at both levels, its process dead before it made y live
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=on_a_resource),
        pytest.raises(ProcessDied),
    ):
        org.service.create(first, "y", {}, kind=SEATS)
    # ... its organization's records counted, its account's records late (retry queue)
    while records := org.stream.records_of(org_pk(org.org_id)):
        assert process_stream_batch(records, org.counter).failed_sequence_numbers == []
    late = org.stream.records_of(account_pk(first))
    assert late
    [y] = _items(org, first)
    assert y["state"]["S"] == "pending"
    assert org.service.counters.read(first, kind=SEATS).best_effort == 1
    # When the sweeper, past the grace period, undoes y (marks, releases at the organization, removes)
    org.clock.now += org.settings.pending_grace_seconds + 1
    sweeper = org.sweeper()
    if late_batch == "before_sweep_after_mark":
        # ... the sweeper's first run dying right after its mark (before its release there), the
        # account's late batch delivered then (its count refused: y is marked)
        with (
            injected(
                org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", where=at_an_organization
            ),
            injected(org.clients.dynamodb, "UpdateItem", when="crash", where=at_an_organization),
            pytest.raises(ProcessDied),
        ):
            sweeper.sweep()
        assert "undoing" in _items(org, first)[0]
        assert process_stream_batch(late, org.counter).failed_sequence_numbers == []
    else:
        sweeper.sweep()
        org.drain()
    if late_batch == "after_removal":
        # ... and the account's late batch is delivered after
        assert process_stream_batch(late, org.counter).failed_sequence_numbers == []
    # ... and the sweeper runs on (many times, past the grace period)
    _sweep(org, 4)
    # Then y is gone, and its account's unit is given back: first (limit 1, nothing live) may create
    assert _items(org, first) == []
    state = org.service.counters.read(first, kind=SEATS)
    try:
        org.service.create(first, "z", {}, kind=SEATS)
        created = True
    except LimitExceeded:
        created = False
    assert (state.best_effort, created) == (0, True)
