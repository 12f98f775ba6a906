"""What the OpenAPI description says of each route's answers: its success body, and every error
it can answer, by status, with the body of each error code (and API Gateway's own answers)."""

from __future__ import annotations

import json
import operator
from functools import reduce
from typing import Any, Literal

from aws_lambda_powertools.event_handler.openapi.models import Server, ServerVariable
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader
from pydantic import BaseModel, ConfigDict, Field, create_model

from hybrid_counter.api.access import NOT_YOUR_ACCOUNT, Forbidden, Unauthorized
from hybrid_counter.api.errors import domain_error_response
from hybrid_counter.api.query import REFUSED
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
from hybrid_counter.governance.records import ChangeRecord

API_DESCRIPTION = (
    'Per-account resource limits. Errors are {"error": {"code", "message", ...}}, one body per '
    "code; API Gateway's own refusals (no valid token, a missing scope, its throttling and timeouts, "
    'a body over 10 MB) are {"message": ...}. Every operation lists the query parameters it takes. ' + REFUSED
)


# Where to send requests: a deployment (the stack's ApiUrl output: API Gateway's default endpoint,
# $default stage) and the local runtime (make dev; PORT moves it).
SERVERS = [
    Server(
        url="https://{api_id}.execute-api.{region}.amazonaws.com",
        description="A deployment: the stack's ApiUrl output",
        variables={
            "api_id": ServerVariable(default="abc123defg", description="The HttpApi's id"),
            "region": ServerVariable(default="us-east-1", description="The stack's region"),
        },
    ),
    Server(url="http://127.0.0.1:3000", description="The local runtime (make dev)"),
]
# The reference's sections, in reading order: a tenant's first, then the operators'.
RESOURCES = "Resources"
HOLDS = "Holds"
USAGE = "Usage"
OVERRIDES = "Overrides"
PLANS = "Plans"
ORGANIZATIONS = "Organizations"
HISTORY = "History"
EVENTS = "Events"
DESCRIBED = "API description"
TAGS: list[dict[str, str]] = [
    {
        "name": RESOURCES,
        "description": "A tenant's resources, with its own token: each holds units of a kind (projects, seats, "
        "volume_gb, ...) under the account's limit for that kind, and its organization's. The routes "
        "without /kinds/{kind} act on the stack's default kind.",
    },
    {
        "name": HOLDS,
        "description": "Reserve units now, decide later: a create with ?hold_seconds=N holds the units until "
        "it is confirmed, or releases them at expires_at.",
    },
    {
        "name": USAGE,
        "description": "An account's limits and use, per kind: the tenant's own, and any account's for operators.",
    },
    {
        "name": OVERRIDES,
        "description": "Operators: an account's own limit for a kind, over its plan's (refused below current "
        "use unless forced).",
    },
    {
        "name": PLANS,
        "description": "Operators: plans name a limit per kind; every account is on one. Changing a plan's "
        "limits is one write, whatever the number of accounts on it.",
    },
    {
        "name": ORGANIZATIONS,
        "description": "Operators: organizations share limits among member accounts. Their administrators "
        "(a token with the organization claim) read their own organization and its usage.",
    },
    {
        "name": HISTORY,
        "description": "Every limit change, who made it and when, newest first: an account's, a plan's, an "
        "organization's.",
    },
    {
        "name": EVENTS,
        "description": "Operators: the events published recently (threshold reached and cleared, limit "
        "changed), every account's and organization's, newest first.",
    },
    {"name": DESCRIBED, "description": "This OpenAPI description (public)."},
]
# Redoc (and other renderers) group the sections; Swagger UI shows TAGS' order and ignores this.
TAG_GROUPS: list[dict[str, Any]] = [
    {"name": "Tenants", "tags": [RESOURCES, HOLDS, USAGE]},
    {"name": "Operators", "tags": [OVERRIDES, PLANS, ORGANIZATIONS, HISTORY, EVENTS]},
    {"name": "About", "tags": [DESCRIBED]},
]


class KindBelowUsage(BaseModel):
    kind: str
    limit: int
    used: int


class ErrorDetail(BaseModel):
    code: str
    message: str


def _error_body(code: str, doc: str, **fields: Any) -> type[BaseModel]:
    """``{"error": {"code": <code>, "message", ...fields}}``: one schema per code, so a client
    (and tests/e2e/test_documented_bodies.py) can tell which codes a status carries."""
    detail = create_model(
        f"{code}Detail", __base__=ErrorDetail, code=(str, Field(json_schema_extra={"enum": [code]})), **fields
    )
    body = create_model(f"{code}Body", __doc__=doc, error=(detail, ...))
    ERROR_BODIES[code] = body
    return body


