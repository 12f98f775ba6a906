"""Who is at or over a threshold now: the (owner, kind) pairs whose counter item has a threshold
reached, newest crossing first, read from two sparse indexes and never by a Scan.

The stream path keeps which thresholds a counter item has reached (thresholds.py: ``alert_reached``)
and moves that state in one transaction with the crossing's events. The same transaction writes the
index attributes below on the counter item (``index_update``), or removes them when every threshold
is cleared, so an item under every threshold is in neither index and each index is exactly as
current as the events are. Only those writes touch them, and each index projects only them: the
counter writes of the best-effort and eventual paths change no key or projected attribute of the
indexes, so they write neither index (docs/design.md, "Who is near a limit").

- ``OverKindIndex``: ``over_kind`` = "<kind>#<percent>" (the highest threshold reached), range
  ``over_since``: one kind's items at one threshold, newest crossing first.
- ``OverIndex``: ``over_all`` = "<percent>#<n>", n a hash of the item in 0..OVER_SHARDS-1, range
  ``over_since``: every kind's, for a listing without a kind; the hash spreads the crossings of all
  kinds over OVER_SHARDS partitions (a GSI partition takes about 1000 writes a second).

"At or over t" is the items whose highest reached threshold is t or above: one Query per
configured threshold >= t (times OVER_SHARDS without a kind), merged newest first. ``t`` must be
a configured threshold: the state says which thresholds were reached, not the percentage of the
limit used, so "at or over 90" with thresholds 80 and 100 is not knowable from it (ValidationError).

``used`` and ``limit`` in a row are those of the crossing (the transition that made ``threshold``
the highest reached), as its event carried them: reading them now would need each item's counter
and its limit (plan, overrides), and the row says since when the item is there.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hybrid_counter.errors import ValidationError
from hybrid_counter.keys import (
    ORG_PREFIX,
    parse_account_pk,
    parse_counter_sk,
    parse_org_counter_sk,
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
        f":{OVER_SINCE}": {"S": since},
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
        pk, sk = str(item["pk"]["S"]), str(item["sk"]["S"])
        if pk.startswith(ORG_PREFIX):
            owner, scope, kind = parse_org_pk(pk), "organization", parse_org_counter_sk(sk)[0]
        else:
            owner, scope, kind = parse_account_pk(pk), "account", parse_counter_sk(sk)
        return cls(
            owner=owner,
            scope=scope,
            kind=kind,
            threshold=int(str(item[OVER_KIND]["S"]).rsplit("#", 1)[1]),
            used=int(item[OVER_USED]["N"]),
            limit=int(item[OVER_LIMIT]["N"]),
            since=str(item[OVER_SINCE]["S"]),
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
        partitions = self.partitions(percent, kind)
        index = OVER_INDEX if kind is None else OVER_KIND_INDEX
        hash_name = OVER_ALL if kind is None else OVER_KIND
        start: dict[str, dict[str, Any] | None] = {partition: {} for partition in partitions}
        cursors = _decode(next_token, partitions, hash_name) if next_token else start
        read: dict[str, list[dict[str, Any]]] = {}
        more: dict[str, bool] = {}
        for partition, cursor in cursors.items():
            if cursor is None:  # read to its end on an earlier page
                continue
            # one more than a page: a partition read to its end is known to be, with no empty page after
            read[partition], more[partition] = self._query(index, hash_name, partition, cursor, page_size + 1)
        merged = heapq.merge(
            *(_tagged(partition, items) for partition, items in read.items()),
            key=lambda pair: str(pair[1][OVER_SINCE]["S"]),
            reverse=True,
        )
        taken: list[tuple[str, dict[str, Any]]] = [
            pair for _, pair in zip(range(page_size), merged, strict=False)
        ]
        next_cursors: dict[str, dict[str, Any] | None] = dict(cursors)
        for partition, items in read.items():
            used = [item for name, item in taken if name == partition]
            if used:
                next_cursors[partition] = _cursor(used[-1], hash_name)
            if len(used) == len(items) and not more[partition]:
                next_cursors[partition] = None
        rows = [OverRow.of(item) for _, item in taken]
        done = all(cursor is None for cursor in next_cursors.values())
        return OverPage(rows, None if done else _encode(next_cursors))

    def partitions(self, percent: int, kind: str | None) -> list[str]:
        """The index partitions holding the items at or over ``percent``."""
        at_or_over = [p for p in self._percents if p >= percent]
        if kind is not None:
            return [f"{kind}#{p}" for p in at_or_over]
        return [f"{p}#{n}" for p in at_or_over for n in range(OVER_SHARDS)]

    def _query(
        self, index: str, hash_name: str, partition: str, cursor: dict[str, Any], page_size: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``page_size`` items of one partition after ``cursor``, newest first, and whether
        it holds more. Reads on until it has them (a Query may stop early at 1 MB), so the merge
        never passes over an item a partition did not return."""
        found: list[dict[str, Any]] = []
        start = cursor or None
        while True:
            query: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": index,
                "KeyConditionExpression": "#h = :h",
                "ExpressionAttributeNames": {"#h": hash_name},
                "ExpressionAttributeValues": {":h": {"S": partition}},
                "ScanIndexForward": False,
                "Limit": page_size - len(found),
            }
            if start:
                query["ExclusiveStartKey"] = start
            response = self._clients.dynamodb.query(**query)
            found += response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start or len(found) >= page_size:
                return found, bool(start)


def _tagged(partition: str, items: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for item in items:
        yield partition, item


def _cursor(item: dict[str, Any], hash_name: str) -> dict[str, Any]:
    """The index key of ``item``: where its partition's next page starts."""
    return {name: item[name] for name in ("pk", "sk", hash_name, OVER_SINCE)}


def _encode(cursors: dict[str, dict[str, Any] | None]) -> str:
    """The cursors in the partitions' order, each [since, pk, sk] (its hash key is the partition),
    [] where none was read yet, null where read to its end: at most about 1,500 characters (eight
    partitions, the longest ids) before base64, well inside API Gateway's 10,240 bytes of a request
    line and headers."""
    plain = [
        None if cursor is None else [cursor[name]["S"] for name in (OVER_SINCE, "pk", "sk")] if cursor else []
        for cursor in cursors.values()
    ]
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode()


def _decode(token: str, partitions: list[str], hash_name: str) -> dict[str, dict[str, Any] | None]:
    """The cursors a page ended on, strictly: a token of another threshold or kind (another count
    of partitions), or one not made here, is refused (ValidationError), never handed to DynamoDB;
    one of the same count of partitions but another kind finds that kind's items not after its
    cursors (the cursors name items, not the query)."""
    try:
        plain = json.loads(base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode())
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise ValidationError("next_token is not valid") from error
    if not isinstance(plain, list) or len(plain) != len(partitions):
        raise ValidationError("next_token is not valid (or is another query's)")
    cursors: dict[str, dict[str, Any] | None] = {}
    for partition, cursor in zip(partitions, plain, strict=True):
        if cursor is None or cursor == []:  # read to its end; not read yet
            cursors[partition] = None if cursor is None else {}
            continue
        if not (
            isinstance(cursor, list) and len(cursor) == 3 and all(isinstance(v, str) and v for v in cursor)
        ):
            raise ValidationError("next_token is not valid")
        since, pk, sk = cursor
        cursors[partition] = {
            hash_name: {"S": partition},
            OVER_SINCE: {"S": since},
            "pk": {"S": pk},
            "sk": {"S": sk},
        }
    return cursors
