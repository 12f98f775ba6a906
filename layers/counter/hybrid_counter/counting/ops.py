"""What the stream path does, derived from stream records (or found by the sweeper).

Each is idempotent and commutes with every other, so a record applied twice, concurrently, or
in any order leaves the counters right:

- ``CountOp``: count an admitted resource into ``eventual``, exactly once: one transaction adds
  to the counter and flips the resource's ``counter_processed``, conditional on it being unflipped
  and not yet claimed by a delete (a claimed resource is never counted; its delete's release
  already knows it was not).
- ``FinishDeleteOp``: remove a resource whose delete released it but did not get to remove it
  (conditional on that incarnation still being claimed); a member's claim released at its
  account first (``account_first``) is noted ``account_released`` instead (its organization's
  release comes next). No counter changes: the
  release did them.
- ``FinishResizeOp``: give a resource the units its resize moved its counters to, if that resize
  did not get to (conditional on the resize still holding it). No counter changes either.
- ``OrgReleasedOp``, ``OrgResizedOp``: what a member's delete or resize did at its organization:
  a delete's release there finishes an ``account_first`` claim (the item removed) and is noted
  on a claim of the order before (``org_released``), a resize's move is noted on the claim (or,
  a shrink's, the resize finished); no counter changes.
- ``HandedOffDeleteOp``: a member's delete handed off (``org_handoff`` on its claim: its account's
  release applied, its organization's was refused): release at its organization and remove the
  item, in one transaction conditional on that claim, so exactly once whoever else finishes it.
- ``HealOp``: ``best_effort := eventual`` if below (one conditional write; see healing.py).
- ``CensusOp``: ask for a census of one range (an idempotent request the sweeper takes up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybrid_counter.keys import (
    DEFAULT_KIND,
    ORG_PREFIX,
    counter_key,
    org_counter_key,
    parse_account_pk,
    parse_kind_resource_sk,
    range_of,
)
from hybrid_counter.resources import items


@dataclass(frozen=True)
class CountOp:
    """Count a resource into a counter's eventual, exactly once: its account's, or (``org``)
    its organization's (orgs/: each level counts it once, with a flag of its own on the item)."""

    account_id: str
    resource_id: str
    incarnation: str
    kind: str = DEFAULT_KIND
    units: int = 1  # what its admission admitted (a resize before the count changes it: eventual.py)
    org: str | None = None
    # (at an organization) the resource is still pending: its account's admission has not made
    # it live yet, or never will (its create died between the two): it goes into the
    # PendingIndex with its count, so the sweeper finds it (eventual.py)
    pending: bool = False
    shard: int = 0  # (at an organization) which of its counter items admitted it (counters/split.py)
    # a hold, counted perhaps without its admission (outcome unknown, made live anyway): the
    # count marks the counter ``holds_used`` (its account's, or its organization's shard) as the
    # admission would have, so a refusal for room still looks for it once expired (review 61:
    # 409 while it held the room)
    hold: bool = False

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.account_id, self.kind, self.resource_id)

    @property
    def counter(self) -> tuple[str, str]:
        if self.org is None:
            return (self.account_id, self.kind)
        return (f"{ORG_PREFIX}{self.org}", f"{self.kind}#{self.shard:x}")

    @property
    def counter_key(self) -> dict[str, dict[str, str]]:
        if self.org is None:
            return counter_key(self.account_id, kind=self.kind)
        return org_counter_key(self.org, kind=self.kind, shard=self.shard)

    @property
    def range_id(self) -> str:
        return range_of(self.resource_id)


@dataclass(frozen=True)
class FinishDeleteOp:
    account_id: str
    resource_id: str
    incarnation: str
    kind: str = DEFAULT_KIND

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.account_id, self.kind, self.resource_id)


@dataclass(frozen=True)
class FinishResizeOp:
    """Give a resized resource its new units, if the resize that moved its counters (named by
    ``last_resize``) could not: conditional on that resize still holding the item."""

    account_id: str
    resource_id: str
    incarnation: str
    request_id: str
    kind: str = DEFAULT_KIND

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.account_id, self.kind, self.resource_id)


