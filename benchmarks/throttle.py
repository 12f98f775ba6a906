"""DynamoDB's write capacity limits, scaled down, on DynamoDB Local (which has none).

Every item and every partition of a DynamoDB table takes at most 1,000 write units a second. Here
each is a token bucket of ``units_per_second``, charged before a write leaves the client: a write
unit per item written (items here are under 1 KB), two per item of a transaction. A bucket holds
``burst_seconds`` of capacity (half a second: what a measuring window can spend on top of the
sustained rate stays small) and may go into debt: a write is let through when every bucket it
charges holds its charge or is full, so a transaction charging one partition more than a bucket
holds still passes, at the long-run rate, as on AWS where no one transaction comes near a second
of a partition's capacity. A write that cannot pay is answered
``ProvisionedThroughputExceededException`` without being sent, as DynamoDB answers it.

A client attached with ``wait=True`` is instead held until its buckets can pay: the background
writer (the stream consumer) as an ideal retry would behave. At this scale one counting
transaction is a fifth of a second's capacity, so botocore's backoff (up to a second a retry,
as at any scale) would measure the backoff, not the capacity.

Where the items sit: an account's counter item is one item, so it can never be spread; DynamoDB's
split for heat moves a hot item onto a partition of its own, which is the steady state this
models (bucket ``item:<account>:COUNTER#<kind>``: each kind's counter item is an item of its
own). The account's resource items share a partition key but DynamoDB splits an item collection
by sort-key range when it runs hot; this models the split having spread each kind's resources
(contiguous in sort-key order, ``RESOURCE#<kind>#<range>#<id>``) over ``partitions`` partitions
by their range, a bucket each, so a second busy kind adds no load to the first's partitions.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.reference import RESOURCE as REFERENCE_RESOURCE
from hybrid_counter.keys import RESOURCE_PREFIX, parse_kind_resource_sk, range_of
from tests.faults import fail, target_of

WRITES = {"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1}


@dataclass
class Bucket:
    rate: float
    size: float
    tokens: float = 0.0
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = self.size

    def refill(self, now: float) -> None:
        self.tokens = min(self.size, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def can_pay(self, units: float) -> bool:
        return self.tokens >= min(units, self.size)


class CapacitySimulator:
    def __init__(self, units_per_second: float, partitions: int = 16, burst_seconds: float = 0.5) -> None:
        self.rate = units_per_second
        self.size = units_per_second * burst_seconds
        self.partitions = partitions
        self.buckets: dict[str, Bucket] = {}
        self.throttled = 0
        self.waits = 0
        self.admitted_units = 0.0
        self._lock = threading.Lock()
        self._clients: list[tuple[Any, Any]] = []

    def attach(self, *clients: Any, wait: bool = False) -> CapacitySimulator:
        handler = self._wait_before_send if wait else self._before_send
        for client in clients:
            client.meta.events.register_first("before-send.dynamodb.*", handler)
            self._clients.append((client, handler))
        return self

    def detach(self) -> None:
        for client, handler in self._clients:
            client.meta.events.unregister("before-send.dynamodb.*", handler)
        self._clients = []

    def bucket_of(self, key: dict[str, Any]) -> str:
        pk, sk = key["pk"]["S"], key["sk"]["S"]
        if sk.startswith(RESOURCE_PREFIX):
            kind, resource_id = parse_kind_resource_sk(sk)
            return f"partition:{pk}:{kind}:{int(range_of(resource_id), 16) % self.partitions}"
        if sk.startswith(REFERENCE_RESOURCE):  # its uuid starts with a hex digit, as a range does
            return f"partition:{pk}:{int(sk[len(REFERENCE_RESOURCE)], 16) % self.partitions}"
        return f"item:{pk}:{sk}"

    def _charges(self, operation: str, body: dict[str, Any]) -> dict[str, float]:
        charges: dict[str, float] = {}
        if operation in WRITES:
            key = body.get("Key") or {k: body["Item"][k] for k in ("pk", "sk")}
            charges[self.bucket_of(key)] = WRITES[operation]
        elif operation == "TransactWriteItems":
            for action in body["TransactItems"]:
                inner = next(iter(action.values()))
                bucket = self.bucket_of(inner.get("Key") or {k: inner["Item"][k] for k in ("pk", "sk")})
                charges[bucket] = charges.get(bucket, 0.0) + 2
        return charges

    def _pay(self, charges: dict[str, float]) -> bool:
        now = time.monotonic()
        with self._lock:
            buckets = {name: self.buckets.setdefault(name, Bucket(self.rate, self.size)) for name in charges}
            for bucket in buckets.values():
                bucket.refill(now)
            if all(buckets[name].can_pay(units) for name, units in charges.items()):
                for name, units in charges.items():
                    buckets[name].tokens -= units
                self.admitted_units += sum(charges.values())
                return True
            return False

    def _before_send(self, request: Any, **_: Any) -> Any:
        charges = self._charges(target_of(request), json.loads(request.body or b"{}"))
        if not charges or self._pay(charges):
            return None
        with self._lock:
            self.throttled += 1
        return fail(request, error="ProvisionedThroughputExceededException")

    def _wait_before_send(self, request: Any, **_: Any) -> None:
        charges = self._charges(target_of(request), json.loads(request.body or b"{}"))
        while charges and not self._pay(charges):
            with self._lock:
                self.waits += 1
            time.sleep(0.2 / self.rate)
