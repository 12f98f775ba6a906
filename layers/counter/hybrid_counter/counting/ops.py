"""What the stream path does, derived from stream records (or found by the sweeper).

Each is idempotent and commutes with every other, so a record applied twice, concurrently, or
in any order leaves the counters right:

- ``CountOp``: count an admitted resource into ``eventual``, exactly once: one transaction adds
  to the counter and flips the resource's ``counter_processed``, conditional on it being unflipped
  and not yet claimed by a delete (a claimed resource is never counted; its delete's release
  already knows it was not).
- ``FinishDeleteOp``: remove a resource whose delete released it but did not get to remove it
  (conditional on that incarnation still being claimed). No counter changes: the release did them.
- ``HealOp``: ``best_effort := eventual`` if below (one conditional write; see healing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from hybrid_counter.keys import range_of


@dataclass(frozen=True)
class CountOp:
    account_id: str
    resource_id: str
    incarnation: str

    @property
    def item(self) -> tuple[str, str]:
        return (self.account_id, self.resource_id)

    @property
    def range_id(self) -> str:
        return range_of(self.resource_id)


@dataclass(frozen=True)
class FinishDeleteOp:
    account_id: str
    resource_id: str
    incarnation: str

    @property
    def item(self) -> tuple[str, str]:
        return (self.account_id, self.resource_id)


@dataclass(frozen=True)
class HealOp:
    account_id: str


Op = CountOp | FinishDeleteOp | HealOp
