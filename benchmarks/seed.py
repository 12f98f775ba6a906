"""Large accounts and many accounts, written in bulk (BatchWriteItem): the state the API and the
stream path would have left, without taking the time to get there request by request."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hybrid_counter.counters.state import (
    BEST_EFFORT,
    COUNTER_SHARD,
    EVENTUAL,
    LIMIT,
    best_effort_share,
    eventual_share,
    range_version,
)
from hybrid_counter.keys import (
    account_pk,
    counter_shard,
    counter_sk,
    iso_utc,
    pending_shard,
    range_of,
)
from hybrid_counter.resources import items


def live_item(account_id: str, resource_id: str, now: float, *, counted: bool = True) -> dict[str, Any]:
    item = items.pending_item(
        account_id, resource_id, f"name-{resource_id}", {}, f"{hash(resource_id) & 0xFFFF_FFFF:016x}", now=now
    )
    item["state"] = {"S": items.LIVE}
    item["counter_processed"] = {"BOOL": counted}
    del item["expires_at"]
    return item


def counter_item(
    account_id: str,
    ids: list[str],
    *,
    limit: int,
    best_effort: int | None = None,
    eventual: int | None = None,
) -> dict[str, Any]:
    """A counter item whose totals and shares agree with ``ids`` (all live and counted)."""
    per_range = Counter(range_of(rid) for rid in ids)
    item: dict[str, Any] = {
        "pk": {"S": account_pk(account_id)},
        "sk": {"S": counter_sk()},
        BEST_EFFORT: {"N": str(len(ids) if best_effort is None else best_effort)},
        EVENTUAL: {"N": str(len(ids) if eventual is None else eventual)},
        LIMIT: {"N": str(limit)},
        COUNTER_SHARD: {"S": counter_shard(account_id)},
    }
    for range_id, n in per_range.items():
        item[best_effort_share(range_id)] = {"N": str(n)}
        item[eventual_share(range_id)] = {"N": str(n)}
        item[range_version(range_id)] = {"N": "1"}
    if best_effort is not None and best_effort != len(ids):
        first = next(iter(per_range), "0")
        item[best_effort_share(first)] = {"N": str(per_range[first] + best_effort - len(ids))}
    return item


def write(db: Any, table: str, entries: list[dict[str, Any]], *, workers: int = 8) -> None:
    batches = [entries[start : start + 25] for start in range(0, len(entries), 25)]

    def send(batch: list[dict[str, Any]]) -> None:
        requests = [{"PutRequest": {"Item": item}} for item in batch]
        while requests:
            unprocessed = db.batch_write_item(RequestItems={table: requests}).get("UnprocessedItems", {})
            requests = unprocessed.get(table, [])

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(send, batches))


def account_with(db: Any, table: str, account_id: str, count: int, *, limit: int = 1_000_000) -> list[str]:
    """An account holding ``count`` live, counted resources."""
    return grow_account(db, table, account_id, 0, count, limit=limit)


def grow_account(
    db: Any, table: str, account_id: str, held: int, count: int, *, limit: int = 1_000_000
) -> list[str]:
    """An account of ``held`` seeded resources (and nothing in flight) grown to ``count``: the new
    resources written, then the counter item rewritten for all of them."""
    now = time.time()
    ids = [f"r{n:07d}" for n in range(count)]
    write(db, table, [live_item(account_id, rid, now) for rid in ids[held:]])
    write(db, table, [counter_item(account_id, ids, limit=limit)])
    return ids


def pending_index_entries(db: Any, table: str, account_id: str, count: int, *, age: float) -> None:
    """``count`` live resources left uncounted by failure paths, in the PendingIndex since ``age`` seconds."""
    since = time.time() - age
    entries = []
    for n in range(count):
        rid = f"u{n:07d}"
        item = live_item(account_id, rid, since, counted=False)
        item["pending_shard"] = {"S": pending_shard(account_id, rid)}
        item["pending_since"] = {"S": iso_utc(since)}
        entries.append(item)
    write(db, table, entries)
    write(db, table, [counter_item(account_id, [], limit=1_000_000)])


def accounts_with_drift(
    db: Any, table: str, prefix: str, count: int, *, drifted_every: int = 10
) -> list[str]:
    """``count`` accounts of one counted resource's worth, every ``drifted_every``-th with best_effort 0."""
    accounts = [f"{prefix}{n:07d}" for n in range(count)]
    write(
        db,
        table,
        [
            counter_item(account, ["r0"], limit=10, best_effort=0 if n % drifted_every == 0 else None)
            for n, account in enumerate(accounts)
        ],
    )
    return accounts
