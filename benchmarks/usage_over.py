"""What "who is near a limit" costs (governance/usage_over.py, GET /usage/over): requests and read
units of an answer of N rows against a table of ACCOUNTS accounts, for N in SIZES; what putting a
counter item in the indexes costs its crossing; and what a counter write of an item in them costs.

The fixture writes ACCOUNTS accounts' counter items of one kind directly (BatchWriteItem,
unmetered: driving them through the API would take most of the run), each with an override of 10
and a use of 5 (50 %: under every threshold). Then N of them are moved over 80 % (some to 100 %)
and their stream records, read from the table's stream, are handed to the stream path's
ThresholdWatcher: its transaction is what puts them in the indexes, as in production. Under every
threshold an item is judged and nothing is written, so the rest are not fed to it.

Each listing is measured as one page of N rows (threshold 80, the kind given, and every kind),
and for the largest N as pages of PAGE rows; the figures are per listing and per row.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from benchmarks.world import QUIET, BenchWorld
from hybrid_counter.counters.state import BEST_EFFORT, EVENTUAL, LIMIT
from hybrid_counter.governance.usage_over import OVER_SHARDS
from hybrid_counter.keys import counter_key
from hybrid_counter.runtime import Components
from localrun.stack.aws_clients import events_client

ACCOUNTS = 10_000
SIZES = (10, 100)
PAGE = 10
LIMIT_OF_EACH = 10


def run(world: BenchWorld, accounts: int = ACCOUNTS, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    bus = next(iter(world.runtime.event_bus_arns))
    settings = replace(world.settings, event_bus_name=bus, usage_thresholds=(80, 100))
    clients = replace(world.clients, events=events_client(world.runtime.events_url))
    components = Components(settings, clients, QUIET)
    kind = f"over{world.account('k').split('-')[1][:6]}"
    names = [world.account("over") for _ in range(accounts)]
    writer = world.fresh_clients().dynamodb  # the fixture's writes, unmetered
    _seed(world, writer, names, kind)
    results: dict[str, Any] = {"accounts": accounts, "kind": kind, "thresholds": [80, 100], "answers": {}}
    over = 0
    for size in sizes:
        with world.meter.labeled(f"over:{size}:crossing"):
            for account in names[over:size]:
                _cross(world, writer, components, account, kind)
        crossings = size - over
        over = size
        results["answers"][str(size)] = _answer(world, components, kind, size, crossings)
    results["counter_write_in_the_index"] = _counter_write(world, names[0], kind)
    return results


def _seed(world: BenchWorld, dynamodb: Any, names: list[str], kind: str) -> None:
    """The counter items, each at 5 of an override of 10 (unmetered: fixture, not measured)."""
    for start in range(0, len(names), 25):
        requests = [
            {"PutRequest": {"Item": {**counter_key(account, kind=kind), **_counts(5)}}}
            for account in names[start : start + 25]
        ]
        while requests:
            answer = dynamodb.batch_write_item(RequestItems={world.table: requests})
            requests = answer.get("UnprocessedItems", {}).get(world.table, [])


def _counts(used: int) -> dict[str, Any]:
    return {
        BEST_EFFORT: {"N": str(used)},
        EVENTUAL: {"N": str(used)},
        LIMIT: {"N": str(LIMIT_OF_EACH)},
    }


def _cross(world: BenchWorld, dynamodb: Any, components: Components, account: str, kind: str) -> None:
    """Move one account over a threshold (about one in eight to 100 %) and hand the counter
    item's stream records (the seed's, under every threshold, and this write's) to the stream
    path's threshold watcher, which records the crossing: only its requests are measured."""
    used = LIMIT_OF_EACH if account[-1] in "05" else 9
    dynamodb.update_item(
        TableName=world.table,
        Key=counter_key(account, kind=kind),
        UpdateExpression=f"SET {BEST_EFFORT} = :u, {EVENTUAL} = :u",
        ExpressionAttributeValues={":u": {"N": str(used)}},
    )
    records = world.stream.records_for(account)
    components.watcher.observe(records)


def _answer(
    world: BenchWorld, components: Components, kind: str, size: int, crossings: int
) -> dict[str, Any]:
    service = components.resources
    figures: dict[str, Any] = {
        "crossing": world.meter.tally(f"over:{size}:crossing").per(crossings),
    }
    with world.meter.labeled(f"over:{size}:kind"):
        page = service.usage_over(kind=kind, page_size=size)
    figures["kind_one_page"] = {
        "rows": len(page.rows),
        "more": page.next_token is not None,
        **world.meter.tally(f"over:{size}:kind").per(1),
    }
    with world.meter.labeled(f"over:{size}:every_kind"):
        page = service.usage_over(page_size=size)
    figures["every_kind_one_page"] = {
        "rows": len(page.rows),
        "partitions": 2 * OVER_SHARDS,
        **world.meter.tally(f"over:{size}:every_kind").per(1),
    }
    if size > PAGE:
        rows, pages, token = 0, 0, None
        with world.meter.labeled(f"over:{size}:paged"):
            while True:
                page = service.usage_over(kind=kind, page_size=PAGE, next_token=token)
                rows, pages, token = rows + len(page.rows), pages + 1, page.next_token
                if token is None:
                    break
        figures["kind_in_pages"] = {
            "page_size": PAGE,
            "rows": rows,
            "pages": pages,
            **world.meter.tally(f"over:{size}:paged").per(1),
        }
    return figures


def _counter_write(world: BenchWorld, account: str, kind: str, writes: int = 10) -> dict[str, Any]:
    """A counter write of an item in the indexes (as the best-effort path's admissions write it):
    it changes no key or projected attribute of the indexes, so it should write neither."""
    with world.meter.labeled("over:counter_write"):
        for _ in range(writes):
            world.clients.dynamodb.update_item(
                TableName=world.table,
                Key=counter_key(account, kind=kind),
                UpdateExpression=f"ADD {BEST_EFFORT} :zero",
                ExpressionAttributeValues={":zero": {"N": "0"}},
            )
    return world.meter.tally("over:counter_write").per(writes)
