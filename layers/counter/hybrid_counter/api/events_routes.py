"""The events published recently: `GET /events`, an operator route (`AuthorizationScopes:
[OperatorScope]` in template.yaml; api/access.py). The log is governance/event_log.py's: a sparse
index the take-off of each published event writes, read with Queries whose cost follows the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, ConfigDict

from hybrid_counter.api.documented import EVENTS, ok, responses
from hybrid_counter.api.json_response import json_response
from hybrid_counter.api.resource_routes import PageSize
from hybrid_counter.resources import ResourceService

Since = Annotated[
    str | None,
    Query(
        max_length=40,
        description="An ISO 8601 time (default: 24 hours ago): the events published at or after it. "
        "At most EventLogDays (default 7) back; older is a 400.",
    ),
]
# A page's place: one range key of the index (event_log.py), base64url.
EventsToken = Annotated[
    str | None,
    Query(max_length=512, pattern=r"^[A-Za-z0-9_=-]+$", description="next_token of the previous page"),
]


class EventOut(BaseModel):
    """One published event: its id (detail.event_id, what consumers dedupe on), its type, when
    it was published, and its detail as EventBridge carried it."""

    model_config = ConfigDict(extra="allow")
    event_id: str
    detail_type: str
    time: str
    detail: dict[str, Any]


class EventPageOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    items: list[EventOut]
    next_token: str | None = None


EXAMPLE: dict[str, Any] = {
    "items": [
        {
            "event_id": "acme/seats/3/100/reached",
            "detail_type": "Quota Threshold Reached",
            "time": "2026-11-26T01:02:03.512Z",
            "detail": {
                "event_id": "acme/seats/3/100/reached",
                "scope": "account",
                "account_id": "acme",
                "kind": "seats",
                "threshold": 100,
                "used": 10,
                "limit": 10,
                "limit_source": "override",
                "time": "2026-11-26T01:02:03.456Z",
            },
        },
        {
            "event_id": "9f1c2b7a4d3e5f60",
            "detail_type": "Quota Limit Changed",
            "time": "2026-11-26T00:58:10.020Z",
            "detail": {
                "event_id": "9f1c2b7a4d3e5f60",
                "change_id": "9f1c2b7a4d3e5f60",
                "at": "2026-11-26T00:58:10.001Z",
                "by": "operator@example.com",
                "what": "override",
                "old": 12,
                "new": 10,
                "force": False,
                "account_id": "acme",
                "kind": "seats",
                "plan_id": None,
            },
        },
    ],
    "next_token": None,
}


def events_routes(service: Callable[[], ResourceService]) -> Router:
    router = Router()  # type: ignore[no-untyped-call]
    listed = ok(EventPageOut, "The events published since the time asked, newest first", EXAMPLE)

    @router.get(
        "/events",
        summary="List the events published recently",
        description=(
            "Every Quota Threshold Reached, Quota Threshold Cleared and Quota Limit Changed event "
            "published on the bus, every account's and organization's, newest first, paged with "
            "next_token. Written by the same update that takes an event off the outbox once "
            "EventBridge accepted it, so the log is as current as publication and holds each event "
            "once. Kept EventLogDays days. Operators only."
        ),
        tags=[EVENTS],
        operation_id="listEvents",
        responses=responses(listed),
    )
    def list_events(
        since: Since = None, limit: PageSize = 50, next_token: EventsToken = None
    ) -> Response[str]:
        page = service().events(since=since, page_size=limit, next_token=next_token)
        return json_response(
            200, {"items": [row.to_json() for row in page.rows], "next_token": page.next_token}
        )

    return router
