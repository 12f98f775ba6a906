"""Durable requests to recount one range of an account, left where the sweeper finds them.

Some repairs remove an item whose slot the best-effort counter may or may not hold: a pending
item whose create died (was its admission applied? nothing on the item says), rolled back by the
audit, or removed by TTL. Removing it is always right; whether ``best_effort`` must drop with it
is settled exactly by a census of the item's range (``counting/recount.py``), which lowers the
range's best-effort share to the resources that can still hold a slot and never below. A census
can fail to settle under traffic, so the need for it is written down first, as an item in the
account's own partition (no shared hot key however many accounts need one):
``ACCOUNT#<id>`` / ``REPAIR#<kind>#<range>``, with ``n`` counting the requests. It carries the
PendingIndex keys, so the sweeper's ordinary pass over that sparse index finds it; the census
that settles the range removes it, conditional on ``n`` being the count it saw, so a request
that arrived during the census is never lost.

An organization's range has the same kind of request, in its own partition: ``ORG#<id>`` /
``REPAIR#<kind>#<range>``, with ``accounts`` naming the members whose items led to it (taken in
the census even if they have left since). A repair asks for one where a member's resource may or
may not hold units at its organization and nothing can tell (a create dead between the levels,
a resize's move there unconfirmed, its records late past the grace period): the organization's
census (``counting/org_recount.py``) lowers each shard's share to what its members' resources
hold there. It costs a Query per member, on failure paths only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, RetryPolicy, error_code, retry_conflicts
from hybrid_counter.keys import (
    DEFAULT_KIND,
    ORG_PREFIX,
    REPAIR_PREFIX,
    account_pk,
    iso_utc,
    org_pk,
    parse_repair_sk,
    pending_shard,
    repair_sk,
)


def request_key(account_id: str, range_id: str, kind: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": repair_sk(range_id, kind=kind)}}


def org_request_key(org_id: str, range_id: str, kind: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": repair_sk(range_id, kind=kind)}}


def is_org_request(item: dict[str, Any]) -> bool:
    """A request for an organization's range (else, if ``is_request``, an account's)."""
    return is_request(item) and str(item["pk"]["S"]).startswith(ORG_PREFIX)


def is_request(item: dict[str, Any]) -> bool:
    return str(item.get("sk", {}).get("S", "")).startswith(REPAIR_PREFIX)


def requested_range(item: dict[str, Any]) -> tuple[str, str]:
    """(kind, range) a request asks a census of."""
    return parse_repair_sk(str(item["sk"]["S"]))


class RecountRequests:
    def __init__(self, table_name: str, clients: Clients, clock: Callable[[], float]) -> None:
        self._table = table_name
        self._clients = clients
        self._clock = clock
        self._retry = RetryPolicy()

    def put(self, account_id: str, range_id: str, reason: str, *, kind: str = DEFAULT_KIND) -> None:
        """Ask for a census of the range (idempotent in effect: requests of one range coalesce)."""
        shard = pending_shard(account_id, repair_sk(range_id, kind=kind), kind=kind)
        self._put(request_key(account_id, range_id, kind), shard, reason)

    def put_org(self, org_id: str, range_id: str, reason: str, *, kind: str, account_id: str) -> None:
        """Ask for a census of an organization's range, naming the member that asks."""
        shard = pending_shard(org_pk(org_id), repair_sk(range_id, kind=kind), kind=kind)
        self._put(org_request_key(org_id, range_id, kind), shard, reason, account_id=account_id)

    def _put(self, key: dict[str, Any], shard: str, reason: str, *, account_id: str | None = None) -> None:
        values: dict[str, Any] = {
            ":shard": {"S": shard},
            ":now": {"S": iso_utc(self._clock())},
            ":reason": {"S": reason[:200]},
            ":one": {"N": "1"},
        }
        added = "n :one"
        if account_id is not None:
            values[":account"] = {"SS": [account_id]}
            added += ", accounts :account"
        retry_conflicts(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=(
                    "SET pending_shard = if_not_exists(pending_shard, :shard), "
                    f"pending_since = if_not_exists(pending_since, :now), reason = :reason ADD {added}"
                ),
                ExpressionAttributeValues=values,
            ),
            self._retry,
        )

    def count(self, account_id: str, range_id: str, *, kind: str = DEFAULT_KIND) -> int:
        """How many requests the range has had (0: none outstanding)."""
        return self._read(request_key(account_id, range_id, kind))[0]

    def of_org(self, org_id: str, range_id: str, *, kind: str) -> tuple[int, tuple[str, ...]]:
        """How many requests the organization's range has had (0: none outstanding), and the
        members they name."""
        return self._read(org_request_key(org_id, range_id, kind))

    def _read(self, key: dict[str, Any]) -> tuple[int, tuple[str, ...]]:
        item = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        if not item or "n" not in item:
            return 0, ()
        return int(item["n"]["N"]), tuple(sorted(item.get("accounts", {}).get("SS", [])))

    def settle(self, account_id: str, range_id: str, seen: int, *, kind: str = DEFAULT_KIND) -> bool:
        """Remove the request once a census after it settled the range; False if another
        request came in meanwhile (it stays for the next pass)."""
        return self._settle(request_key(account_id, range_id, kind), seen)

    def settle_org(self, org_id: str, range_id: str, seen: int, *, kind: str) -> bool:
        return self._settle(org_request_key(org_id, range_id, kind), seen)

    def _settle(self, key: dict[str, Any], seen: int) -> bool:
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.delete_item(
                    TableName=self._table,
                    Key=key,
                    ConditionExpression="n = :seen",
                    ExpressionAttributeValues={":seen": {"N": str(seen)}},
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        return True
