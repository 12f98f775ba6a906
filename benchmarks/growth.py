"""How costs grow: an admission against the deletes in flight; the sweep, the recount and the heal
against what they cover."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import seed
from benchmarks.world import BenchWorld
from hybrid_counter.capacity import item_size
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.healing import Healer
from hybrid_counter.keys import counter_key
from hybrid_counter.ops.recount import Recounter


def _counter_bytes(world: BenchWorld, account: str) -> int:
    item = world.clients.dynamodb.get_item(
        TableName=world.table, Key=counter_key(account), ConsistentRead=True
    )["Item"]
    return item_size(item)


def admission_vs_deletes_in_flight(world: BenchWorld, backlogs: list[int]) -> list[dict[str, Any]]:
    """Delete k resources while the stream path sees nothing of it, then admit one more."""
    service, rows = world.service(), []
    for backlog in backlogs:
        account = world.account(f"backlog{backlog}")
        ids = seed.account_with(world.clients.dynamodb, world.table, account, backlog + 1)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda rid, account=account: service.delete(account, rid), ids[:backlog]))
        before = _counter_bytes(world, account)
        with world.meter.labeled(f"admission_after_{backlog}_deletes") as tally:
            service.create(account, "one more", {})
        rows.append(
            {
                "deletes_in_flight": backlog,
                "counter_item_bytes": max(before, _counter_bytes(world, account)),
                "admission_write_units": tally.counter_item_write_units,
                "create_write_units": tally.write_units,
            }
        )
    return rows


def recount_vs_account_size(world: BenchWorld, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        account = world.account(f"recount{size}")
        seed.account_with(world.clients.dynamodb, world.table, account, size)
        started = time.monotonic()
        with world.meter.labeled(f"recount_{size}") as tally:
            report = world_recounter(world).recount(account, fix=True).to_json()
        rows.append(
            {
                "resources": size,
                "requests": sum(tally.requests.values()),
                "read_units": round(tally.read_units, 1),
                "write_units": round(tally.total_write_units, 1),
                "census_attempts": report["census_attempts"],
                "seconds_here": round(time.monotonic() - started, 1),
            }
        )
    return rows


def world_recounter(world: BenchWorld) -> Recounter:
    service = world.service()
    return Recounter(
        world.table,
        service.counters,
        world.counter(),
        Healer(world.table, world.clients),
        world.clients,
        service=service,
        grace_seconds=world.settings.pending_grace_seconds,
    )


def sweep_vs_entries(world: BenchWorld, counts: list[int]) -> list[dict[str, Any]]:
    rows = []
    later = time.time() + 10 * world.settings.pending_grace_seconds
    for count in counts:
        account = world.account(f"sweep{count}")
        seed.pending_index_entries(world.clients.dynamodb, world.table, account, count, age=0)
        sweeper = Sweeper(
            world.table,
            world.counter(),
            world.settings.pending_grace_seconds,
            world.clients,
            clock=lambda: later,
        )
        with world.meter.labeled(f"sweep_{count}") as tally:
            outcome = sweeper.sweep()
        rows.append(
            {
                "entries": count,
                "counted": outcome.report.counted,
                "requests": sum(tally.requests.values()),
                "read_units": round(tally.read_units, 1),
                "write_units": round(tally.total_write_units, 1),
                "pages": outcome.pages,
            }
        )
    return rows


def heal_all_vs_accounts(world: BenchWorld, totals: list[int]) -> list[dict[str, Any]]:
    """heal --all over every account in the table, as the number of accounts grows."""
    rows, written = [], 0
    healer = Healer(world.table, world.clients)
    for total in totals:
        seed.accounts_with_drift(world.clients.dynamodb, world.table, f"heal{total}-", total - written)
        written = total
        with world.meter.labeled(f"heal_all_{total}") as tally:
            report = healer.heal_all()
        rows.append(
            {
                "accounts_added": total,
                "accounts_read": report.accounts_read,
                "healed": len(report.healed),
                "requests": sum(tally.requests.values()),
                "read_units": round(tally.read_units, 1),
                "write_units": round(tally.total_write_units, 1),
            }
        )
    return rows
