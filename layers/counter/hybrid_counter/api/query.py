"""Query parameters: a route takes exactly those it declares; any other is refused.

Left alone, a parameter a route does not define is ignored, so a caller's misunderstanding
becomes a write: ``DELETE .../resources/{id}?dry_run=true`` (no delete has a dry run) deletes.
Every route therefore refuses (400 ValidationError, naming it) a parameter it does not declare,
before anything is read or written. What a route declares is Powertools' own record of its
handler's signature (``route.dependant``), from which the OpenAPI description is generated too,
so what is accepted is exactly what is documented, for every route present and future.

A parameter given twice is refused as well: API Gateway (payload 2.0) hands the function the
values joined with commas, so ``?force=false&force=true`` would arrive as one value neither
caller meant (the same rule as a name given twice in a JSON body, api/body.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import parse_qsl

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from hybrid_counter.errors import ValidationError

# A request signed in its query string (SigV4, AuthMode=iam) carries the signature there:
# X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Signature, ...; API Gateway checks them.
SIGNATURE_PREFIX = "X-Amz-"
REFUSED = (
    "A query parameter the operation does not list, or one given twice, is refused (400 ValidationError)."
)


def declared_query(route: Route) -> frozenset[str]:
    """The query parameters the route's handler takes (by their names in the URL)."""
    return frozenset(field.alias for field in route.dependant.query_params)


def query_names(event: Mapping[str, Any]) -> list[str]:
    """Each query parameter name of the request, once per occurrence. ``rawQueryString`` is
    the request as sent (repeats and all); the parsed map is added for events without it."""
    names = [name for name, _ in parse_qsl(str(event.get("rawQueryString") or ""), keep_blank_values=True)]
    parsed = event.get("queryStringParameters") or {}
    return names + [str(name) for name in parsed if name not in names]


def check_query(event: Mapping[str, Any], declared: Collection[str]) -> None:
    """ValidationError, naming the parameter, unless every one is declared and given once."""
    names = [name for name in query_names(event) if not name.startswith(SIGNATURE_PREFIX)]
    unknown = sorted({name for name in names if name not in declared})
    if unknown:
        takes = ", ".join(sorted(declared)) or "none"
        listed = ", ".join(_quoted(name) for name in unknown)
        plural = "s" if len(unknown) > 1 else ""
        raise ValidationError(f"unknown query parameter{plural} {listed} (this route takes: {takes})")
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise ValidationError(f"query parameter {_quoted(repeated[0])} is given more than once")


def refuse_undeclared_query(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response[Any]:
    check_query(app.current_event.raw_event, declared_query(app.context["_route"]))
    return next_middleware(app)


def _quoted(name: str) -> str:
    return json.dumps(name[:64])
