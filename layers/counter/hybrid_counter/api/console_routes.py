"""The operator console: a few static files (hybrid_counter/console/) on two public routes.

`GET /console` is the page, `GET /console/{asset}` its scripts, style sheet and `config.json`
(where to sign in: the issuer, the console's OAuth client, the operator scope). Serving them from
the API function keeps the console in the one stack and under `make dev` with no other service,
and on the API's own origin, so its API calls are same-origin (no CORS on the API).

The routes are public (template.yaml: `Authorizer: NONE`; api/access.py: `Access.PUBLIC`): they
hold no data, and the sign-in happens in the page. Every call the page makes is an API call with
the operator's bearer token, so the console can do nothing the API refuses that token.

Every answer carries a strict Content-Security-Policy: no inline script or style, everything
from this origin, `connect-src` this origin and the identity provider's (the issuer and
`CONSOLE_CONNECT_ORIGINS`, e.g. Cognito's token endpoint on its own domain), no framing.
The files are not part of the API's OpenAPI contract (`include_in_schema=False`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Annotated
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from hybrid_counter.api.errors import error_response

CONSOLE_ROUTES = frozenset({("GET", "/console"), ("GET", "/console/{asset}")})
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
ASSET_PATTERN = r"^[a-z][a-z0-9-]{0,40}\.(js|css|json)$"
DEFAULT_CLIENT_ID = "hybrid-counter-console"
DEFAULT_OPERATOR_SCOPE = "hybrid-counter/operator"

Asset = Annotated[str, Path(pattern=ASSET_PATTERN, description="A file of the console")]
# What an identity provider may append when it redirects back to the page (RFC 6749 4.1.2 and
# 4.1.2.1, RFC 9207 `iss`, OIDC session management's `session_state`): the page reads them.
Returned = Annotated[str | None, Query(max_length=4096)]


@dataclass(frozen=True)
class ConsoleSettings:
    issuer: str  # the JWT authorizer's issuer (its discovery document says where to sign in)
    client_id: str
    operator_scope: str
    connect_origins: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ConsoleSettings:
        env = os.environ if environ is None else environ
        return cls(
            issuer=env.get("CONSOLE_ISSUER", ""),
            client_id=env.get("CONSOLE_CLIENT_ID") or DEFAULT_CLIENT_ID,
            operator_scope=env.get("OPERATOR_SCOPE") or DEFAULT_OPERATOR_SCOPE,
            connect_origins=tuple((env.get("CONSOLE_CONNECT_ORIGINS") or "").split()),
        )

    def config(self) -> dict[str, str]:
        """What the page needs to sign in (`config.json`)."""
        return {"issuer": self.issuer, "client_id": self.client_id, "scope": self.operator_scope}

    def content_security_policy(self) -> str:
        connect = ["'self'", *dict.fromkeys(filter(None, [origin_of(self.issuer), *self.connect_origins]))]
        return "; ".join(
            [
                "default-src 'self'",
                "script-src 'self'",
                "style-src 'self'",
                "img-src 'self'",
                f"connect-src {' '.join(connect)}",
                "object-src 'none'",
                "base-uri 'none'",
                "form-action 'none'",
                "frame-ancestors 'none'",
            ]
        )


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


@cache
def console_files() -> dict[str, bytes]:
    """The console's files by name (read once per execution environment, on first use)."""
    folder = files("hybrid_counter") / "console"
    return {
        entry.name: entry.read_bytes()
        for entry in folder.iterdir()
        if entry.is_file() and any(entry.name.endswith(suffix) for suffix in CONTENT_TYPES)
    }


def console_routes() -> Router:
    router = Router()  # type: ignore[no-untyped-call]

    def served(status: int, content_type: str, body: str) -> Response[str]:
        settings = ConsoleSettings.from_env()
        return Response(
            status_code=status,
            content_type=content_type,
            body=body,
            headers={
                "Content-Security-Policy": settings.content_security_policy(),
                "X-Content-Type-Options": "nosniff",
                # The page's URL carries the authorization code on the way back from sign-in.
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-cache",
            },
        )

    @router.get("/console", include_in_schema=False)
    def page(
        *,
        code: Returned = None,
        state: Returned = None,
        error: Returned = None,
        error_description: Returned = None,
        iss: Returned = None,
        session_state: Returned = None,
    ) -> Response[str]:
        return served(200, CONTENT_TYPES[".html"], console_files()["index.html"].decode())

    @router.get("/console/<asset>", include_in_schema=False)
    def asset(asset: Asset) -> Response[str]:
        if asset == "config.json":
            return served(200, "application/json", json.dumps(ConsoleSettings.from_env().config()))
        found = console_files().get(asset)
        if found is None:
            return error_response(404, "NotFound", "no such console file")
        return served(200, CONTENT_TYPES["." + asset.rsplit(".", 1)[1]], found.decode())

    return router
