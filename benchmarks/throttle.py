"""DynamoDB's write capacity limits, scaled down, on DynamoDB Local (which has none).

Every item and every partition of a DynamoDB table takes at most 1,000 write units a second. Here
each is a token bucket of ``units_per_second`` (refilled continuously, holding at most one
second's worth), charged before a write leaves the client: a write unit per item written (items
here are under 1 KB), two per item of a transaction. A write whose buckets cannot pay is answered
``ProvisionedThroughputExceededException`` without being sent, as DynamoDB answers it.

Where the items sit: an account's counter item is one item, so it can never be spread; DynamoDB's
split for heat moves a hot item onto a partition of its own, which is the steady state this
models (bucket ``counter:<account>``). The account's resource items share a partition key but
DynamoDB splits an item collection by sort-key range when it runs hot; this models the split
having spread them over ``partitions`` partitions by their range (the first hex digit of the sort
key after ``RESOURCE#``), a bucket each.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.faults import fail, target_of

WRITES = {"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1}


@dataclass
class Bucket:
    rate: float
    tokens: float = 0.0
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = self.rate

    def refill(self, now: float) -> None:
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now


class CapacitySimulator:
    def __init__(self, units_per_second: float, partitions: int = 16) -> None:
        self.rate = units_per_second
        self.partitions = partitions
        self.buckets: dict[str, Bucket] = {}
        self.throttled = 0
        self.admitted_units = 0.0
        self._lock = threading.Lock()
        self._clients: list[Any] = []

    def attach(self, *clients: Any) -> CapacitySimulator:
        for client in clients:
            client.meta.events.register_first("before-send.dynamodb.*", self._before_send)
            self._clients.append(client)
        return self

    def detach(self) -> None:
        for client in self._clients:
            client.meta.events.unregister("before-send.dynamodb.*", self._before_send)
        self._clients = []

    def bucket_of(self, key: dict[str, Any]) -> str:
        pk, sk = key["pk"]["S"], key["sk"]["S"]
        for prefix in ("RESOURCE#", "REF#RES#"):
            if sk.startswith(prefix):  # our range digit; the reference's uuid starts with a hex digit too
                return f"partition:{pk}:{int(sk[len(prefix)], 16) % self.partitions}"
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

    def _before_send(self, request: Any, **_: Any) -> Any:
        charges = self._charges(target_of(request), json.loads(request.body or b"{}"))
        if not charges:
            return None
        now = time.monotonic()
        with self._lock:
            buckets = {name: self.buckets.setdefault(name, Bucket(self.rate)) for name in charges}
            for bucket in buckets.values():
                bucket.refill(now)
            if all(buckets[name].tokens >= units for name, units in charges.items()):
                for name, units in charges.items():
                    buckets[name].tokens -= units
                self.admitted_units += sum(charges.values())
                return None
            self.throttled += 1
        return fail(request, error="ProvisionedThroughputExceededException")
