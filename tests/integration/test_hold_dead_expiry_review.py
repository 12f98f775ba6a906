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
