"""Plans and accounts' plan assignments in the table.

- A plan: ``PLANS`` / ``<plan id>``, with ``limits`` (a map of kind to limit) and ``updated_at``.
  Changing a plan's limits is one write, whatever the number of accounts on it: accounts read
  their plan through a cache (limits.py), never per account.
- The plan ``default`` always exists: stored, once an operator has written it; until then the
  stack's own (``DefaultKind``: ``DefaultResourceLimit``), so a stack without plans behaves as
  one with a single flat limit.
- An account's plan: ``ACCOUNT#<id>`` / ``PLAN`` with ``plan_id``; absent means ``default``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hybrid_counter.aws import Clients, RetryPolicy, retry_conflicts
from hybrid_counter.errors import ValidationError
from hybrid_counter.keys import PLANS_PK, is_valid_id, iso_utc, org_key, plan_key, profile_key

DEFAULT_PLAN = "default"
# A page position before every plan id (ids start with a letter or digit, after "!"): the page
# after a first page that held only the built-in default.
_BEFORE_EVERY_ID = "!"


@dataclass(frozen=True)
class Plan:
    plan_id: str
    limits: dict[str, int] = field(default_factory=dict)
    stored: bool = True  # False: the built-in default plan, never written
    version: int = 0  # bumped by every change of its limits (governance/changes.py)

    def limit_for(self, kind: str) -> int:
        """A kind the plan does not list is not included: 0."""
        return self.limits.get(kind, 0)

    def to_json(self) -> dict[str, Any]:
        return {"plan_id": self.plan_id, "limits": dict(sorted(self.limits.items()))}


class AccountProfile(NamedTuple):
    plan_id: str
    org_id: str | None = None  # the organization it belongs to
    org_epoch: int | None = None  # which creation of that organization's id it joined (orgs/store.py)
    plan_moves: int = 0  # how many times it was moved to a plan: orders its moves' marks (counters/state.py)


@dataclass(frozen=True)
class OrgProfile:
    plan_id: str
    plan_moves: int = 0  # how many times its plan was set: orders views of its plan (counters/split.py)
    shards: int = 1  # its counter's shard items per kind (counters/split.py)
    epoch_base: int = 0  # which creation of the id it is (orgs/counters.py org_epoch_base)


def profile_from(item: Mapping[str, Any]) -> AccountProfile:
    """An account's profile as its item (or its absence: {}) says."""
    plan_id = str(item["plan_id"]["S"]) if "plan_id" in item else DEFAULT_PLAN
    org = item.get("org_id", {}).get("S")
    epoch = item.get("org_epoch", {}).get("N")
    return AccountProfile(
        plan_id,
        None if org is None else str(org),
        None if epoch is None else int(epoch),
        int(item.get("plan_moves", {}).get("N", "0")),
    )


@dataclass(frozen=True)
class PlanPage:
    items: list[Plan]
    next_token: str | None


def _limits_of(item: dict[str, Any]) -> dict[str, int]:
    return {kind: int(value["N"]) for kind, value in item.get("limits", {}).get("M", {}).items()}


class PlanStore:
    def __init__(
        self, table_name: str, clients: Clients, *, default_kind: str, default_limit: int, clock: Any
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._builtin = Plan(DEFAULT_PLAN, {default_kind: default_limit}, stored=False)
        self._clock = clock
        self._retry = RetryPolicy()

    def get(self, plan_id: str) -> Plan | None:
        item = self._clients.dynamodb.get_item(
            TableName=self._table, Key=plan_key(plan_id), ConsistentRead=True
        ).get("Item")
        return self.plan_of_item(plan_id, None if item is None else dict(item))

    def plan_of_item(self, plan_id: str, item: dict[str, Any] | None) -> Plan | None:
        """The plan a stored item (or its absence) stands for."""
        if item is None:
            return self._builtin if plan_id == DEFAULT_PLAN else None
        return Plan(plan_id, _limits_of(item), version=int(item.get("version", {}).get("N", "0")))

    def put(self, plan_id: str, limits: dict[str, int]) -> Plan:
        """Replace the plan's limits (one write, whatever the number of accounts on it)."""
        plan = Plan(plan_id, dict(limits))
        item: dict[str, Any] = {
            **plan_key(plan_id),
            "limits": {"M": {kind: {"N": str(limit)} for kind, limit in limits.items()}},
            "updated_at": {"S": iso_utc(self._clock())},
        }
        retry_conflicts(
            lambda: self._clients.dynamodb.put_item(TableName=self._table, Item=item), self._retry
        )
        return plan

    def list(self, page_size: int = 50, next_token: str | None = None) -> PlanPage:
        """Plans in id order, at most ``page_size`` a page; the built-in default first, on the
        first page, while it was never written (once written it is in id order with the rest)."""
        start = None if next_token is None else self._decode(next_token)
        builtin = [self._builtin] if start is None and not self._default_stored() else []
        room = page_size - len(builtin)
        if room == 0:  # a page of one: the built-in default; the stored plans follow
            return PlanPage(builtin, self._encode(_BEFORE_EVERY_ID))
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": PLANS_PK}},
            "ConsistentRead": True,
            "Limit": room,
        }
        if start is not None and start != _BEFORE_EVERY_ID:
            query["ExclusiveStartKey"] = {**plan_key(start)}
        response = self._clients.dynamodb.query(**query)
        stored = [Plan(str(item["sk"]["S"]), _limits_of(dict(item))) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return PlanPage(builtin + stored, self._encode(str(last["sk"]["S"])) if last else None)

    def _default_stored(self) -> bool:
        default = self.get(DEFAULT_PLAN)
        return default is not None and default.stored

    def org_plan_of(self, org_id: str) -> str | None:
        """The organization's plan (None: no such organization, so no limits of its own)."""
        profile = self.org_profile_of(org_id)
        return None if profile is None else profile.plan_id

    def org_profile_of(self, org_id: str) -> OrgProfile | None:
        """What admissions at the organization need of its profile (None: no such organization)."""
        item = self._clients.dynamodb.get_item(
            TableName=self._table, Key=org_key(org_id), ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        return OrgProfile(
            str(item.get("plan_id", {}).get("S", DEFAULT_PLAN)),
            int(item.get("plan_moves", {}).get("N", "0")),
            int(item.get("shards", {}).get("N", "1")),
            int(item.get("epoch_base", {}).get("N", "0")),
        )

    def plan_of(self, account_id: str) -> str:
        return self.profile_of(account_id)[0]

    def profile_of(self, account_id: str) -> AccountProfile:
        """The account's plan and the organization it belongs to (one read of its profile)."""
        item = (
            self._clients.dynamodb.get_item(
                TableName=self._table, Key=profile_key(account_id), ConsistentRead=True
            ).get("Item")
            or {}
        )
        return profile_from(item)

    @staticmethod
    def _encode(position: str) -> str:
        return base64.urlsafe_b64encode(position.encode()).decode()

    @staticmethod
    def _decode(token: str) -> str:
        try:
            plan_id = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as error:
            raise ValidationError("next_token is not valid") from error
        if not (is_valid_id(plan_id) or plan_id == _BEFORE_EVERY_ID):
            raise ValidationError("next_token is not valid")
        return plan_id