ERROR_BODIES: dict[str, type[BaseModel]] = {}
ValidationErrorBody = _error_body("ValidationError", "The request is not valid; the message says why.")
UnauthorizedBody = _error_body("Unauthorized", "No caller identity reached the function.")
ForbiddenBody = _error_body("Forbidden", "This caller may not make this request.")
NotFoundBody = _error_body("NotFound", "No such resource, plan or organization.")
LimitExceededBody = _error_body(
    "LimitExceeded",
    "No room for the units under the kind's limit: the account's (scope account), or that of the "
    "organization the account belongs to (scope organization); limit and used are that level's.",
    limit=(int, ...),
    used=(int, ...),
    kind=(str | None, None),
    scope=(str, Field("account", json_schema_extra={"enum": ["account", "organization"]})),
)
IdempotencyConflictBody = _error_body("IdempotencyConflict", "The id exists, created with another body.")
HoldExpiredBody = _error_body(
    "HoldExpired", "The hold's deadline passed: its units are released, nothing counted."
)
LimitBelowUsageBody = _error_body(
    "LimitBelowUsage",
    "The new limit is below current use; nothing changed (send force to apply it anyway).",
    kinds=(list[KindBelowUsage], ...),
    limit=(int | None, None),  # these three when one kind is below
    used=(int | None, None),
    kind=(str | None, None),
)
AccountNotEmptyBody = _error_body(
    "AccountNotEmpty",
    "The account holds resources: it joins or leaves an organization only while empty; nothing changed.",
)
AccountInAnotherOrganizationBody = _error_body(
    "AccountInAnotherOrganization",
    "The account belongs to another organization (an account belongs to at most one); nothing changed.",
)
OrganizationNotEmptyBody = _error_body(
    "OrganizationNotEmpty",
    "The organization still has members (or units): remove them first; nothing changed.",
)
TooManyRequestsBody = _error_body(
    "TooManyRequests", "DynamoDB throttled the account's counter; nothing was done."
)
ServiceUnavailableBody = _error_body(
    "ServiceUnavailable", "Done or not: retry the request (a POST only if a duplicate is acceptable)."
)


class GatewayBody(BaseModel):
    """API Gateway's own answer, given before the function runs."""

    message: str


RETRY_AFTER: dict[str, OpenAPIResponseHeader] = {
    "Retry-After": {
        "description": "Seconds to wait before retrying (the function's answers; API Gateway's carry none)",
        "schema": {"type": "integer", "minimum": 0},
    }
}


def _answer(
    description: str, *samples: DomainError, gateway: str | None = None, retry_after: bool = False
) -> OpenAPIResponse:
    """An error answer: the body of each sample's code, with the sample as the example (the very
    body the one error map sends for it), and API Gateway's ``{"message": gateway}`` if it gives one."""
    bodies: list[type[BaseModel]] = [ERROR_BODIES[sample.code] for sample in samples]
    examples: dict[str, Any] = {
        sample.code: {"summary": sample.code, "value": json.loads(str(domain_error_response(sample).body))}
        for sample in samples
    }
    if gateway is not None:
        bodies.append(GatewayBody)
        examples["APIGateway"] = {"summary": "API Gateway's own answer", "value": {"message": gateway}}
    answer: OpenAPIResponse = {
        "description": description,
        "content": {"application/json": {"model": reduce(operator.or_, bodies), "examples": examples}},
    }
    if retry_after:
        answer["headers"] = RETRY_AFTER
    return answer


