"""What a counter item holds, read back into Python.

Attributes (one item per account and kind, ``ACCOUNT#<id>`` / ``COUNTER#<kind>``); every count is
in *units* (a resource holds ``units`` of its kind, 1 unless the create said otherwise):

- ``best_effort``: units held by resources holding a slot, counted on the API path (an admission
  adds the resource's units, a release takes them out, a resize moves them by the difference).
- ``eventual``: units of the resources the stream path has counted (exactly once each) that no
  delete has released. The stream path adds; a delete's release takes a counted resource out,
  and a resize of a counted resource moves it by the difference, in the same write.
- ``limit``: the account's override for this kind (absent: its plan's limit, plans/).
- ``last_admission`` / ``last_release`` / ``last_resize``: the token of the latest admission (with
  ``last_admission_units``, its units) / release / resize; each change is a stream record that
  tells the stream path what to do (count that resource / finish that delete / finish that
  resize).
- per range ``r`` (one hex digit, see keys.py): ``b<r>`` and ``e<r>``, the shares of the two
  counters held by resources of that range, and ``v<r>``, a version bumped by every write that
  changes them. They always sum to the totals. The recount fences its census of a range with
  ``v<r>``, which is what lets it converge under traffic (counting/recount.py).
- ``heals``: bumped by every heal and every fix of the totals: the fence of the recount's fix of
  the totals (a heal moves a total by other than its shares' sum; two fixes must not both apply).
- ``counter_shard``: the key of the sparse CounterIndex (written once).
- ``org`` (an account's counter item): the organization the account belongs to (``-``: none),
  which every admission is conditional on (orgs/store.py); absent on an item no admission has
  written yet: the account's profile says.
- ``plan_of`` / ``plan_move`` / ``plan_version`` (an account's counter item): the plan the account
  was moved to by its move number ``plan_move`` (its profile's ``plan_moves``), and the version of
  that plan the move was judged by, written by the move itself
  (governance/changes.py), so that the move is judged by at once: an admission judged by a plan
  is conditional on the mark it read (plans/limits.py). Absent: no move marked it yet; the
  account's profile (cached) says.

Nothing here grows with traffic: the item stays a few hundred bytes (one write unit per write).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hybrid_counter.keys import all_ranges

BEST_EFFORT = "best_effort"
EVENTUAL = "eventual"
LIMIT = "limit"
LAST_ADMISSION = "last_admission"
LAST_RELEASE = "last_release"
LAST_ADMISSION_UNITS = "last_admission_units"
LAST_RESIZE = "last_resize"
COUNTER_SHARD = "counter_shard"
HEALS = "heals"
# (an account's) a hold was ever admitted on it: a refusal for room may reclaim expired holds
HOLDS_USED = "holds_used"
ORG = "org"  # on an account's counter item: the organization the account belongs to (orgs/)
NO_ORG = "-"  # ... in none (absent: not yet known on this item; the account's profile says)
# A split counter's shard item (split.py): its share of the limit, the limit the shares were laid
# out for and where it came from, the rebase that laid them out, and a rebase under way.
ALLOWANCE = "allowance"
BASIS = "basis"
BASIS_SOURCE = "basis_source"
EPOCH = "epoch"
REBASING = "rebasing"
ORG_KIND = "org_kind"  # on a member's counter item: "<org>#<kind>", the OrgUsageIndex's key
# Which creation of the organization an item belongs to (its ``epoch_base``, unique per creation
# of an id): on a member's counter item and profile, the one it joined; on the organization's
# single counter item, the one that opened it (resources/org_level.py). An organization deleted
# and created again under its id is then never taken for the one a create was judged by.
ORG_EPOCH = "org_epoch"
# (an account's) the plan its latest marked move put it on, that move's number, and the version
# of that plan the move was judged by
PLAN_OF = "plan_of"
PLAN_MOVE = "plan_move"
PLAN_VERSION = "plan_version"
# What an item carries once anything counted, released, resized or overrode on it (an item with
# none of them holds only a move's marks: never used)
_USED_ATTRIBUTES = (BEST_EFFORT, EVENTUAL, LIMIT, LAST_ADMISSION, LAST_RELEASE, LAST_RESIZE)


def best_effort_share(range_id: str) -> str:
    return f"b{range_id}"


def eventual_share(range_id: str) -> str:
    return f"e{range_id}"


def range_version(range_id: str) -> str:
    return f"v{range_id}"


def _org(item: Mapping[str, Any]) -> str | None:
    value = item.get(ORG, {}).get("S")
    return None if value in (None, NO_ORG) else str(value)


def _number(item: Mapping[str, Any], name: str) -> int:
    value = item.get(name)
    return int(value["N"]) if value else 0


def _optional(item: Mapping[str, Any], name: str) -> int | None:
    value = item.get(name)
    return int(value["N"]) if value else None


@dataclass(frozen=True)
class PlanMark:
    """A plan move's mark on an account's counter item (PLAN_OF, PLAN_MOVE, PLAN_VERSION)."""

    plan_id: str
    move: int
    version: int


@dataclass(frozen=True)
class RangeShare:
    best_effort: int = 0
    eventual: int = 0
    version: int = 0


@dataclass(frozen=True)
class CounterState:
    best_effort: int = 0
    eventual: int = 0
    limit: int | None = None
    last_admission: str | None = None
    last_release: str | None = None
    ranges: Mapping[str, RangeShare] = field(default_factory=dict)
    heals: int = 0
    last_resize: str | None = None
    exists: bool = False  # the item was there when read
    org: str | None = None  # (an account's) the organization it belongs to, for this kind
    org_known: bool = False  # the item says (``org`` NO_ORG: in none); else its profile says
    # a shard of a split counter (split.py); allowance None: not split
    allowance: int | None = None
    basis: int | None = None
    basis_source: str | None = None
    epoch: int = 0
    rebasing: int | None = None
    holds_used: bool = False  # a hold was admitted (or counted) on it once (resources/holds.py)
    org_epoch: int | None = None  # (ORG_EPOCH) None: not written on the item
    plan_of: str | None = None  # (PLAN_OF, PLAN_MOVE, PLAN_VERSION) None: no move marked the item
    plan_move: int | None = None
    plan_version: int = 0
    used_once: bool = False  # anything counted, released, resized or overrode on it, ever

    def effective_limit(self, default_limit: int) -> int:
        return default_limit if self.limit is None else self.limit

    @property
    def in_a_split(self) -> bool:
        """A split counter's shard item: laid out (an allowance) or being rebased (frozen)."""
        return self.allowance is not None or self.rebasing is not None

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual, 0)

    def admits(self, limit: int, units: int = 1) -> bool:
        """The admission's own condition, judged on this state: ``units`` more fit under both."""
        return self.best_effort + units <= limit and self.eventual + units <= limit

    def share(self, range_id: str) -> RangeShare:
        return self.ranges.get(range_id, RangeShare())

    def totals_mismatch(self) -> tuple[int, int]:
        """How far each total is from the sum of its shares (0, 0 unless corrupted)."""
        shares = [self.share(r) for r in all_ranges()]
        return (
            self.best_effort - sum(s.best_effort for s in shares),
            self.eventual - sum(s.eventual for s in shares),
        )

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> CounterState:
        if not item:
            return cls()
        limit = item.get(LIMIT)
        return cls(
            best_effort=_number(item, BEST_EFFORT),
            eventual=_number(item, EVENTUAL),
            limit=None if limit is None else int(limit["N"]),
            last_admission=item.get(LAST_ADMISSION, {}).get("S"),
            last_release=item.get(LAST_RELEASE, {}).get("S"),
            last_resize=item.get(LAST_RESIZE, {}).get("S"),
            exists=True,
            org=_org(item),
            org_known=ORG in item,
            ranges={
                r: RangeShare(
                    _number(item, best_effort_share(r)),
                    _number(item, eventual_share(r)),
                    _number(item, range_version(r)),
                )
                for r in all_ranges()
            },
            heals=_number(item, HEALS),
            holds_used=HOLDS_USED in item,
            allowance=_optional(item, ALLOWANCE),
            basis=_optional(item, BASIS),
            basis_source=item.get(BASIS_SOURCE, {}).get("S"),
            epoch=_number(item, EPOCH),
            rebasing=_optional(item, REBASING),
            org_epoch=_optional(item, ORG_EPOCH),
            plan_of=item.get(PLAN_OF, {}).get("S"),
            plan_move=_optional(item, PLAN_MOVE),
            plan_version=_number(item, PLAN_VERSION),
            used_once=any(name in item for name in _USED_ATTRIBUTES),
        )
