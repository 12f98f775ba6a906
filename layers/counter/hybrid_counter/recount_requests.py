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
that settles the range removes it, conditional on ``n`` being the count it saw and on its
``token`` (drawn when the item is first written), so a request that arrived during the census is
never lost: not even one that came after another census removed the item, wrote it anew, and
counted ``n`` up to the same number (review 59: a stalled sweeper's settle removed such a one,
whose census was never taken).

An organization's range has the same kind of request, in its own partition: ``ORG#<id>`` /
``REPAIR#<kind>#<range>``, with ``accounts`` naming the members whose items led to it (taken in
the census even if they have left since). A repair asks for one where a member's resource may or
may not hold units at its organization and nothing can tell (a create dead between the levels,
a resize's move there unconfirmed, its records late past the grace period): the organization's
census (``counting/org_recount.py``) lowers each shard's share to what its members' resources
hold there. It costs a Query per member, on failure paths only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Seen:
    """A request as a census read it: how many asked, the item's token, the members named."""

    n: int = 0
    token: str | None = None  # (None: written before tokens, 2026-11-27)
    accounts: tuple[str, ...] = ()


class RecountRequests:
    def __init__(
        self,
        table_name: str,
        clients: Clients,
        clock: Callable[[], float],
        *,
        new_token: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._clock = clock
        self._new_token = new_token
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
            ":token": {"S": self._new_token()},
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
                    "pending_since = if_not_exists(pending_since, :now), "
                    f"#token = if_not_exists(#token, :token), reason = :reason ADD {added}"
                ),
                ExpressionAttributeNames={"#token": "token"},
                ExpressionAttributeValues=values,
            ),
            self._retry,
        )

    def count(self, account_id: str, range_id: str, *, kind: str = DEFAULT_KIND) -> int:
        """How many requests the range has had (0: none outstanding)."""
        return self.of(account_id, range_id, kind=kind).n

    def of(self, account_id: str, range_id: str, *, kind: str = DEFAULT_KIND) -> Seen:
        """The range's request as it stands (n 0: none outstanding)."""
        return self._read(request_key(account_id, range_id, kind))

    def of_org(self, org_id: str, range_id: str, *, kind: str) -> Seen:
        """The organization's range's request as it stands (n 0: none), the members it names."""
        return self._read(org_request_key(org_id, range_id, kind))

    def _read(self, key: dict[str, Any]) -> Seen:
        item = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        if not item or "n" not in item:
            return Seen()
        return Seen(
            int(item["n"]["N"]),
            item["token"]["S"] if "token" in item else None,
            tuple(sorted(item.get("accounts", {}).get("SS", []))),
        )

    def settle(self, account_id: str, range_id: str, seen: Seen, *, kind: str = DEFAULT_KIND) -> bool:
        """Remove the request once a census after it settled the range; False if another
        request came in meanwhile (it stays for the next pass)."""
        return self._settle(request_key(account_id, range_id, kind), seen)

    def settle_org(self, org_id: str, range_id: str, seen: Seen, *, kind: str) -> bool:
        return self._settle(org_request_key(org_id, range_id, kind), seen)

    def _settle(self, key: dict[str, Any], seen: Seen) -> bool:
        values: dict[str, Any] = {":seen": {"N": str(seen.n)}}
        if seen.token is None:
            same = "attribute_not_exists(#token)"
        else:
            same, values[":token"] = "#token = :token", {"S": seen.token}
        try:
            retry_conflicts(
                lambda: self._clients.dynamodb.delete_item(
                    TableName=self._table,
                    Key=key,
                    ConditionExpression=f"n = :seen AND {same}",
                    ExpressionAttributeNames={"#token": "token"},
                    ExpressionAttributeValues=values,
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        return True
