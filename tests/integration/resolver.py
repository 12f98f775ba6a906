"""One request to the API function's resolver in this process, as API Gateway would send it: the
handler's own routes, validation, access check and error map, without a gateway or a runtime."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from localrun.gateway.payload import HttpRequest, build_event


def resolve(
    app: APIGatewayHttpResolver,
    method: str,
    target: str,
    body: Any = None,
    *,
    route_key: str = "",
    authorizer: dict[str, Any] | None = None,
) -> tuple[int, Any]:
    """(status, JSON body or None) of ``method target`` (``target`` with its query string)."""
    request = HttpRequest(
        method=method,
        target=target,
        headers=[("content-type", "application/json")],
        body=b"" if body is None else json.dumps(body).encode(),
        source_ip="127.0.0.1",
    )
    event = build_event(
        request, route_key=route_key, path_parameters={}, api_id="it", stage="$default", request_id="it"
    )
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    response = app.resolve(event, None)  # type: ignore[arg-type]
    text = response.get("body") or ""
    return response["statusCode"], (json.loads(text) if text else None)
