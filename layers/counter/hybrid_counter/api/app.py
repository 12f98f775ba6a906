"""Routes of the HTTP API (API Gateway HTTP API, payload format 2.0) on Powertools' resolver."""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import Tag
from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.api.access import AccessPolicy, access_middleware, documented
from hybrid_counter.api.body import reject_oversize, strict_json
from hybrid_counter.api.console_routes import console_routes
from hybrid_counter.api.documented import (
    API_DESCRIPTION,
    DESCRIBED,
    DESCRIPTION,
    INVALID,
    SERVERS,
    TAG_GROUPS,
    TAGS,
    success_first,
    with_query_rule,
)
from hybrid_counter.api.errors import domain_error_response, error_response, validation_message
from hybrid_counter.api.events_routes import events_routes
from hybrid_counter.api.limit_routes import limit_routes
from hybrid_counter.api.org_routes import org_routes
from hybrid_counter.api.over_routes import over_routes
from hybrid_counter.api.query import refuse_undeclared_query
from hybrid_counter.api.resource_routes import resource_routes
from hybrid_counter.aws import store_error
from hybrid_counter.errors import DomainError
from hybrid_counter.resources import ResourceService


def build_app(
    service: Callable[[], ResourceService], access: AccessPolicy | None = None
) -> APIGatewayHttpResolver:
    """``service`` is called per request, so the resolver can be built before configuration.

    ``access`` decides who may act on which account; ``None`` (tests of validation and the
    domain only) checks no caller. The handler always passes one.
    """
    # Validation is added as an ordinary middleware, after the access check: Powertools' own
    # switch (enable_validation=True) puts it before every user middleware, so a request about
    # another account with a bad body would get a 400 instead of the 403 every such request gets.
    # Bodies are measured before anything parses them, and parsed once, strictly (api/body.py).
    # A query parameter the route does not declare is refused before validation (api/query.py).
    app = APIGatewayHttpResolver(json_body_deserializer=strict_json)

    validate: Callable[..., Response[Any]] = OpenAPIRequestValidationMiddleware()  # type: ignore[no-untyped-call]
    checks = [reject_oversize, refuse_undeclared_query, validate]
    app.use(checks if access is None else [access_middleware(access), *checks])

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def _invalid(error: RequestValidationError) -> Response[str]:
        return error_response(400, "ValidationError", validation_message(list(error.errors())))

    @app.exception_handler([UnicodeDecodeError, binascii.Error])  # type: ignore[untyped-decorator]
    def _undecodable(_: Exception) -> Response[str]:
        return error_response(400, "ValidationError", "request body is not UTF-8 encoded JSON")

    @app.exception_handler([ClientError, BotoCoreError])  # type: ignore[untyped-decorator]
    def _store_unavailable(error: Exception) -> Response[str]:
        # DynamoDB refused a plain read or write after the SDK's retries (429 if it was throttling,
        # else 503), as from any API on DynamoDB; counter-internal failures never get here.
        return domain_error_response(store_error(error, "the request"))

    @app.exception_handler(DomainError)  # type: ignore[untyped-decorator]
    def _domain(error: DomainError) -> Response[str]:
        return domain_error_response(error)

    @app.not_found
    def _not_found(_: Exception) -> Response[str]:
        return error_response(404, "NotFound", "no such route")

    # The description lists paths in this order: a tenant's routes first (no route matches another's).
    app.include_router(resource_routes(service))
    app.include_router(limit_routes(service))
    app.include_router(org_routes(service))
    app.include_router(console_routes())
    app.include_router(over_routes(service))
    app.include_router(events_routes(service))

    @app.get(
        "/openapi.json",
        summary="Get this OpenAPI description",
        description="The description of this API, as this deployment serves it. Public: no token.",
        tags=[DESCRIBED],
        operation_id="getOpenApiDescription",
        responses=success_first({**INVALID, 200: DESCRIPTION}),
    )
    def openapi() -> Response[str]:
        schema = app.get_openapi_json_schema(
            title="hybrid-counter",
            version="1.0.0",
            description=API_DESCRIPTION,
            tags=[Tag(**tag) for tag in TAGS],
            servers=SERVERS,
            openapi_extensions={"x-tagGroups": TAG_GROUPS},
        )
        return Response(
            status_code=200,
            content_type=content_types.APPLICATION_JSON,
            body=documented(access, json.dumps(with_query_rule(json.loads(schema)))),
        )

    return app


def as_json_request(event: dict[str, Any]) -> dict[str, Any]:
    """The API only speaks JSON: a body sent without a JSON content type (curl -d sends a form
    type) is read as JSON rather than as form fields."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    if event.get("body") and "json" not in headers.get("content-type", ""):
        headers["content-type"] = "application/json"
        return {**event, "headers": headers}
    return event
