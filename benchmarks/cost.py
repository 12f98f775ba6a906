"""What one create, one delete and one lifecycle cost, in DynamoDB requests, read units and write
units: our design (batched counting) and the reference design, the same workload in the same run."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.capacity import item_size
from benchmarks.meter import Tally
from benchmarks.reference import COUNTER, RESOURCE, ReferenceDesign
from benchmarks.world import BenchWorld
from hybrid_counter.keys import account_pk, counter_key, resource_key


def _item(world: BenchWorld, key: dict[str, Any]) -> dict[str, Any]:
    return dict(
        world.clients.dynamodb.get_item(TableName=world.table, Key=key, ConsistentRead=True).get("Item", {})
    )


def lifecycle_figures(world: BenchWorld, design: str, n: int) -> dict[str, Any]:
    phases = {
        phase: world.meter.tally(f"{design}:{phase}")
        for phase in ("create", "stream_after_creates", "delete", "stream_after_deletes")
    }
    lifecycle = Tally()
    for tally in phases.values():
        lifecycle.add(tally)
    stream = Tally()
    stream.add(phases["stream_after_creates"])
    stream.add(phases["stream_after_deletes"])
    return {
        "create": phases["create"].per(n),
        "delete": phases["delete"].per(n),
        "stream_per_create": phases["stream_after_creates"].per(n),
        "stream_per_delete": phases["stream_after_deletes"].per(n),
        "lifecycle": lifecycle.per(n),
        "stream_counter_item_writes_per_resource": round(stream.counter_item_writes / n, 4),
    }


def run(world: BenchWorld, n: int = 200) -> dict[str, Any]:
    ours, account = world.service(), world.account("cost")
    ours.set_limit(account, 10 * n)
    counter = world.counter("batched")
    with world.meter.labeled("ours:create"):
        ids = [ours.create(account, f"r{i}", {})[0].resource_id for i in range(n)]
    with world.meter.labeled("ours:stream_after_creates"):
        world.deliver(account, counter)
    sizes = {
        "counter_item_bytes": item_size(_item(world, counter_key(account))),
        "resource_item_bytes": item_size(_item(world, resource_key(account, ids[0]))),
    }
    with world.meter.labeled("ours:delete"):
        for rid in ids:
            ours.delete(account, rid)
    with world.meter.labeled("ours:stream_after_deletes"):
        world.deliver(account, counter)

    reference, ref_account = ReferenceDesign(world.table, world.clients), world.account("ref")
    reference.set_limit(ref_account, 10 * n)
    with world.meter.labeled("reference:create"):
        ref_ids = [reference.create(ref_account, f"r{i}", time.time()) for i in range(n)]
    with world.meter.labeled("reference:stream_after_creates"):
        reference.process(world.stream.records_for(ref_account))
    ref_key = {"pk": {"S": account_pk(ref_account)}}
    ref_sizes = {
        "counter_item_bytes": item_size(_item(world, {**ref_key, "sk": {"S": COUNTER}})),
        "resource_item_bytes": item_size(_item(world, {**ref_key, "sk": {"S": RESOURCE + ref_ids[0]}})),
    }
    with world.meter.labeled("reference:delete"):
        for rid in ref_ids:
            reference.delete(ref_account, rid)
    with world.meter.labeled("reference:stream_after_deletes"):
        reference.process(world.stream.records_for(ref_account))

    return {
        "operations": n,
        "ours": {**lifecycle_figures(world, "ours", n), "item_sizes": sizes},
        "reference": {**lifecycle_figures(world, "reference", n), "item_sizes": ref_sizes},
    }
