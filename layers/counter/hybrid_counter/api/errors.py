"""The one map from domain errors (and request validation) to HTTP responses."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from hybrid_counter.api.access import Forbidden, Unauthorized
from hybrid_counter.errors import (
    DomainError,
    HoldExpired,
    IdempotencyConflict,
    LimitBelowUsage,
    LimitExceeded,
    MembershipConflict,
    NotFound,
    StoreUnavailable,
    Throttled,
    ValidationError,
)

STATUS = {
    ValidationError: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    LimitExceeded: 409,
    IdempotencyConflict: 409,
    HoldExpired: 409,
    LimitBelowUsage: 409,
    MembershipConflict: 409,
    # 429 is what API Gateway itself answers when a route is throttled: callers already retry it.
    Throttled: 429,
    StoreUnavailable: 503,
}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response[str]:
    body = {"error": {"code": code, "message": message, **extra}}
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, allow_nan=False),
        headers=headers,
    )


def domain_error_response(error: DomainError) -> Response[str]:
    status = next((code for kind, code in STATUS.items() if isinstance(error, kind)), 500)
    extra: dict[str, Any] = {}
    if isinstance(error, LimitExceeded):
        extra = {"limit": error.limit, "used": error.used, "scope": error.scope}
        if error.kind is not None:
            extra["kind"] = error.kind
    if isinstance(error, LimitBelowUsage):
        if len(error.below) == 1:
            kind, limit, used = error.below[0]
            extra = {"kind": kind, "limit": limit, "used": used}
        extra["kinds"] = [{"kind": kind, "limit": limit, "used": used} for kind, limit, used in error.below]
    headers = None if error.retry_after is None else {"Retry-After": str(error.retry_after)}
    return error_response(status, error.code, str(error), headers, **extra)


def validation_message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for error in errors[:5]:
        location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        parts.append(f"{location or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"
