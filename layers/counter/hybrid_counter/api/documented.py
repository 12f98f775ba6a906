"""What the OpenAPI description says of each route's answers: its success body, and the
project's error body by status."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel, ConfigDict


class KindBelowUsage(BaseModel):
    kind: str
    limit: int
    used: int


class ErrorDetail(BaseModel):
    code: str
    message: str
    limit: int | None = None  # LimitExceeded, LimitBelowUsage
    used: int | None = None  # LimitExceeded, LimitBelowUsage
    kind: str | None = None  # LimitExceeded, LimitBelowUsage
    kinds: list[KindBelowUsage] | None = None  # LimitBelowUsage


class ErrorBody(BaseModel):
    error: ErrorDetail


class WouldAdmitBody(BaseModel):
    would_admit: bool
    kind: str
    units: int
    limit: int
    used: int
    remaining: int


def _error(description: str) -> OpenAPIResponse:
    return {"description": description, "content": {"application/json": {"model": ErrorBody}}}


COMMON: dict[int, OpenAPIResponse] = {
    400: _error("ValidationError: malformed JSON, wrong types, ids not matching the id pattern"),
    403: _error("Forbidden: the token may not act on that account"),
    429: _error(
        "TooManyRequests: DynamoDB throttled the account's counter item; nothing was done. Retry-After"
    ),
    503: _error(
        "ServiceUnavailable: done or not, retry the request (PUT, PATCH, DELETE and GET are safe to retry). Retry-After"
    ),
}
NOT_FOUND: dict[int, OpenAPIResponse] = {404: _error("NotFound: no such resource or plan")}
BELOW_USAGE: dict[int, OpenAPIResponse] = {
    409: _error(
        "LimitBelowUsage: the new limit is below the kind's current use (error.limit, error.used, "
        "error.kinds); nothing changed. Send force: true (?force=true) to apply it anyway"
    )
}
AT_LIMIT: dict[int, OpenAPIResponse] = {
    409: _error(
        "LimitExceeded: no room for the units under the kind's limit (error.limit, error.used, error.kind)"
    )
}
PUT_CONFLICT: dict[int, OpenAPIResponse] = {
    409: _error(
        "LimitExceeded (no room under the limit), or IdempotencyConflict: the id exists with another body"
    )
}


def responses(*groups: dict[int, OpenAPIResponse]) -> dict[int, OpenAPIResponse]:
    merged: dict[int, OpenAPIResponse] = {}
    for group in (COMMON, *groups):
        merged.update(group)
    return merged


DRY_RUN: dict[int, OpenAPIResponse] = {
    200: {
        "description": "The resource (200: it exists, or was resized), or with ?dry_run=true whether the request "
        "would be admitted now, nothing written",
        "content": {"application/json": {"model": WouldAdmitBody}},
    }
}


# ---- success bodies ------------------------------------------------------------------------------
class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")  # a body may gain fields; clients ignore what they do not know


class ResourceOut(_Out):
    """A resource: its kind and units, and whatever other fields its creator sent."""

    account_id: str
    kind: str
    resource_id: str
    name: str
    units: int
    created_at: str


class ResourcePageOut(_Out):
    items: list[ResourceOut]
    next_token: str | None = None


class KindUsageOut(_Out):
    limit: int
    limit_source: str  # override | plan
    best_effort: int
    eventual: int
    used: int
    remaining: int


class UsageOut(_Out):
    """Per kind in ``kinds``; the top-level figures are the stack's default kind's."""

    account_id: str
    plan_id: str
    limit: int
    best_effort: int
    eventual: int
    used: int
    remaining: int
    kinds: dict[str, KindUsageOut]


class LimitOut(_Out):
    account_id: str
    limit: int
    kind: str | None = None


class AccountPlanOut(_Out):
    account_id: str
    plan_id: str


class PlanOut(_Out):
    plan_id: str
    limits: dict[str, int]


class PlanPageOut(_Out):
    items: list[PlanOut]
    next_token: str | None = None


class ChangeOut(_Out):
    """One limit change: who, when, what from and to (override, account_plan or plan_limits)."""

    change_id: str
    at: str
    by: str
    what: str


class HistoryPageOut(_Out):
    items: list[ChangeOut]
    next_token: str | None = None


def ok(model: type[BaseModel], description: str, status: int = 200) -> dict[int, OpenAPIResponse]:
    return {status: {"description": description, "content": {"application/json": {"model": model}}}}


NO_CONTENT: dict[int, OpenAPIResponse] = {204: {"description": "Done; no body", "content": {}}}
CREATED = ok(ResourceOut, "Created: the new resource", 201)
RESOURCE_OR_DRY_RUN: dict[int, OpenAPIResponse] = {
    200: {
        "description": "The resource (it existed with this body, or was resized), or with ?dry_run=true "
        "whether the request would be admitted now (WouldAdmit), nothing written",
        "content": {"application/json": {"model": ResourceOut | WouldAdmitBody}},
    }
}
