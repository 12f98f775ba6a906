"""API function: HTTP API events in, the domain's answer out."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import as_json_request, build_app
from hybrid_counter.runtime import Components


@cache
def components() -> Components:
    return Components.from_env()


@cache
def app() -> APIGatewayHttpResolver:
    return build_app(lambda: components().resources, AccessPolicy.from_env())


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger = components().obs.logger
    logger.set_correlation_id(event.get("requestContext", {}).get("requestId"))
    return app().resolve(as_json_request(event), context)
