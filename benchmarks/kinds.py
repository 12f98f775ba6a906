"""What an account of many kinds costs to read: service.usage is one Query of the account's counter
items (one per kind) plus its plan, which the service's caches hold (plans/limits.py).

The account is made through the API path: for each kind, two creates, one resized to 5 units and
the other deleted, then the stream path counts them, so every counter item carries what both paths
write on it (last_admission, last_release, last_resize, two ranges' shares). Then each item is
widened to all 16 ranges' shares (1,000 units a range, totals to match), as an account that has
used every range of every kind, and read again: the largest an item gets in steady state.
"""

from __future__ import annotations

import math
import uuid
from concurrent.futures import ThreadPoolExecutor
from statistics import mean
from typing import Any

from benchmarks.capacity import item_size
from benchmarks.world import BenchWorld
from hybrid_counter.counters.expressions import UpdateExpr
from hybrid_counter.counters.state import (
    BEST_EFFORT,
    EVENTUAL,
    best_effort_share,
    eventual_share,
    range_version,
)
from hybrid_counter.keys import COUNTER_PREFIX, RANGES, account_pk, all_ranges
from hybrid_counter.resources import ResourceService
from hybrid_counter.usage import Usage

WIDE_SHARE = 1_000  # units a range, on every range of a widened item
KB4 = 4096


def size_summary(sizes: list[int]) -> dict[str, Any]:
    """Counter items' sizes, and the read units one consistent Query of them all costs by AWS's
    rule (the items' sizes summed, then rounded up to 4 KB)."""
    total = sum(sizes)
    return {
        "items": len(sizes),
        "min_bytes": min(sizes, default=0),
        "mean_bytes": round(mean(sizes), 1) if sizes else 0.0,
        "max_bytes": max(sizes, default=0),
        "total_bytes": total,
        "query_read_units_by_size": max(1, math.ceil(total / KB4)),
    }


def run(world: BenchWorld, kinds: int) -> dict[str, Any]:
    service, account = world.service(), world.account("kinds")
    names = [f"k{n:03d}" for n in range(kinds)]
    plan_id = f"kinds-{uuid.uuid4().hex[:8]}"
    service.put_plan(plan_id, dict.fromkeys(names, 1_000_000))
    service.assign_plan(account, plan_id)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kind: _touch(service, account, kind), names))
    world.deliver(account, world.counter())
    as_made, usage = _read(world, service, account, "as_made")
    # A fresh service (a new process): its caches are cold, so the plan is read as well.
    cold, _ = _read(world, world.service(), account, "cold_cache")
    for kind in names:
        _widen(world, account, kind)
    widened, _ = _read(world, service, account, "widened")

    single, single_account = world.service(), world.account("one-kind")
    single.create(single_account, "only", {})
    world.deliver(single_account, world.counter())
    one_kind, _ = _read(world, single, single_account, "one_kind")
    return {
        "kinds": kinds,
        "as_made": as_made,
        "cold_cache": cold,
        "widened": widened,
        "one_kind": one_kind,
        # Both paths agree on every kind: 5 units held (the resized resource), counted once.
        "exact": all(usage.kinds[kind].best_effort == usage.kinds[kind].eventual == 5 for kind in names),
    }


def _touch(service: ResourceService, account: str, kind: str) -> None:
    kept, _ = service.create(account, "kept", {}, kind=kind)
    gone, _ = service.create(account, "gone", {}, kind=kind)
    service.resize(account, kept.resource_id, 5, kind=kind)
    service.delete(account, gone.resource_id, kind=kind)


def _read(
    world: BenchWorld, service: ResourceService, account: str, phase: str
) -> tuple[dict[str, Any], Usage]:
    """One usage read, metered; the counter items' sizes read apart (unmetered)."""
    with world.meter.labeled(f"kinds:usage_{phase}") as tally:
        usage = service.usage(account)
    figures = {
        "requests": sum(tally.requests.values()),
        "requests_by_operation": dict(sorted(tally.requests.items())),
        "read_units": tally.read_units,
        "kinds_reported": len(usage.kinds),
        "counter_items": size_summary(_counter_sizes(world, account)),
    }
    return figures, usage


def _counter_sizes(world: BenchWorld, account: str) -> list[int]:
    pages = world.clients.dynamodb.get_paginator("query").paginate(
        TableName=world.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": COUNTER_PREFIX}},
        ConsistentRead=True,
    )
    return [item_size(item) for page in pages for item in page.get("Items", [])]


def _widen(world: BenchWorld, account: str, kind: str) -> None:
    """Every range's shares and version present, the totals moved by as much (shares sum to them)."""
    expr = UpdateExpr()
    for range_id in all_ranges():
        expr.add(best_effort_share(range_id), WIDE_SHARE)
        expr.add(eventual_share(range_id), WIDE_SHARE)
        expr.add(range_version(range_id), 1)
    expr.add(BEST_EFFORT, WIDE_SHARE * RANGES)
    expr.add(EVENTUAL, WIDE_SHARE * RANGES)
    world.clients.dynamodb.update_item(**expr.update(world.table, account, kind))
