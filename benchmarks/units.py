"""What units and resizes cost: the create+delete lifecycle (API and stream path) of resources of
5 units against the same of 1 unit, the same number of each in the same run; then resources of 5
units resized up to 10 and back down to 5, with the stream path after each.

Units are numbers on the items (the resource's ``units``; the counter item's totals and shares
move by them), so the lifecycle's requests and units should not change with them.
"""

from __future__ import annotations

from typing import Any

from benchmarks.cost import lifecycle_figures
from benchmarks.world import BenchWorld

COMPARED = ("requests", "read_units", "total_write_units")
PHASES = ("create", "stream_per_create", "delete", "stream_per_delete", "lifecycle")


def differences(one: dict[str, Any], many: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per phase, what the lifecycle of ``many`` units costs beyond that of one unit."""
    return {
        phase: {figure: round(many[phase][figure] - one[phase][figure], 3) for figure in COMPARED}
        for phase in PHASES
    }


def run(world: BenchWorld, operations: int, units: int = 5) -> dict[str, Any]:
    one = _lifecycle(world, operations, 1)
    many = _lifecycle(world, operations, units)
    return {
        "operations": operations,
        "units": units,
        "one_unit": one,
        "many_units": many,
        "differences": differences(one, many),
        "resize": _resizes(world, operations, units),
    }


def _lifecycle(world: BenchWorld, n: int, units: int) -> dict[str, Any]:
    label = f"units{units}"
    service, account = world.service(), world.account(label)
    service.set_limit(account, 1_000_000)  # an override, as in the cost part: no plan read
    counter = world.counter()
    with world.meter.labeled(f"{label}:create"):
        ids = [service.create(account, f"r{i}", {}, units=units)[0].resource_id for i in range(n)]
    with world.meter.labeled(f"{label}:stream_after_creates"):
        world.deliver(account, counter)
    with world.meter.labeled(f"{label}:delete"):
        for rid in ids:
            service.delete(account, rid)
    with world.meter.labeled(f"{label}:stream_after_deletes"):
        world.deliver(account, counter)
    return lifecycle_figures(world, label, n)


def _resizes(world: BenchWorld, n: int, units: int) -> dict[str, Any]:
    """Counted resources of ``units`` resized to twice that, then back."""
    service, account = world.service(), world.account("resize")
    service.set_limit(account, 1_000_000)
    counter = world.counter()
    ids = [service.create(account, f"r{i}", {}, units=units)[0].resource_id for i in range(n)]
    world.deliver(account, counter)
    figures: dict[str, Any] = {}
    for phase, target in (("up", 2 * units), ("down", units)):
        with world.meter.labeled(f"resize:{phase}") as api:
            for rid in ids:
                service.resize(account, rid, target)
        with world.meter.labeled(f"resize:stream_after_{phase}") as stream:
            world.deliver(account, counter)
        figures[phase] = {"api": api.per(n), "stream": stream.per(n)}
    usage = service.usage(account)
    figures["exact"] = usage.best_effort == usage.eventual == n * units
    return figures
