"""How costs grow: an admission against the deletes in flight; the sweep, the recount and the heal
against what they cover."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import seed
from benchmarks.capacity import item_size
from benchmarks.world import QUIET, BenchWorld
from hybrid_counter.counters.state import EVENTUAL, eventual_share
from hybrid_counter.counting.recount import Recounter
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.healing import Healer
from hybrid_counter.keys import counter_key


def _counter_bytes(world: BenchWorld, account: str) -> int:
    item = world.clients.dynamodb.get_item(
        TableName=world.table, Key=counter_key(account), ConsistentRead=True
    )["Item"]
    return item_size(item)


def admission_vs_deletes_in_flight(world: BenchWorld, backlogs: list[int]) -> list[dict[str, Any]]:
    """Delete k resources in one burst while the stream path sees nothing of it, then admit one
    more; then let the stream path catch up and check the counts are exact and a heal works."""
    service, rows = world.service(), []
    for backlog in backlogs:
        account = world.account(f"backlog{backlog}")
        ids = seed.account_with(world.clients.dynamodb, world.table, account, backlog + 1)
        # 16 threads: each delete is three round trips; 2,000 deletes took 14.9 s here against 24.0 at 8
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda rid, account=account: service.delete(account, rid), ids[:backlog]))
        before = _counter_bytes(world, account)
        with world.meter.labeled(f"admission_after_{backlog}_deletes") as tally:
            service.create(account, "one more", {})
        row = {
            "deletes_in_flight": backlog,
            "counter_item_bytes": max(before, _counter_bytes(world, account)),
            "admission_write_units": tally.counter_item_write_units,
            "create_write_units": tally.write_units,
        }
        rows.append(row | _exact_after_drain(world, account, live=2))
    return rows


def _exact_after_drain(world: BenchWorld, account: str, live: int) -> dict[str, Any]:
    """The stream resumes: both counters equal the live resources; then best_effort knocked
    low is healed back."""
    world.deliver(account, world.counter())
    usage = world.service().usage(account)
    exact = usage.best_effort == usage.eventual == live
    world.clients.dynamodb.update_item(
        TableName=world.table,
        Key=counter_key(account),
        UpdateExpression="SET best_effort = :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )
    healed = Healer(world.table, world.clients, QUIET).heal_account(account).healed
    after = world.service().usage(account)
    return {"exact_after_drain": exact, "healed_after_drain": healed and after.best_effort == live}


def recount_growth(
    world: BenchWorld, sizes: list[int], busy: int, pairs_per_second: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One account grown through ``sizes`` (ascending), recounted with --fix at each size; at
    ``busy`` resources it is also recounted under traffic. Growing one account instead of seeding
    one per size writes 100,000 items instead of 121,000 (the seeding is most of this part's time)."""
    if busy not in sizes or sizes != sorted(sizes):
        raise ValueError("sizes must be ascending and include the busy size")
    account, rows = world.account("recount"), []
    under_traffic: dict[str, Any] = {}
    for held, size in zip([0, *sizes], sizes, strict=False):
        seed.grow_account(world.clients.dynamodb, world.table, account, held, size)
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
        if size == busy:
            under_traffic = _recount_under_traffic(world, account, size, pairs_per_second)
    return rows, under_traffic


def _recount_under_traffic(
    world: BenchWorld, account: str, size: int, pairs_per_second: float
) -> dict[str, Any]:
    """A recount with --fix of an account of ``size`` live resources while create+delete pairs run
    on it and the stream path counts them: does the census of each range find a quiet moment?"""
    # Drift to find: one range's eventual share (and the total) 5 too high, as a lost release
    # would leave it.
    world.clients.dynamodb.update_item(
        TableName=world.table,
        Key=counter_key(account),
        UpdateExpression="ADD #total :five, #share :five",
        ExpressionAttributeNames={"#total": EVENTUAL, "#share": eventual_share("0")},
        ExpressionAttributeValues={":five": {"N": "5"}},
    )
    service, counter, stop, lock = world.service(), world.counter(), threading.Event(), threading.Lock()
    pairs, clients = 0, 4

    def traffic() -> None:
        nonlocal pairs
        while not stop.is_set():
            started = time.monotonic()
            resource, _ = service.create(account, "busy", {})
            service.delete(account, resource.resource_id)
            with lock:
                pairs += 1
            stop.wait(max(0.0, clients / pairs_per_second - (time.monotonic() - started)))

    def stream_path() -> None:
        while not stop.wait(0.5):
            world.deliver(account, counter)

    workers = [threading.Thread(target=traffic, daemon=True) for _ in range(clients)]
    workers.append(threading.Thread(target=stream_path, daemon=True))
    for worker in workers:
        worker.start()
    time.sleep(3.0)  # the traffic is running before the census starts
    pairs_before, started = pairs, time.monotonic()
    try:
        report = world_recounter(world).recount(account, fix=True).to_json()
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    seconds = time.monotonic() - started
    world.deliver(account, counter)
    usage = world.service().usage(account)
    return {
        "resources": size,
        "pairs_per_second_offered": pairs_per_second,
        "pairs_during_recount": pairs - pairs_before,
        "pairs_per_second_achieved": round((pairs - pairs_before) / seconds, 1),
        "drift_found": report["eventual_drift"],
        "census_attempts": report["census_attempts"],
        "converged": not report["ranges_unsettled"] and report["continuation"] is None,
        "exact_after": usage.eventual == usage.best_effort == size,
        "seconds_here": round(seconds, 1),
    }


def world_recounter(world: BenchWorld) -> Recounter:
    service = world.service()
    return Recounter(
        world.table,
        service.counters,
        world.counter(),
        Healer(world.table, world.clients, QUIET),
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
    healer = Healer(world.table, world.clients, QUIET)
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
