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
    ORG,
    ORG_KIND,
    best_effort_share,
    eventual_share,
    range_version,
)
from hybrid_counter.keys import (
    DEFAULT_KIND,
    account_pk,
    counter_shard,
    counter_sk,
    iso_utc,
    member_key,
    org_counter_key,
    org_key,
    org_usage_key,
    pending_shard,
    profile_key,
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
    limit: int | None,
    best_effort: int | None = None,
    eventual: int | None = None,
) -> dict[str, Any]:
    """A counter item whose totals and shares agree with ``ids`` (all live and counted); with
    ``limit`` None, no override (the plan's limit)."""
    per_range = Counter(range_of(rid) for rid in ids)
    item: dict[str, Any] = {
        "pk": {"S": account_pk(account_id)},
        "sk": {"S": counter_sk()},
        BEST_EFFORT: {"N": str(len(ids) if best_effort is None else best_effort)},
        EVENTUAL: {"N": str(len(ids) if eventual is None else eventual)},
        COUNTER_SHARD: {"S": counter_shard(account_id)},
    }
    if limit is not None:
        item[LIMIT] = {"N": str(limit)}
    item.update(shares(per_range))
    if best_effort is not None and best_effort != len(ids):
        first = next(iter(per_range), "0")
        item[best_effort_share(first)] = {"N": str(per_range[first] + best_effort - len(ids))}
    return item


def shares(per_range: Counter[str]) -> dict[str, Any]:
    """Each range's shares of both counters (all counted) and its version."""
    item: dict[str, Any] = {}
    for range_id, n in per_range.items():
        item[best_effort_share(range_id)] = {"N": str(n)}
        item[eventual_share(range_id)] = {"N": str(n)}
        item[range_version(range_id)] = {"N": "1"}
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


def organization_members(
    db: Any, table: str, org_id: str, prefix: str, held: list[int], *, usage_keys: int = 1
) -> dict[str, int]:
    """Member accounts of an existing organization (put_org) as the API and the stream path leave
    them, account n holding ``held[n]`` live resources of the default kind, counted at both
    levels: each account's profile (its organization, its kind registered), its member item, its
    resources, its counter item (in the organization, so on the OrgUsageIndex by its eventual, on
    its bucket of the organization's ``usage_keys``);
    then the organization's counter item holding them all and its profile's member count.
    The accounts and what each holds."""
    now = time.time()
    accounts = {f"{prefix}{n:05d}": count for n, count in enumerate(held)}
    entries: list[dict[str, Any]] = []
    org_ranges: Counter[str] = Counter()
    for account_id, count in accounts.items():
        ids = [f"r{n:07d}" for n in range(count)]
        org_ranges.update(range_of(rid) for rid in ids)
        for rid in ids:
            item = live_item(account_id, rid, now)
            item.update({ORG: {"S": org_id}, "org_counted": {"BOOL": True}})
            entries.append(item)
        counter = counter_item(account_id, ids, limit=None)
        counter.update(
            {ORG: {"S": org_id}, ORG_KIND: {"S": org_usage_key(org_id, DEFAULT_KIND, account_id, usage_keys)}}
        )
        entries += [
            counter,
            {
                **profile_key(account_id),
                "org_id": {"S": org_id},
                "org_since": {"S": iso_utc(now)},
                "kinds": {"SS": [DEFAULT_KIND]},
            },
            {**member_key(org_id, account_id), "since": {"S": iso_utc(now)}},
        ]
    total = sum(accounts.values())
    entries.append(
        {
            **org_counter_key(org_id),
            BEST_EFFORT: {"N": str(total)},
            EVENTUAL: {"N": str(total)},
            **shares(org_ranges),
        }
    )
    write(db, table, entries)
    db.update_item(
        TableName=table,
        Key=org_key(org_id),
        UpdateExpression="ADD members :n",
        ExpressionAttributeValues={":n": {"N": str(len(accounts))}},
    )
    return accounts
