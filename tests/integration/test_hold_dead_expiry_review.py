"""Review 40 (hostile, fixed: design.md §12): a hold whose expiry's process died after its claim."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.faults import ProcessDied, injected
from tests.integration.test_holds import SEATS, World, world

pytestmark = pytest.mark.integration
__all__ = ["world"]


def is_tombstone(body: dict) -> bool:
    return str(body.get("Item", {}).get("sk", {}).get("S", "")).startswith("EXPIRED#")


def test_an_expiry_whose_process_died_after_its_claim_is_finished_by_the_sweeper(world: World) -> None:
    # Given an account of 3 seats holding all 3 in a hold of 10 s, counted
    world.hold("h", units=3, seconds=10)
    world.drain()
    # When its deadline passes and the sweeper's expiry dies right after its claim (H2)
    world.clock.now += 11
    with (
        injected(world.clients.dynamodb, "PutItem", when="crash", where=is_tombstone),
        pytest.raises(ProcessDied),
    ):
        world.sweeper().sweep()
    # ... and the sweeper runs again, past the grace period, twice
    for _ in range(2):
        world.clock.now += world.settings.pending_grace_seconds + 1
        world.sweeper().sweep()
        world.drain()
    # Then the hold is released: its seats are free again, and a create of 1 seat is admitted
    item = world.service._table.get(world.account, "h", kind=SEATS) or {}
    refused = None
    try:
        world.service.create(world.account, "n", {}, "n", kind=SEATS)
    except LimitExceeded as error:
        refused = error
    assert (world.counters(), refused) == ((1, 0), None), (item.get("state"), item.get("expired"))


def test_dead_expiry_claims_never_hide_a_live_expired_hold_from_a_refusal(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Twelfth session, a suspicion of review 60.) A dead expiry's claim keeps its index entry
    (its hold_until) until its takeover; a page of such entries (RECLAIM_PAGE, here 1) must not
    hide a live expired hold behind them from a refusal's reclaim."""
    from hybrid_counter.resources import holds

    # Given an account of 2 seats: h1 (1) expired, its expiry's process dead after its claim;
    # h2 (1) expired later, live
    world.service.set_limit(world.account, 2, kind=SEATS)
    world.service = world.service_at(world.clock)
    world.hold("h1", units=1, seconds=10)
    world.clock.now += 1
    world.hold("h2", units=1, seconds=10)
    world.drain()
    world.clock.now += 10  # h1 past its deadline, h2 not yet
    with (
        injected(world.clients.dynamodb, "PutItem", when="crash", where=is_tombstone),
        pytest.raises(ProcessDied),
    ):
        world.sweeper().sweep()
    world.clock.now += 2  # h2 past its deadline too
    monkeypatch.setattr(holds, "RECLAIM_PAGE", 1)
    # When a create of 1 seat is refused for room (h1's claim holds its seat until the takeover)
    # Then its reclaim finds h2 past h1's dead claim, expires it, and the create is admitted
    world.service.create(world.account, "n", {}, "n", kind=SEATS)
