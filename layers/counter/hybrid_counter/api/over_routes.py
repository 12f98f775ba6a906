"""Who is near a limit: `GET /usage/over`, an operator route (`AuthorizationScopes: [OperatorScope]`
in template.yaml; api/access.py). The listing is governance/usage_over.py's: two sparse indexes
the stream path's threshold transactions keep, read with Queries whose cost follows the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, ConfigDict

from hybrid_counter.api.documented import ok, responses
from hybrid_counter.api.json_response import json_response
from hybrid_counter.api.models import DecimalDigits, KindId
from hybrid_counter.api.resource_routes import PageSize
from hybrid_counter.resources import ResourceService

Threshold = Annotated[
    int | None,
    DecimalDigits,
    Query(
        ge=1,
        le=1000,
        description="A configured threshold (UsageThresholds, percent of the limit); default the lowest. "
        "Lists the items whose highest reached threshold is this one or above; any other value is a 400.",
    ),
]
# A page's place: one range key of the index (usage_over.py), base64url.
OverToken = Annotated[
    str | None,
    Query(max_length=128, pattern=r"^[A-Za-z0-9_=-]+$", description="next_token of the previous page"),
]
OverKind = Annotated[KindId | None, Query(description="Only this kind (default: every kind)")]


class OverRowOut(BaseModel):
    """An (account or organization, kind) at or over a threshold: account_id, or org_id with
    scope organization. used and limit are those of the crossing, at since."""

    model_config = ConfigDict(extra="allow")
    account_id: str | None = None
    org_id: str | None = None
    scope: str
    kind: str
    threshold: int
    used: int
    limit: int
    since: str


class OverPageOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    items: list[OverRowOut]
    next_token: str | None = None


EXAMPLE: dict[str, Any] = {
    "items": [
        {
            "account_id": "acme",
            "scope": "account",
            "kind": "seats",
            "threshold": 100,
            "used": 10,
            "limit": 10,
            "since": "2026-11-26T01:02:03.456Z",
        },
        {
            "org_id": "acme-group",
            "scope": "organization",
            "kind": "seats",
            "threshold": 80,
            "used": 41,
            "limit": 50,
            "since": "2026-11-25T23:10:00.000Z",
        },
    ],
    "next_token": None,
}


def over_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]
    listed = ok(OverPageOut, "The items at or over the threshold, newest crossing first", EXAMPLE)

    @router.get(
        "/usage/over",
        summary="Who is at or over a threshold",
        description=(
            "The accounts and organizations whose use of a kind has reached a usage threshold "
            "(UsageThresholds) and not cleared it since, newest crossing first, paged with "
            "next_token. Read from sparse indexes the stream path keeps in the same transaction "
            "as the threshold events, so the list is as current as the events. Operators only."
        ),
        tags=["Usage"],
        operation_id="listUsageOver",
        responses=responses(listed),
    )
    def list_usage_over(
        threshold: Threshold = None, kind: OverKind = None, limit: PageSize = 50, next_token: OverToken = None
    ) -> Response[str]:
        page = service().usage_over(threshold=threshold, kind=kind, page_size=limit, next_token=next_token)
        return json_response(
            200, {"items": [row.to_json() for row in page.rows], "next_token": page.next_token}
        )

    return router
