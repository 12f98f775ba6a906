"""Every route of the API's resolver, and for each a request that it would answer without a 4xx,
built into a payload 2.0 event by the local gateway's own builder (localrun/gateway/payload.py),
as API Gateway builds it: ``rawQueryString`` as sent, repeated parameters joined by commas in
``queryStringParameters``. A route added to the API is enumerated here without being listed."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.api_gateway import Route

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import build_app
from localrun.gateway.payload import HttpRequest, build_event
from tests.unit.test_api_validation import RecordingService

POLICY = AccessPolicy(
    mode="jwt",
    account_claim="account_id",
    operator_scope="hc/operator",
    org_claim="org_id",
)
# A caller every route lets through: the path's account's tenant, with the operator scope.
CALLER = {"jwt": {"claims": {"account_id": "acct-demo", "sub": "tester"}, "scopes": ["hc/operator"]}}
PATH_VALUES = {
    "account_id": "acct-demo",
    "kind": "projects",
    "resource_id": "r-1",
    "plan_id": "pro",
    "org_id": "org-demo",
}
QUERY_VALUES = {
    "dry_run": "true",
    "force": "true",
    "limit": "5",
    "next_token": "abc",
    "kind": "projects",
    "top": "3",
    "threshold": "80",
    "hold_seconds": "60",
    "since": "2026-11-26T00:00:00Z",
}
BODIES = {  # a valid body of each body model, by its name
    "ResourceBody": {"name": "x"},
    "ResizeBody": {"units": 2},
    "LimitBody": {"limit": 5},
    "PlanBody": {"limits": {"projects": 3}},
    "AccountPlanBody": {"plan_id": "pro"},
    "OrgBody": {"plan_id": "pro"},
}


def app_and_service() -> tuple[APIGatewayHttpResolver, RecordingService]:
    service = RecordingService()
    return build_app(lambda: service, POLICY), service  # type: ignore[arg-type, return-value]


def every_route() -> list[Route]:
    """The routes the resolver matches requests against (Powertools keeps them in these two
    lists and has no public listing of them)."""
    app, _ = app_and_service()
    return [*app._static_routes, *app._dynamic_routes]


def route_id(route: Route) -> str:
    return f"{route.method} {route.openapi_path}"


def valid_body(route: Route) -> Any:
    models = [field.type_.__name__ for field in route.dependant.body_params]
    missing = [name for name in models if name not in BODIES]
    assert not missing, f"tests/unit/api_routes.py: add a valid body of {missing} to BODIES"
    return BODIES[models[0]] if models else None


def event_for(
    route: Route, query: str = "", path: dict[str, str] | None = None, body: Any = ...
) -> dict[str, Any]:
    """The event API Gateway would send for this route, with ``query`` as the raw query string."""
    values = {**PATH_VALUES, **(path or {})}
    names = re.findall(r"\{([^}]+)\}", route.openapi_path)
    target = re.sub(r"\{([^}]+)\}", lambda match: values[match.group(1)], route.openapi_path)
    payload = valid_body(route) if body is ... else body
    request = HttpRequest(
        method=route.method,
        target=f"{target}?{query}" if query else target,
        headers=[("content-type", "application/json")],
        body=b"" if payload is None else json.dumps(payload).encode(),
        source_ip="127.0.0.1",
    )
    event = build_event(
        request,
        route_key=route_id(route),
        path_parameters={name: values[name] for name in names},
        api_id="unit",
        stage="$default",
        request_id="unit",
    )
    event["requestContext"]["authorizer"] = CALLER
    return event


def answer(event: dict[str, Any]) -> tuple[int, Any, list[tuple[str, tuple[Any, ...]]]]:
    """(status, JSON body, what the routes asked of the service) for one event on a fresh app."""
    app, service = app_and_service()
    response = app.resolve(event, None)  # type: ignore[arg-type]
    text = response.get("body") or ""
    return response["statusCode"], (json.loads(text) if text else None), service.calls