INVALID: dict[int, OpenAPIResponse] = {
    400: _answer(
        "ValidationError: malformed or over-16-KiB JSON, wrong types, unknown or reserved fields, ids not "
        "matching the id pattern, a reserved kind name (history), a plan that does not exist (assigning one), "
        "or a query parameter the operation does not list (or one given twice)",
        ValidationError("name: Field required"),
    )
}
COMMON: dict[int, OpenAPIResponse] = {
    **INVALID,
    401: _answer(
        'No valid token: API Gateway answers {"message": "Unauthorized"} before the function runs (missing, '
        "expired, wrong issuer or audience); Unauthorized: no caller identity reached the function",
        Unauthorized("no token claims in the request"),
        gateway="Unauthorized",
    ),
    403: _answer(
        "Forbidden: the token may not act on that account or organization (another account's, an account "
        "claim that is not an account id, an operator token on a tenant's resources, another "
        'organization\'s administrator); API Gateway\'s {"message": "Forbidden"}: the route\'s scope is '
        "missing, or an IAM signature is refused",
        Forbidden(NOT_YOUR_ACCOUNT),
        gateway="Forbidden",
    ),
    429: _answer(
        "TooManyRequests: DynamoDB throttled the account's counter item; nothing was done. Retry after "
        'Retry-After seconds. API Gateway\'s {"message": "Too Many Requests"}: its own throttling',
        Throttled("too many requests for this account; the request was not done, retry the request"),
        gateway="Too Many Requests",
        retry_after=True,
    ),
    503: _answer(
        "ServiceUnavailable: done or not, retry the request after Retry-After seconds (PUT, PATCH, DELETE "
        'and GET are safe to retry; a POST may have created). API Gateway\'s {"message": "Service '
        'Unavailable"}: the function timed out',
        StoreUnavailable("the data store is unavailable; the request was not done, retry the request"),
        gateway="Service Unavailable",
        retry_after=True,
    ),
    413: _answer(
        'API Gateway\'s {"message": "Request Entity Too Large"}: a request body over its 10 MB (a body '
        "over 16 KiB is a 400)",
        gateway="Request Entity Too Large",
    ),
}
DESCRIPTION: OpenAPIResponse = {
    "description": "This OpenAPI description",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
NOT_FOUND: dict[int, OpenAPIResponse] = {
    404: _answer("NotFound: no such resource or plan", NotFound("resource r-1 not found"))
}
NO_SUCH_ORG: dict[int, OpenAPIResponse] = {
    404: _answer("NotFound: no such organization", NotFound("organization acme not found"))
}
BELOW_USAGE: dict[int, OpenAPIResponse] = {
    409: _answer(
        "LimitBelowUsage: the new limit is below the kind's current use (error.limit, error.used, "
        "error.kinds); nothing changed. Send force: true in the body (?force=true on a DELETE) to "
        "apply it anyway",
        LimitBelowUsage([("seats", 3, 5)]),
    )
}
AT_LIMIT: dict[int, OpenAPIResponse] = {
    409: _answer(
        "LimitExceeded: no room for the units under the kind's limit (error.limit, error.used, error.kind); "
        "error.scope says whose: the account's, or its organization's (organization)",
        LimitExceeded(10, 10, "seats"),
    )
}
PUT_CONFLICT: dict[int, OpenAPIResponse] = {
    409: _answer(
        "LimitExceeded (no room under the account's or its organization's limit: error.scope), or "
        "IdempotencyConflict: the id exists with another body",
        LimitExceeded(10, 10, "seats"),
        IdempotencyConflict(
            "resource r-1 exists with a different body; a PUT of an existing id must repeat the request "
            "that created it"
        ),
    )
}
RESIZE_CONFLICT: dict[int, OpenAPIResponse] = {
    409: _answer(
        "LimitExceeded (a grow with no room under the account's or its organization's limit: "
        "error.scope), or HoldExpired: a grow of a hold whose deadline (expires_at) passed (its units "
        "are being released; a shrink is still made)",
        LimitExceeded(10, 10, "seats"),
        HoldExpired("the hold on r-1 expired at 2026-11-27T10:00:00.000Z"),
    )
}
HOLD_EXPIRED: dict[int, OpenAPIResponse] = {
    409: _answer(
        "HoldExpired: the hold's deadline (expires_at) passed before it was confirmed; its units are "
        "released (or being released) and nothing is counted for it",
        HoldExpired("the hold on r-1 expired; its units were released"),
    )
}
_NOT_EMPTY = MembershipConflict(
    "AccountNotEmpty", "account a-1 holds resources; an account changes organization only while empty"
)
MEMBERSHIP_CONFLICT: dict[int, OpenAPIResponse] = {
    409: _answer(
        "AccountNotEmpty: the account holds resources (it changes organization only while empty), or "
        "AccountInAnotherOrganization: it belongs to another organization; nothing changed",
        _NOT_EMPTY,
        MembershipConflict("AccountInAnotherOrganization", "account a-1 belongs to organization globex"),
    )
}
LEAVE_CONFLICT: dict[int, OpenAPIResponse] = {
    409: _answer(
        "AccountNotEmpty: the account holds resources (it leaves its organization only while empty); "
        "nothing changed",
        _NOT_EMPTY,
    )
}
ORG_NOT_EMPTY: dict[int, OpenAPIResponse] = {
    409: _answer(
        "OrganizationNotEmpty: the organization still has members; remove them first. Nothing changed",
        MembershipConflict("OrganizationNotEmpty", "organization acme has members; remove them first"),
    )
}


def responses(*groups: dict[int, OpenAPIResponse]) -> dict[int, OpenAPIResponse]:
    """Every answer of an operation behind the authorizer: its successes first, in the order the
    route gives them (what a renderer shows first is what a caller mostly gets), then the common
    refusals and its own, by status."""
    merged: dict[int, OpenAPIResponse] = {}
    for group in (COMMON, *groups):
        merged.update(group)
    return success_first(merged)


def success_first(answers: dict[int, OpenAPIResponse]) -> dict[int, OpenAPIResponse]:
    successes = [status for status in answers if 200 <= status < 300]
    others = sorted(status for status in answers if not 200 <= status < 300)
    return {status: answers[status] for status in [*successes, *others]}


def with_query_rule(schema: dict[str, Any]) -> dict[str, Any]:
    """Each operation's description says which query parameters it takes, and that no other is
    (read from the operation's own parameters, which api/query.py enforces)."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
            takes = f"Query parameters: {', '.join(names)}." if names else "No query parameters."
            operation["description"] = " ".join(filter(None, [operation.get("description"), takes, REFUSED]))
    return schema


# ---- success bodies ------------------------------------------------------------------------------
class WouldAdmitAtOrgBody(BaseModel):
    org_id: str
    would_admit: bool
    limit: int
    used: int
    remaining: int


class WouldAdmitBody(BaseModel):
    would_admit: bool
    kind: str
    units: int
    limit: int = Field(
        description="The account's limit of the kind (always the account's; its organization's is in `organization`)"
    )
    used: int = Field(description="The account's use of the kind")
    remaining: int = Field(description="The account's room")
    scope: Literal["account", "organization"] | None = Field(
        default=None,
        description=(
            "Which level would refuse it (only when it would not be admitted): with `organization`, "
            "the refusal's `limit` and `used` are those in `organization`, as the request's 409 carries them"
        ),
    )
    organization: WouldAdmitAtOrgBody | None = Field(
        default=None, description="A member account's: its organization's answer (both levels judge a create)"
    )


WOULD_ADMIT_EXAMPLE = {
    "would_admit": True,
    "kind": "seats",
    "units": 2,
    "limit": 12,
    "used": 6,
    "remaining": 6,
}
DRY_RUN: dict[int, OpenAPIResponse] = {
    200: {
        "description": "The resource (200: it exists, or was resized), or with ?dry_run=true whether the request "
        "would be admitted now, nothing written",
        "content": {
            "application/json": {
                "model": WouldAdmitBody,
                "examples": {"dryRun": {"summary": "?dry_run=true", "value": WOULD_ADMIT_EXAMPLE}},
            }
        },
    }
}


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
    held: bool = False  # a hold not confirmed yet (released at expires_at unless confirmed)
    expires_at: str | None = None  # a hold's deadline (absent once confirmed)


class ResourcePageOut(_Out):
    items: list[ResourceOut]
    next_token: str | None = None


class OrgRoomOut(_Out):
    """What the account's organization has left of the kind (members only)."""

    org_id: str
    limit: int
    limit_source: str  # override | plan
    used: int
    remaining: int


class KindUsageOut(_Out):
    limit: int
    limit_source: str  # override | plan
    best_effort: int
    eventual: int
    used: int
    remaining: int
    held: int = 0  # units of holds not confirmed yet (part of used)
    organization: OrgRoomOut | None = None


class UsageOut(_Out):
    """Per kind in ``kinds``: every kind the account's plan lists, an override names, or the
    account has used. The top-level figures are always the stack's default kind's (the routes
    without a kind act on it), also when ``kinds`` does not list it (the plan lacks it, and no
    override or use names it): then they are limit 0, used 0, remaining 0."""

    account_id: str
    plan_id: str
    org_id: str | None = None  # the organization it belongs to, if any
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


class OrgOut(_Out):
    org_id: str
    plan_id: str
    members: int
    created_at: str


class OrgLimitOut(_Out):
    org_id: str
    kind: str
    limit: int


class MemberOut(_Out):
    org_id: str
    account_id: str


class TopAccountOut(_Out):
    account_id: str
    used: int  # its counted use (eventual)


class OrgKindUsageOut(_Out):
    limit: int
    limit_source: str  # override | plan
    best_effort: int
    eventual: int
    used: int
    remaining: int
    top_accounts: list[TopAccountOut]


class OrgUsageOut(_Out):
    """Per kind: the organization's limit and use, and the members that use most."""

    org_id: str
    plan_id: str
    members: int
    kinds: dict[str, OrgKindUsageOut]


class ChangeOut(_Out):
    """One limit change: who, when, what from and to (override, override_removed, account_plan,
    plan_limits or org_plan)."""

    change_id: str
    at: str
    by: str
    what: str


class HistoryPageOut(_Out):
    items: list[ChangeOut]
    next_token: str | None = None


# ---- examples of the success bodies (tests/unit/test_openapi_document.py validates each against
# its operation's schema) ----------------------------------------------------------------------------
RESOURCE_EXAMPLE = {
    "account_id": "acme",
    "kind": "seats",
    "resource_id": "seat-42",
    "name": "alice",
    "units": 1,
    "created_at": "2026-11-26T09:30:00.000Z",
    "held": False,
}
HELD_EXAMPLE = {
    **RESOURCE_EXAMPLE,
    "resource_id": "seat-43",
    "name": "bob",
    "held": True,
    "expires_at": "2026-11-26T09:35:00.000Z",
}
PAGE_EXAMPLE = {"items": [RESOURCE_EXAMPLE, HELD_EXAMPLE], "next_token": None}
KIND_USAGE_EXAMPLE = {
    "limit": 12,
    "limit_source": "override",
    "best_effort": 6,
    "eventual": 6,
    "used": 6,
    "remaining": 6,
    "held": 0,
}
USAGE_EXAMPLE = {
    "account_id": "acme",
    "plan_id": "pro",
    "limit": 100,
    "best_effort": 0,
    "eventual": 0,
    "used": 0,
    "remaining": 100,
    "kinds": {
        "projects": {
            "limit": 3,
            "limit_source": "plan",
            "best_effort": 3,
            "eventual": 3,
            "used": 3,
            "remaining": 0,
            "held": 0,
        },
        "seats": KIND_USAGE_EXAMPLE,
    },
}
PLAN_EXAMPLE = {"plan_id": "pro", "limits": {"projects": 3, "seats": 12}}
ORG_EXAMPLE = {
    "org_id": "acme-group",
    "plan_id": "enterprise",
    "members": 3,
    "created_at": "2026-11-20T08:00:00.000Z",
}
ORG_USAGE_EXAMPLE = {
    "org_id": "acme-group",
    "plan_id": "enterprise",
    "members": 3,
    "kinds": {
        "seats": {
            "limit": 100,
            "limit_source": "plan",
            "best_effort": 40,
            "eventual": 40,
            "used": 40,
            "remaining": 60,
            "top_accounts": [{"account_id": "acme", "used": 30}, {"account_id": "acme-labs", "used": 10}],
        }
    },
}


def _history(**change: Any) -> dict[str, Any]:
    """A page of history holding one change, as the service records it (governance/records.py)."""
    record = ChangeRecord(
        change_id="9f1c2b7a4e3d4c21", at="2026-11-26T09:00:00.000Z", by="operator@example.com", **change
    )
    return {"items": [record.to_json()], "next_token": None}


HISTORY_EXAMPLE = _history(what="override", old=10, new=12, account_id="acme", kind="seats")
PLAN_HISTORY_EXAMPLE = _history(
    what="plan_limits", old={"projects": 3, "seats": 10}, new={"projects": 3, "seats": 12}, plan_id="pro"
)
ORG_HISTORY_EXAMPLE = _history(what="override", old=None, new=100, org_id="acme-group", kind="seats")
MEMBER_EXAMPLE = {"org_id": "acme-group", "account_id": "acme"}


def ok(
    model: Any, description: str, example: dict[str, Any], status: int = 200
) -> dict[int, OpenAPIResponse]:
    return {
        status: {
            "description": description,
            "content": {
                "application/json": {
                    "model": model,
                    "examples": {"success": {"summary": description, "value": example}},
                }
            },
        }
    }


NO_CONTENT: dict[int, OpenAPIResponse] = {204: {"description": "Done; no body", "content": {}}}
CREATED = ok(ResourceOut, "Created: the new resource", RESOURCE_EXAMPLE, 201)
RESOURCE_OR_DRY_RUN: dict[int, OpenAPIResponse] = {
    200: {
        "description": "The resource (it existed with this body, or was resized), or with ?dry_run=true "
        "whether the request would be admitted now (WouldAdmit), nothing written",
        "content": {
            "application/json": {
                "model": ResourceOut | WouldAdmitBody,
                "examples": {
                    "resource": {"summary": "The resource", "value": RESOURCE_EXAMPLE},
                    "dryRun": {"summary": "?dry_run=true", "value": WOULD_ADMIT_EXAMPLE},
                },
            }
        },
    }
}
