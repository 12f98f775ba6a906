"""Count what DynamoDB is asked to do: requests, read units and write units, by what they were for.

Every request of the attached clients asks for ``ReturnConsumedCapacity=INDEXES``; for single-item
writes and for reads DynamoDB Local answers with the units AWS charges by the item sizes (1 KB of
the larger image per write unit, 4 KB per read unit, index writes separately). What it does not
report right is counted by AWS's rules: a transaction is 2 write units per item (DynamoDB Local
reports a flat 2.0 per transaction, whatever its size; every item here is under 1 KB, which the
bench measures and reports), and a write refused by its condition still costs its item's units
(1 here), as does each action of a cancelled transaction. The index writes of a transaction
(a member's counter item moving on OrgUsageIndex as the stream path counts it) are kept apart,
as DynamoDB Local reports them (``transaction_index_write_units``, two units an index write, as
for the table's items): the totals stay the table's by rule plus single writes' indexes.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmarks.reference import COUNTER as REFERENCE_COUNTER_SK
from hybrid_counter.keys import COUNTER_PREFIX


def is_counter_key(sort_key: str | None) -> bool:
    """Both designs' counter items (ours one per kind; the reference keeps its own elsewhere)."""
    return sort_key is not None and (sort_key.startswith(COUNTER_PREFIX) or sort_key == REFERENCE_COUNTER_SK)


CAPACITY_OPS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "TransactGetItems",
    }
)
WRITE_OPS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass
class Tally:
    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0  # the table's
    index_write_units: float = 0.0
    transaction_index_write_units: float = 0.0  # as DynamoDB Local reports them; not in the totals
    refused_writes: int = 0  # condition failures and cancelled transactions (charged by AWS too)
    counter_item_writes: int = 0  # writes (or transaction actions) on a counter item
    counter_item_write_units: float = 0.0  # of the single-item writes among them

    def add(self, other: Tally) -> None:
        self.requests.update(other.requests)
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.index_write_units += other.index_write_units
        self.transaction_index_write_units += other.transaction_index_write_units
        self.refused_writes += other.refused_writes
        self.counter_item_writes += other.counter_item_writes
        self.counter_item_write_units += other.counter_item_write_units

    @property
    def total_write_units(self) -> float:
        return self.write_units + self.index_write_units

    def per(self, n: int) -> dict[str, Any]:
        return {
            "requests": round(sum(self.requests.values()) / n, 3),
            "requests_by_operation": {op: round(count / n, 3) for op, count in sorted(self.requests.items())},
            "read_units": round(self.read_units / n, 3),
            "write_units": round(self.write_units / n, 3),
            "index_write_units": round(self.index_write_units / n, 3),
            "total_write_units": round(self.total_write_units / n, 3),
            "transaction_index_write_units": round(self.transaction_index_write_units / n, 3),
            "counter_item_writes": round(self.counter_item_writes / n, 4),
        }

    def counter_units_per_write(self) -> float:
        single = self.counter_item_writes
        return round(self.counter_item_write_units / single, 3) if single else 0.0


class CapacityMeter:
    def __init__(self) -> None:
        self.tallies: dict[str, Tally] = {}
        # The label covers every thread (heal --all and the sweep work in pools); one labelled
        # section runs at a time. The request parameters are per thread, read back on the thread
        # that sent them.
        self._current: str | None = None
        self._label = threading.local()
        self._lock = threading.Lock()

    def attach(self, *clients: Any) -> None:
        for client in clients:
            client.meta.events.register("provide-client-params.dynamodb.*", self._ask_for_capacity)
            client.meta.events.register("after-call.dynamodb.*", self._count)

    @contextmanager
    def labeled(self, label: str) -> Iterator[Tally]:
        previous, self._current = self._current, label
        try:
            yield self.tally(label)
        finally:
            self._current = previous

    def tally(self, label: str) -> Tally:
        with self._lock:
            return self.tallies.setdefault(label, Tally())

    def _ask_for_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in CAPACITY_OPS:
            params["ReturnConsumedCapacity"] = "INDEXES"
        self._label.params = params  # read back by _count, on the same thread

    def _count(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        label = self._current
        if label is None:
            return
        params: dict[str, Any] = getattr(self._label, "params", {})
        name = model.name
        tally = self.tally(label)
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        refused = int(getattr(http_response, "status_code", 200)) != 200
        with self._lock:
            tally.requests[name] += 1
            if name == "TransactWriteItems" and not refused:
                tally.write_units += 2 * len(params.get("TransactItems", []))
                tally.transaction_index_write_units += sum(
                    float(units.get("CapacityUnits", 0.0))
                    for entry in entries
                    for units in entry.get("GlobalSecondaryIndexes", {}).values()
                )
            for entry in [] if name == "TransactWriteItems" else entries:
                table = entry.get("Table", {}).get("CapacityUnits", entry.get("CapacityUnits", 0.0))
                indexes = sum(
                    i.get("CapacityUnits", 0.0) for i in entry.get("GlobalSecondaryIndexes", {}).values()
                )
                if name in WRITE_OPS:
                    tally.write_units += float(table)
                    tally.index_write_units += float(indexes)
                else:
                    tally.read_units += float(table) + float(indexes)
            if refused and name in WRITE_OPS:
                actions = len(params.get("TransactItems", [])) or 1
                tally.refused_writes += 1
                tally.write_units += actions * (2 if name == "TransactWriteItems" else 1)
            if name in WRITE_OPS and not refused:
                on_counter = counter_writes(name, params)
                tally.counter_item_writes += on_counter
                if on_counter and name != "TransactWriteItems":
                    tally.counter_item_write_units += sum(
                        float(e.get("Table", {}).get("CapacityUnits", e.get("CapacityUnits", 0.0)))
                        for e in entries
                    )


def counter_writes(name: str, params: dict[str, Any]) -> int:
    """Writes (or transaction actions) on a counter item: ours, or the reference design's."""
    if name == "TransactWriteItems":
        bodies = [next(iter(action.values())) for action in params.get("TransactItems", [])]
    else:
        bodies = [params]
    return sum(
        1
        for body in bodies
        if is_counter_key((body.get("Key") or body.get("Item") or {}).get("sk", {}).get("S"))
    )
