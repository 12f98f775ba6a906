"""The API path: limits, usage, and the create/delete flows with the best-effort counter.

Create: read counters -> write the resource (uncounted) -> admit it with one conditional
best-effort increment (no transaction) -> on rejection roll the resource back.
Delete: check the resource is live -> uncount best-effort (token-guarded) -> soft-delete.
The eventual counter is never written here; the stream path owns it.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.counter_item import AdmissionOutcome, CounterItemStore
from hybrid_counter.errors import LimitExceeded, NotFound, StoreUnavailable, ValidationError
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, iso_utc, pending_shard, resource_key, resource_sk
from hybrid_counter.observability import Observability, default_observability
from hybrid_counter.settings import Settings


@dataclass(frozen=True)
class Resource:
    account_id: str
    resource_id: str
    name: str
    created_at: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "account_id": self.account_id,
            "resource_id": self.resource_id,
            "name": self.name,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class Usage:
    account_id: str
    limit: int
    best_effort: int
    eventual: int

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual)

    def to_json(self) -> dict[str, Any]:
        return {
            "account_id": self.account_id,
            "limit": self.limit,
            "best_effort": self.best_effort,
            "eventual": self.eventual,
            "used": self.used,
            "remaining": max(0, self.limit - self.used),
        }


@dataclass(frozen=True)
class ResourcePage:
    items: list[Resource]
    next_token: str | None


def _now() -> str:
    return iso_utc(time.time())


def _resource_from_item(item: dict[str, Any]) -> Resource:
    return Resource(
        account_id=item["account_id"]["S"],
        resource_id=item["resource_id"]["S"],
        name=item["name"]["S"],
        created_at=item["created_at"]["S"],
        extra=json.loads(item.get("extra_json", {"S": "{}"})["S"]),
    )


def _is_live(item: dict[str, Any] | None) -> bool:
    return item is not None and not item.get("deleted", {"BOOL": False})["BOOL"]


class ResourceService:
    def __init__(
        self, settings: Settings, clients: Clients | None = None, obs: Observability | None = None
    ) -> None:
        self._settings = settings
        self._clients = clients or Clients()
        self._obs = obs or default_observability()
        self.counters = CounterItemStore(
            settings.table_name, settings.default_limit, self._clients, self._obs
        )

    # ---- limits -------------------------------------------------------------------------
    def set_limit(self, account_id: str, limit: int) -> dict[str, Any]:
        self.counters.set_limit(account_id, limit)
        return {"account_id": account_id, "limit": limit}

    def usage(self, account_id: str) -> Usage:
        state = self.counters.read(account_id)
        return Usage(
            account_id=account_id,
            limit=state.effective_limit(self._settings.default_limit),
            best_effort=state.best_effort,
            eventual=state.eventual,
        )

    # ---- create ---------------------------------------------------------------------------
    def create(
        self, account_id: str, name: str, extra: dict[str, Any], resource_id: str | None = None
    ) -> tuple[Resource, bool]:
        """Create a resource; returns (resource, created). ``created`` is False for an idempotent
        PUT of an id that already exists, which is not counted again."""
        if resource_id is not None:
            existing = self._get_item(account_id, resource_id)
            if existing is not None:
                return self._existing(existing), False
        rid = resource_id or str(uuid.uuid4())
        state = self.counters.read(account_id)
        limit = state.effective_limit(self._settings.default_limit)
        if state.used >= limit:
            self._obs.count("LimitExceeded")
            raise LimitExceeded(limit, state.used)

        incarnation = uuid.uuid4().hex
        now = _now()
        item: dict[str, Any] = {
            "pk": {"S": account_pk(account_id)},
            "sk": {"S": resource_sk(rid)},
            "account_id": {"S": account_id},
            "resource_id": {"S": rid},
            "name": {"S": name},
            "extra_json": {"S": json.dumps(extra, separators=(",", ":"), sort_keys=True)},
            "created_at": {"S": now},
            "incarnation": {"S": incarnation},
            "counter_processed": {"BOOL": False},
            "deleted": {"BOOL": False},
            "pending_shard": {"S": pending_shard(account_id, rid)},
            "pending_since": {"S": now},
        }
        try:
            self._clients.dynamodb.put_item(
                TableName=self._settings.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise StoreUnavailable("could not store the resource; retry the request") from error
            stored: dict[str, Any] = dict(error.response.get("Item") or {})  # type: ignore[call-overload]
            if stored.get("incarnation", {}).get("S") != incarnation:
                # Someone else's resource under this id (only possible with a client-chosen id).
                return self._existing(stored), False
            # Our own write, retried by botocore after a lost response: carry on and admit it.

        admission = self.counters.admit(account_id, f"{rid}#{incarnation}", state)
        if admission.outcome == AdmissionOutcome.REJECTED:
            self._roll_back(account_id, rid, incarnation)
            rejected = admission.state
            self._obs.count("LimitExceeded")
            raise LimitExceeded(rejected.effective_limit(self._settings.default_limit), rejected.used)
        self._obs.count("ResourcesCreated")
        return _resource_from_item(item), True

    def _existing(self, item: dict[str, Any] | None) -> Resource:
        if item is None or not _is_live(item):
            raise ValidationError("this resource id is still being deleted; retry in a few seconds")
        return _resource_from_item(item)

    def _roll_back(self, account_id: str, resource_id: str, incarnation: str) -> None:
        """Remove a resource that was written but not admitted. It was never counted anywhere."""
        try:
            self._clients.dynamodb.delete_item(
                TableName=self._settings.table_name,
                Key=resource_key(account_id, resource_id),
                ConditionExpression="incarnation = :inc AND counter_processed = :false",
                ExpressionAttributeValues={":inc": {"S": incarnation}, ":false": {"BOOL": False}},
            )
        except ClientError as error:
            # Left in place it is found by the sweeper and counted: never lost, never double-counted.
            self._obs.count("RollbackFailed")
            self._obs.logger.warning(
                "could not roll back a rejected create",
                extra={"account_id": account_id, "resource_id": resource_id, "error_code": error_code(error)},
            )

    # ---- read -----------------------------------------------------------------------------
    def _get_item(self, account_id: str, resource_id: str) -> dict[str, Any] | None:
        response = self._clients.dynamodb.get_item(
            TableName=self._settings.table_name,
            Key=resource_key(account_id, resource_id),
            ConsistentRead=True,
        )
        return response.get("Item")

    def get(self, account_id: str, resource_id: str) -> Resource:
        item = self._get_item(account_id, resource_id)
        if item is None or not _is_live(item):
            raise NotFound(f"resource {resource_id} not found")
        return _resource_from_item(item)

    def list(self, account_id: str, page_size: int = 50, next_token: str | None = None) -> ResourcePage:
        query: dict[str, Any] = {
            "TableName": self._settings.table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "FilterExpression": "deleted = :false",
            "ExpressionAttributeValues": {
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": RESOURCE_PREFIX},
                ":false": {"BOOL": False},
            },
            "Limit": page_size,
        }
        if next_token:
            query["ExclusiveStartKey"] = {
                "pk": {"S": account_pk(account_id)},
                "sk": {"S": resource_sk(self._decode_token(next_token))},
            }
        response = self._clients.dynamodb.query(**query)
        items = [_resource_from_item(item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        token = None
        if last:
            last_id = str(last["sk"]["S"])[len(RESOURCE_PREFIX) :]
            token = base64.urlsafe_b64encode(last_id.encode()).decode()
        return ResourcePage(items, token)

    @staticmethod
    def _decode_token(token: str) -> str:
        try:
            return base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as error:
            raise ValidationError("next_token is not valid") from error

    # ---- delete ---------------------------------------------------------------------------
    def delete(self, account_id: str, resource_id: str) -> None:
        item = self._get_item(account_id, resource_id)
        if item is None or not _is_live(item):
            raise NotFound(f"resource {resource_id} not found")
        incarnation = item["incarnation"]["S"]
        self.counters.uncount(account_id, f"{resource_id}#{incarnation}")
        request_id = uuid.uuid4().hex
        now = _now()
        try:
            self._clients.dynamodb.update_item(
                TableName=self._settings.table_name,
                Key=resource_key(account_id, resource_id),
                UpdateExpression=(
                    "SET deleted = :true, deleted_at = :now, delete_request = :req, "
                    "pending_shard = :shard, pending_since = :now"
                ),
                ConditionExpression="incarnation = :inc AND deleted = :false",
                ExpressionAttributeValues={
                    ":true": {"BOOL": True},
                    ":false": {"BOOL": False},
                    ":now": {"S": now},
                    ":req": {"S": request_id},
                    ":inc": {"S": incarnation},
                    ":shard": {"S": pending_shard(account_id, resource_id)},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise StoreUnavailable("could not delete the resource; retry the request") from error
            old: dict[str, Any] = dict(error.response.get("Item") or {})  # type: ignore[call-overload]
            if old.get("delete_request", {}).get("S") != request_id:
                raise NotFound(f"resource {resource_id} not found") from None
        self._obs.count("ResourcesDeleted")