@dataclass(frozen=True)
class OrgReleasedOp:
    """Its organization's release applied: a member's claimed resource is removed (its
    account's release came first: resources/delete.py); on an undone create it is noted
    (``org_released``), so the sweeper finishing the undo does not release it there again
    (resources/org_level.py). No counter changes: the release made them."""

    account_id: str
    resource_id: str
    incarnation: str
    kind: str = DEFAULT_KIND

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.account_id, self.kind, self.resource_id)


@dataclass(frozen=True)
class OrgResizedOp:
    """A member resize's move at its organization applied (resources/org_level.py): a shrink's
    (the second of its two moves) finishes the resize, as FinishResizeOp does a grow's; a grow's
    (the first) and the undoing of one are noted on the claim (``org_resized``,
    ``org_unresized``), so a settlement after the grace period knows what the organization holds.
    Conditional on that resize still holding the item; no counter changes."""

    account_id: str
    resource_id: str
    incarnation: str
    request_id: str
    kind: str = DEFAULT_KIND
    undo: bool = False

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.account_id, self.kind, self.resource_id)


@dataclass(frozen=True)
class HandedOffDeleteOp:
    """Finish a member's delete its request handed off (resources/delete.py): its account's
    release applied, its organization's was refused. That release, of ``units`` on shard
    ``shard`` (and of ``eventual`` there if ``counted``: a claimed resource is never counted, so
    the claim's flag is final), and the item's removal, in one transaction conditional on the
    claim of ``request_id``."""

    account_id: str
    resource_id: str
    incarnation: str
    request_id: str
    org: str
    kind: str = DEFAULT_KIND
    units: int = 1
    counted: bool = False
    shard: int = 0

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.account_id, self.kind, self.resource_id)


@dataclass(frozen=True)
class HealOp:
    account_id: str
    kind: str = DEFAULT_KIND
    org: str | None = None  # an organization's counter item (account_id unused)
    shard: int = 0

    @property
    def counter_key(self) -> dict[str, dict[str, str]]:
        if self.org is None:
            return counter_key(self.account_id, kind=self.kind)
        return org_counter_key(self.org, kind=self.kind, shard=self.shard)


@dataclass(frozen=True)
class CensusOp:
    """Ask for a census of one range (recount_requests.py): TTL removed a pending item, whose
    slot the best-effort counter may hold; the census releases it exactly when it does."""

    account_id: str
    range_id: str
    reason: str = ""
    kind: str = DEFAULT_KIND


Op = (
    CountOp
    | FinishDeleteOp
    | FinishResizeOp
    | HealOp
    | CensusOp
    | OrgReleasedOp
    | OrgResizedOp
    | HandedOffDeleteOp
)


def op_for_item(item: dict[str, Any]) -> Op | None:
    """What a resource (or its PendingIndex entry) still needs from the stream path: its count
    at its account's level (first), then at its organization's."""
    found = ops_for_item(item)
    return found[0] if found else None


def ops_for_item(item: dict[str, Any]) -> list[Op]:
    """Every count a live resource still needs, at each level."""
    if items.state_of(item) != items.LIVE or items.resizing(item):
        return []
    kind, resource_id = parse_kind_resource_sk(item["sk"]["S"])
    account_id, incarnation, units = (
        parse_account_pk(item["pk"]["S"]),
        items.incarnation_of(item),
        items.units_of(item),
    )
    found: list[Op] = []
    if not items.is_counted(item):
        found.append(CountOp(account_id, resource_id, incarnation, kind, units, hold="hold_until" in item))
    org = items.org_of(item)
    if org is not None and not items.org_counted(item):
        found.append(
            CountOp(
                account_id,
                resource_id,
                incarnation,
                kind,
                units,
                org,
                shard=items.org_shard(item),
                hold="hold_until" in item,
            )
        )
    return found
