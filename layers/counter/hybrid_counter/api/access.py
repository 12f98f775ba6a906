"""Who may act on which account: the one access check of the HTTP API.

API Gateway authenticates the caller before the function runs (JWT authorizer: signature,
issuer, audience, expiry and the route's scopes; or IAM: the SigV4 signature and the caller's
execute-api permissions) and hands the result over in `requestContext.authorizer`. What it
cannot know is that a token for account A must not touch account B: that is decided here,
from the event alone and before any validation or store access, so a request about another
account is refused the same way whether or not its resources exist and whatever its body.

JWT mode:
- a tenant token (the `AccountClaim` claim names its account) may act on that account only;
- a token with the operator scope may also set any account's limit and read any account's
  usage, but not read, create or delete another account's resources (tenant data stays the
  tenant's; operators repair accounts with `hybrid-counter-ops`, which uses IAM on the table);
- `PUT /accounts/{account_id}/limit` needs the operator scope (API Gateway checks it through
  the route's AuthorizationScopes; checked again here so a misconfigured route fails closed).

IAM mode: the caller is a trusted service acting for tenants; the account comes from the path
and which routes a principal may call is its IAM policy on `execute-api:Invoke`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from hybrid_counter.errors import DomainError

AuthMode = Literal["jwt", "iam"]


class Unauthorized(DomainError):
    """The event carries no caller identity of the configured kind (API Gateway let it through)."""

    code = "Unauthorized"


class Forbidden(DomainError):
    code = "Forbidden"


class Access(Enum):
    PUBLIC = "public"  # no identity needed
    OWN_ACCOUNT = "own account"  # the account in the path must be the caller's
    OWN_ACCOUNT_OR_OPERATOR = "own account or operator"
    OPERATOR = "operator"  # the operator scope, any account


# Every route of the API, by method and path as API Gateway names it. A route missing here is
# refused (403): adding a route means deciding who may call it.
ROUTE_ACCESS: Mapping[tuple[str, str], Access] = {
    ("PUT", "/accounts/{account_id}/limit"): Access.OPERATOR,
    ("GET", "/accounts/{account_id}/usage"): Access.OWN_ACCOUNT_OR_OPERATOR,
    ("POST", "/accounts/{account_id}/resources"): Access.OWN_ACCOUNT,
    ("GET", "/accounts/{account_id}/resources"): Access.OWN_ACCOUNT,
    ("PUT", "/accounts/{account_id}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("GET", "/accounts/{account_id}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("DELETE", "/accounts/{account_id}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("GET", "/openapi.json"): Access.PUBLIC,
}

SECURITY_SCHEME = "caller"
NOT_YOUR_ACCOUNT = "this caller may not act on that account"


@dataclass(frozen=True)
class AccessPolicy:
    mode: AuthMode = "jwt"
    account_claim: str = "account_id"
    operator_scope: str = "hybrid-counter/operator"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AccessPolicy:
        env = os.environ if environ is None else environ
        mode = env.get("AUTH_MODE", "jwt")
        if mode not in ("jwt", "iam"):
            raise RuntimeError(f"AUTH_MODE must be jwt or iam, not {mode!r}")
        return cls(
            mode="jwt" if mode == "jwt" else "iam",
            account_claim=env.get("ACCOUNT_CLAIM") or "account_id",
            operator_scope=env.get("OPERATOR_SCOPE") or "hybrid-counter/operator",
        )

    def check(self, event: Mapping[str, Any], method: str, route_path: str) -> None:
        """Raise Unauthorized or Forbidden unless the event's caller may make this request."""
        access = ROUTE_ACCESS.get((method.upper(), route_path))
        if access is None:
            raise Forbidden("this route has no access rule")
        if access is Access.PUBLIC:
            return
        authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
        if self.mode == "iam":
            if not authorizer.get("iam"):
                raise Unauthorized("no IAM caller identity in the request")
            return
        jwt = authorizer.get("jwt")
        if not isinstance(jwt, Mapping) or not isinstance(jwt.get("claims"), Mapping):
            raise Unauthorized("no token claims in the request")
        operator = self.operator_scope in token_scopes(jwt)
        if access is Access.OPERATOR:
            if not operator:
                raise Forbidden(f"this request needs the {self.operator_scope} scope")
            return
        if access is Access.OWN_ACCOUNT_OR_OPERATOR and operator:
            return
        account = (event.get("pathParameters") or {}).get("account_id")
        own = jwt["claims"].get(self.account_claim)
        if not isinstance(own, str) or not own or own != account:
            raise Forbidden(NOT_YOUR_ACCOUNT)

    def document(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The OpenAPI description with this policy's security scheme and per-route requirements."""
        if self.mode == "jwt":
            scheme: dict[str, Any] = {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": (
                    f"An OIDC access token from the deployment's issuer. Its {self.account_claim!r} claim "
                    f"names the caller's account; the {self.operator_scope!r} scope is needed to set limits "
                    "and lets the caller read any account's usage."
                ),
            }
        else:
            scheme = {
                "type": "apiKey",
                "name": "Authorization",
                "in": "header",
                "x-amazon-apigateway-authtype": "awsSigv4",
                "description": "AWS Signature Version 4 (service execute-api); the account is the path's.",
            }
        schema.setdefault("components", {})["securitySchemes"] = {SECURITY_SCHEME: scheme}
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                access = ROUTE_ACCESS.get((method.upper(), path))
                if access is Access.PUBLIC:
                    operation["security"] = []
                elif access is Access.OPERATOR and self.mode == "jwt":
                    operation["security"] = [{SECURITY_SCHEME: [self.operator_scope]}]
                else:
                    operation["security"] = [{SECURITY_SCHEME: []}]
        return schema


def token_scopes(jwt: Mapping[str, Any]) -> set[str]:
    """The token's scopes, from `scopes` (filled on routes with AuthorizationScopes) or the claims.

    API Gateway passes claims as strings: `scope` is space-separated, a list claim such as
    Okta's `scp` arrives as `[a b]`.
    """
    scopes = {str(scope) for scope in jwt.get("scopes") or []}
    claims = jwt.get("claims") or {}
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, list):
            scopes.update(str(item) for item in value)
        elif isinstance(value, str):
            scopes.update(value.strip().removeprefix("[").removesuffix("]").split())
    return scopes


def access_middleware(
    policy: AccessPolicy,
) -> Callable[[APIGatewayHttpResolver, NextMiddleware], Response[Any]]:
    """The check as the resolver's first middleware; its errors go through the one error map."""

    def check_access(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response[Any]:
        event = app.current_event.raw_event
        # API Gateway's route key names the template's route even where Powertools' stricter path
        # patterns find none (then the not-found handler answers, after this check).
        method, _, path = str(event.get("routeKey") or "").partition(" ")
        if not path:
            route = app.context["_route"]
            method, path = route.method, route.openapi_path
        policy.check(event, method, path)
        return next_middleware(app)

    return check_access


def documented(policy: AccessPolicy | None, schema_json: str) -> str:
    if policy is None:
        return schema_json
    return json.dumps(policy.document(json.loads(schema_json)))
