"""Who is at or over a threshold now: the (owner, kind) pairs whose counter item has a threshold
reached, newest crossing first, read from two sparse indexes and never by a Scan.

The stream path keeps which thresholds a counter item has reached (thresholds.py: ``alert_reached``)
and moves that state in one transaction with the crossing's events. The same transaction writes the
index attributes below on the counter item (``index_update``), or removes them when every threshold
is cleared, so an item under every threshold is in neither index and each index is exactly as
current as the events are. Only those writes touch them, and each index projects only them: the
counter writes of the best-effort and eventual paths change no key or projected attribute of the
indexes, so they write neither index (docs/design.md §13).

- ``OverKindIndex``: ``over_kind`` = "<kind>#<percent>" (the highest threshold reached), range
  ``over_since`` = "<the crossing's time>#<64-bit digest of the item>": one kind's items at one
  threshold, newest crossing first, in one total order (the digest tells apart two items that
  crossed in the same millisecond), so a page's place is one range key, whatever the partitions.
- ``OverIndex``: ``over_all`` = "<percent>#<n>", n a hash of the item in 0..OVER_SHARDS-1, range
  ``over_since``: every kind's, for a listing without a kind; the hash spreads the crossings of all
  kinds over OVER_SHARDS partitions (a GSI partition takes about 1000 writes a second).

"At or over t" is the items whose highest reached threshold is t or above: one Query per
configured threshold >= t (times OVER_SHARDS without a kind), each for the range keys older than
the page's place (``next_token``), merged newest first. ``t`` must be a configured threshold: the
state says which thresholds were reached, not the percentage of the limit used, so "at or over
90" with thresholds 80 and 100 is not knowable from it (ValidationError).

``used`` and ``limit`` in a row are those of the crossing (the transition that made ``threshold``
the highest reached), as its event carried them: reading them now would need each item's counter
and its limit (plan, overrides), and the row says since when the item is there.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hybrid_counter.errors import ValidationError
from hybrid_counter.governance.paging import decode_place, encode_place, newest_first
from hybrid_counter.keys import (
    ORG_PREFIX,
    parse_account_pk,
    parse_org_pk,
)

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients

OVER_KIND_INDEX = "OverKindIndex"
OVER_INDEX = "OverIndex"
OVER_KIND, OVER_ALL, OVER_SINCE, OVER_USED, OVER_LIMIT = (
    "over_kind",
    "over_all",
    "over_since",
    "over_used",
    "over_limit",
)
OVER_SHARDS = 4
MAX_PAGE = 100


def highest_reached(mask: int, percents: Sequence[int]) -> int | None:
    """The highest threshold whose bit is set in ``mask`` (None: none reached)."""
    reached = [percent for index, percent in enumerate(percents) if mask & (1 << index)]
    return max(reached) if reached else None


def over_shard(owner_pk: str, kind: str) -> int:
    return zlib.crc32(f"{owner_pk}/{kind}".encode()) % OVER_SHARDS


def item_digest(owner_pk: str, kind: str) -> str:
    """64 bits naming the counter item: after the crossing's time in the range key, it makes the
    range keys one total order (two items crossing in the same millisecond differ), so a page's
    place is one range key whatever the partitions."""
    return hashlib.sha256(f"{owner_pk}/{kind}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class IndexUpdate:
    """What the threshold transaction's UpdateExpression adds: clauses for its SET, names for a
    REMOVE, and their values."""

    sets: tuple[str, ...]
    removes: tuple[str, ...]
    values: dict[str, dict[str, str]]


def index_update(
    owner_pk: str, kind: str, percent: int | None, *, since: str, used: int, limit: int
) -> IndexUpdate:
    """The counter item's place in the indexes at ``percent``, or out of them (``percent`` None)."""
    if percent is None:
        return IndexUpdate((), (OVER_KIND, OVER_ALL, OVER_SINCE, OVER_USED, OVER_LIMIT), {})
    values = {
        f":{OVER_KIND}": {"S": f"{kind}#{percent}"},
        f":{OVER_ALL}": {"S": f"{percent}#{over_shard(owner_pk, kind)}"},
        f":{OVER_SINCE}": {"S": f"{since}#{item_digest(owner_pk, kind)}"},
        f":{OVER_USED}": {"N": str(used)},
        f":{OVER_LIMIT}": {"N": str(limit)},
    }
    return IndexUpdate(tuple(f"{name[1:]} = {name}" for name in values), (), values)


