"""Counting operations derived from stream records (or found by the sweeper).

Each is applied by one conditional transaction on the resource item (plus the counter item),
so applying one twice, or concurrently, or in any order relative to the others, leaves the
eventual counter right: the conditions describe the resource state the operation needs, and
a cancelled condition means the work is already done (or was made unnecessary by a delete).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CountOp:
    """Count an admitted resource: eventual += 1 and counter_processed := true."""

    account_id: str
    resource_id: str
    incarnation: str

    @property
    def item(self) -> tuple[str, str]:
        return (self.account_id, self.resource_id)


@dataclass(frozen=True)
class UncountOp:
    """Hard-delete a soft-deleted resource; eventual -= 1 only if it had been counted."""

    account_id: str
    resource_id: str
    incarnation: str
    counted: bool

    @property
    def item(self) -> tuple[str, str]:
        return (self.account_id, self.resource_id)

    @property
    def token(self) -> str:
        return f"{self.resource_id}#{self.incarnation}"


Op = CountOp | UncountOp
