"""The API path's façade: limits, usage, reads, and the create and delete flows."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from functools import partial
from typing import Any

from hybrid_counter.aws import Clients
from hybrid_counter.counters import CounterStore
from hybrid_counter.effects import Effects
from hybrid_counter.errors import NotFound, ValidationError
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, is_valid_id, parse_resource_sk, resource_sk
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.resources import items
from hybrid_counter.resources.create import CreateFlow
from hybrid_counter.resources.delete import DeleteFlow
from hybrid_counter.resources.items import Resource
from hybrid_counter.resources.repairs import Repairs
from hybrid_counter.resources.table import ResourceTable, guarded
from hybrid_counter.settings import Settings

# A list request skips invisible (pending) items: as many as creates in flight, plus failed creates
# until their TTL. It stops skipping after this many once it has something to return, and after
# ten times as many in any case (then, and only then, a page may be empty with a next_token).
LIST_READ_BUDGET = 1000


@dataclass(frozen=True)
class Usage:
    account_id: str
    limit: int
    best_effort: int
    eventual: int

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "account_id": self.account_id,
            "limit": self.limit,
            "best_effort": max(self.best_effort, 0),
            "eventual": max(self.eventual, 0),
            "used": self.used,
            "remaining": max(0, self.limit - self.used),
        }


@dataclass(frozen=True)
class ResourcePage:
    items: list[Resource]
    next_token: str | None


class ResourceService:
    def __init__(
        self,
        settings: Settings,
        clients: Clients | None = None,
        obs: Observability | None = None,
        effects: Effects | None = None,
    ) -> None:
        self._settings = settings
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self._fx = effects or Effects()
        self.counters = CounterStore(
            settings.table_name, settings.default_limit, self._clients, self._obs, self._fx
        )
        self._table = ResourceTable(settings.table_name, self._clients, self._fx)
        grace = settings.pending_grace_seconds
        self._create = CreateFlow(self._table, self.counters, grace, self._fx, self._obs)
        self._delete = DeleteFlow(self._table, self.counters, grace, self._fx, self._obs)
        self.repairs = Repairs(self._table, self._delete, grace, self._fx)

    # ---- limits and usage -----------------------------------------------------------------------
    def set_limit(self, account_id: str, limit: int) -> dict[str, Any]:
        guarded(lambda: self.counters.set_limit(account_id, limit), "the limit change")
        return {"account_id": account_id, "limit": limit}

    def usage(self, account_id: str) -> Usage:
        state = guarded(lambda: self.counters.read(account_id), "the read")
        return Usage(
            account_id=account_id,
            limit=state.effective_limit(self._settings.default_limit),
            best_effort=state.best_effort,
            eventual=state.eventual,
        )

    # ---- writes -----------------------------------------------------------------------------
    def create(
        self, account_id: str, name: str, extra: dict[str, Any], resource_id: str | None = None
    ) -> tuple[Resource, bool]:
        return self._create.create(account_id, name, extra, resource_id)

    def delete(self, account_id: str, resource_id: str) -> None:
        self._delete.delete(account_id, resource_id)

    # ---- reads ------------------------------------------------------------------------------
    def get(self, account_id: str, resource_id: str) -> Resource:
        item = guarded(lambda: self._table.get(account_id, resource_id), "the read")
        if items.state_of(item) not in items.VISIBLE:
            raise NotFound(f"resource {resource_id} not found")
        assert item is not None
        return items.resource_from_item(item)

    def list(self, account_id: str, page_size: int = 50, next_token: str | None = None) -> ResourcePage:
        """A full page, or the last one: reads go on past invisible items until the page is full
        or the account ends (bounded by LIST_READ_BUDGET). The token is the last item read, so a
        resource after it is never skipped."""
        start = resource_sk(self._decode_token(next_token)) if next_token else None
        found: list[Resource] = []
        skipped = 0
        more = True
        while (
            more
            and len(found) < page_size
            and skipped < (LIST_READ_BUDGET if found else 10 * LIST_READ_BUDGET)
        ):
            query: dict[str, Any] = {
                "TableName": self._settings.table_name,
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
                "ExpressionAttributeValues": {
                    ":pk": {"S": account_pk(account_id)},
                    ":prefix": {"S": RESOURCE_PREFIX},
                },
                "ConsistentRead": True,
                "Limit": page_size - len(found) + 10,
            }
            if start:
                query["ExclusiveStartKey"] = {"pk": {"S": account_pk(account_id)}, "sk": {"S": start}}
            response = guarded(partial(self._clients.dynamodb.query, **query), "the list")
            for item in response.get("Items", []):
                start = str(item["sk"]["S"])
                if items.state_of(item) in items.VISIBLE:
                    found.append(items.resource_from_item(item))
                    if len(found) == page_size:
                        break
                else:
                    skipped += 1
            else:
                more = "LastEvaluatedKey" in response
        token = None
        if more and start is not None:
            token = base64.urlsafe_b64encode(parse_resource_sk(start).encode()).decode()
        return ResourcePage(found, token)

    @staticmethod
    def _decode_token(token: str) -> str:
        try:
            resource_id = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as error:
            raise ValidationError("next_token is not valid") from error
        if not is_valid_id(resource_id):
            raise ValidationError("next_token is not valid")
        return resource_id