@dataclass(frozen=True)
class OverRow:
    owner: str
    scope: str  # "account" or "organization"
    kind: str
    threshold: int
    used: int
    limit: int
    since: str

    def to_json(self) -> dict[str, Any]:
        whose = {"account_id": self.owner} if self.scope == "account" else {"org_id": self.owner}
        return {
            **whose,
            "scope": self.scope,
            "kind": self.kind,
            "threshold": self.threshold,
            "used": self.used,
            "limit": self.limit,
            "since": self.since,
        }

    @classmethod
    def of(cls, item: dict[str, Any]) -> OverRow:
        # (the kind from the index's own key: a split organization's item is its ALERT#<kind>)
        pk = str(item["pk"]["S"])
        kind, percent = str(item[OVER_KIND]["S"]).rsplit("#", 1)
        if pk.startswith(ORG_PREFIX):
            owner, scope = parse_org_pk(pk), "organization"
        else:
            owner, scope = parse_account_pk(pk), "account"
        return cls(
            owner=owner,
            scope=scope,
            kind=kind,
            threshold=int(percent),
            used=int(item[OVER_USED]["N"]),
            limit=int(item[OVER_LIMIT]["N"]),
            since=str(item[OVER_SINCE]["S"]).split("#", 1)[0],
        )


@dataclass(frozen=True)
class OverPage:
    rows: list[OverRow]
    next_token: str | None


class UsageOver:
    """The near-limit listing: Queries of the two sparse indexes, merged newest first."""

    def __init__(self, table_name: str, percents: Sequence[int], clients: Clients) -> None:
        self._table = table_name
        self._percents = tuple(percents)
        self._clients = clients

    def page(
        self,
        *,
        threshold: int | None = None,
        kind: str | None = None,
        page_size: int = 50,
        next_token: str | None = None,
    ) -> OverPage:
        """The items at or over ``threshold`` (default: the lowest configured), of ``kind`` or of
        every kind, newest crossing first: one Query per partition (``partitions``), each reading
        at most ``page_size`` + 1 items (the one more says whether it holds more), so a page costs
        what its rows and its partitions cost."""
        if not 1 <= page_size <= MAX_PAGE:
            raise ValidationError(f"limit must be between 1 and {MAX_PAGE}")
        percent = self._percents[0] if threshold is None else threshold
        if percent not in self._percents:
            configured = ", ".join(str(p) for p in self._percents)
            raise ValidationError(
                f"threshold must be one of the configured thresholds ({configured}), not {percent}"
            )
        after = _decode(next_token) if next_token else None
        index = OVER_INDEX if kind is None else OVER_KIND_INDEX
        hash_name = OVER_ALL if kind is None else OVER_KIND
        # one more than a page from each: when nothing is left beyond the page, no token (no empty
        # page after it)
        read = [
            self._query(index, hash_name, partition, after, page_size + 1)
            for partition in self.partitions(percent, kind)
        ]
        merged = list(heapq.merge(*read, key=lambda item: str(item[OVER_SINCE]["S"]), reverse=True))
        taken = merged[:page_size]
        token = encode_place(str(taken[-1][OVER_SINCE]["S"])) if len(merged) > page_size else None
        return OverPage([OverRow.of(item) for item in taken], token)

    def partitions(self, percent: int, kind: str | None) -> list[str]:
        """The index partitions holding the items at or over ``percent``."""
        at_or_over = [p for p in self._percents if p >= percent]
        if kind is not None:
            return [f"{kind}#{p}" for p in at_or_over]
        return [f"{p}#{n}" for p in at_or_over for n in range(OVER_SHARDS)]

    def _query(
        self, index: str, hash_name: str, partition: str, after: str | None, wanted: int
    ) -> list[dict[str, Any]]:
        """Up to ``wanted`` items of one partition older than ``after`` (a range key), newest
        first. Reads on until it has them (a Query may stop early at 1 MB), so the merge never
        passes over an item a partition did not return."""
        condition = "#h = :h" if after is None else "#h = :h AND #r < :after"
        names = {"#h": hash_name} | ({} if after is None else {"#r": OVER_SINCE})
        values = {":h": {"S": partition}} | ({} if after is None else {":after": {"S": after}})
        query = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        return newest_first(self._clients, query, wanted)


# The range key a page ended on: the crossing's time (ISO 8601 UTC, milliseconds) and the digest.
_PLACE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z#[0-9a-f]{16}")


def _decode(token: str) -> str:
    """The range key a page ended on, strictly (a token not made here is refused, never handed to
    DynamoDB). A token of another listing is a place in the same order: it lists what is older."""
    return decode_place(token, _PLACE)
