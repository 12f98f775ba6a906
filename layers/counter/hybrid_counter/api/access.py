"""Who may act on which account: the one access check of the HTTP API.

API Gateway authenticates the caller before the function runs (JWT authorizer: signature,
issuer, audience, expiry and the route's scopes; or IAM: the SigV4 signature and the caller's
execute-api permissions) and hands the result over in `requestContext.authorizer`. What it
cannot know is that a token for account A must not touch account B: that is decided here,
from the event alone and before any validation or store access, so a request about another
account is refused the same way whether or not its resources exist and whatever its body.

JWT mode:
- Operator powers are API Gateway's to grant: every operator route has `AuthorizationScopes:
  [OperatorScope]` in template.yaml, so API Gateway lets through only tokens that hold that scope
  exactly, and fills `jwt.scopes` with the token's scopes. The function grants an operator route
  only when `jwt.scopes` holds the scope, exactly, and grants operator powers nowhere but on the
  operator routes and the three organization reads below. On the operator routes it never reads
  `scope`/`scp` out of the claims: API Gateway hands list claims over stringified (`[a b]`), so a
  crafted string claim and a list look alike, and API Gateway has already checked the scope there.
- A tenant token (the `AccountClaim` claim names its account) may act on that account only. The
  claim must be a string that is an account id (the id pattern, compared exactly, case and all);
  when the request carries the token itself, the claim must also be a JSON string in it (API
  Gateway stringifies numbers and booleans, so 123 and "123" look alike in the claims).
- Operators set limits and read any account's limits and usage (`GET .../limits`); they cannot
  read, create or delete a tenant's resources (tenant data stays the tenant's; operators repair
  accounts with `hybrid-counter-ops`, which uses IAM on the table). Every organization route is
  theirs: creating, moving and deleting organizations, their overrides and members.
- An organization's administrator is a token whose `OrgClaim` claim names the organization, and
  nothing more: no scope (issue 24). The claim is compared as the account claim is (a string of
  the id pattern, exactly, case and all; a JSON string in the request's own token). It reads its
  own organization, its usage and its history (`GET /orgs/{org_id}`, `.../usage`,
  `.../limits/history`), and nothing else: every other organization route is an operator route,
  which API Gateway refuses without the operator scope.
- Those three reads (`Access.ORG_READER`) admit operators too, so they carry no
  `AuthorizationScopes` (API Gateway would refuse a claim-only token otherwise) and the function
  decides: the org claim naming the path's organization, or an operator; else 403. On a route
  without scopes API Gateway checks no scope and hands `jwt.scopes` over as null even when the
  token has a `scope` claim (observed events: awsdocs/amazon-api-gateway-developer-guide#113,
  aws/aws-lambda-go#317, floci-io/floci#2011; the AWS guide documents only that a route with
  scopes needs one of them), so there, and only there, the function reads the operator scope out
  of the token's `scope` claim, strictly. It may: the claims are those of a token API Gateway has
  verified (signature with the issuer's keys, issuer, audience, expiry), so the issuer put them
  there. It reads only the form a stringified list cannot take: a `scope` claim that is a plain
  string of space-delimited scopes (RFC 8693 section 4.2, which RFC 9068 section 2.2.3 uses for
  JWT access tokens), split on single spaces and compared exactly; a value that looks like a
  stringified list (starts with `[` or ends with `]`: API Gateway's `[a b]` for a JSON list) counts
  for nothing, and when the request carries the token (always on AWS: it is the identity source)
  the claim must be that same JSON string in it. `scp` is never read: no standard defines it, and
  IdPs send it as a list (Okta) that reaches the function as `[a b]`. Where `jwt.scopes` is a list
  (a route deployed with scopes), it alone says who is an operator, as on the operator routes.

IAM mode: the caller is a trusted service acting for tenants; the account comes from the path and
which routes a principal may call is its IAM policy on `execute-api:Invoke`.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from hybrid_counter.errors import DomainError
from hybrid_counter.keys import ID_PATTERN, is_valid_id

AuthMode = Literal["jwt", "iam"]


class Unauthorized(DomainError):
    """The event carries no caller identity of the configured kind (API Gateway let it through)."""

    code = "Unauthorized"


class Forbidden(DomainError):
    code = "Forbidden"


class Access(Enum):
    PUBLIC = "public"  # no identity needed
    OWN_ACCOUNT = "own account"  # the account in the path must be the caller's
    OPERATOR = "operator"  # the operator scope (granted by API Gateway on the route), any account
    # the OrgClaim claim naming the path's organization, or the operator scope (any organization):
    # a route without scopes in template.yaml, where the function reads the `scope` claim strictly
    ORG_READER = "operator or the organization's administrator"


# Every route of the API, by method and path as API Gateway names it. A route missing here is
# refused (403): adding a route means deciding who may call it.
ROUTE_ACCESS: Mapping[tuple[str, str], Access] = {
    # Operators (template.yaml: AuthorizationScopes [OperatorScope] on each)
    ("PUT", "/accounts/{account_id}/limit"): Access.OPERATOR,
    ("GET", "/accounts/{account_id}/limits"): Access.OPERATOR,
    ("PUT", "/accounts/{account_id}/limits/{kind}"): Access.OPERATOR,
    ("DELETE", "/accounts/{account_id}/limits/{kind}"): Access.OPERATOR,
    ("PUT", "/accounts/{account_id}/plan"): Access.OPERATOR,
    ("PUT", "/plans/{plan_id}"): Access.OPERATOR,
    ("GET", "/plans/{plan_id}"): Access.OPERATOR,
    ("GET", "/plans"): Access.OPERATOR,
    ("GET", "/accounts/{account_id}/limits/history"): Access.OPERATOR,
    ("GET", "/plans/{plan_id}/history"): Access.OPERATOR,
    ("PUT", "/orgs/{org_id}"): Access.OPERATOR,
    ("DELETE", "/orgs/{org_id}"): Access.OPERATOR,
    ("PUT", "/orgs/{org_id}/limits/{kind}"): Access.OPERATOR,
    ("DELETE", "/orgs/{org_id}/limits/{kind}"): Access.OPERATOR,
    ("PUT", "/orgs/{org_id}/accounts/{account_id}"): Access.OPERATOR,
    ("DELETE", "/orgs/{org_id}/accounts/{account_id}"): Access.OPERATOR,
    ("GET", "/usage/over"): Access.OPERATOR,
    ("GET", "/events"): Access.OPERATOR,
    # Operators, and the organization's administrator (no AuthorizationScopes: the function decides)
    ("GET", "/orgs/{org_id}"): Access.ORG_READER,
    ("GET", "/orgs/{org_id}/usage"): Access.ORG_READER,
    ("GET", "/orgs/{org_id}/limits/history"): Access.ORG_READER,
    # The account's own token
    ("GET", "/accounts/{account_id}/usage"): Access.OWN_ACCOUNT,
    ("POST", "/accounts/{account_id}/kinds/{kind}/resources"): Access.OWN_ACCOUNT,
    ("GET", "/accounts/{account_id}/kinds/{kind}/resources"): Access.OWN_ACCOUNT,
    ("PUT", "/accounts/{account_id}/kinds/{kind}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("PATCH", "/accounts/{account_id}/kinds/{kind}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("GET", "/accounts/{account_id}/kinds/{kind}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("DELETE", "/accounts/{account_id}/kinds/{kind}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("POST", "/accounts/{account_id}/kinds/{kind}/resources/{resource_id}/confirm"): Access.OWN_ACCOUNT,
    ("POST", "/accounts/{account_id}/resources"): Access.OWN_ACCOUNT,
    ("GET", "/accounts/{account_id}/resources"): Access.OWN_ACCOUNT,
    ("PUT", "/accounts/{account_id}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("GET", "/accounts/{account_id}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("DELETE", "/accounts/{account_id}/resources/{resource_id}"): Access.OWN_ACCOUNT,
    ("POST", "/accounts/{account_id}/resources/{resource_id}/confirm"): Access.OWN_ACCOUNT,
    ("GET", "/openapi.json"): Access.PUBLIC,
    # The operator console's page and files (api/console_routes.py): no data; its calls are API calls
    ("GET", "/console"): Access.PUBLIC,
    ("GET", "/console/{asset}"): Access.PUBLIC,
}

# The security scheme's name in the OpenAPI description, by mode: renderers and generated clients
# show it beside the Authorization header it describes.
SECURITY_SCHEMES: Mapping[AuthMode, str] = {"jwt": "bearerAuth", "iam": "sigv4"}
NOT_YOUR_ACCOUNT = "this caller may not act on that account"
NOT_YOUR_ORG = "this caller may not read that organization"


@dataclass(frozen=True)
class AccessPolicy:
    mode: AuthMode = "jwt"
    account_claim: str = "account_id"
    operator_scope: str = "hybrid-counter/operator"
    org_claim: str = "org_id"

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
            org_claim=env.get("ORG_CLAIM") or "org_id",
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
        if access is Access.ORG_READER:
            self.check_org_reader(event, authorizer.get("jwt"))
            return
        jwt = authorizer.get("jwt")
        if not isinstance(jwt, Mapping) or not isinstance(jwt.get("claims"), Mapping):
            raise Unauthorized("no token claims in the request")
        if access is Access.OPERATOR:
            if self.operator_scope not in token_scopes(jwt):
                raise Forbidden(f"this request needs the {self.operator_scope} scope")
            return
        account = (event.get("pathParameters") or {}).get("account_id")
        if self.claimed_account(event, jwt["claims"]) != account:
            raise Forbidden(NOT_YOUR_ACCOUNT)

    def claimed_account(self, event: Mapping[str, Any], claims: Mapping[str, Any]) -> str:
        """The account the token names; Forbidden, saying why, unless it is an account id."""
        return self.claimed_id(event, claims, self.account_claim, "an account id")

    def claimed_id(self, event: Mapping[str, Any], claims: Mapping[str, Any], name: str, what: str) -> str:
        """The id the token's ``name`` claim holds; Forbidden, saying why, unless it is ``what``:
        a string of the id pattern, and a JSON string in the request's own token."""
        own = claims.get(name)
        if own is None:
            raise Forbidden(f"the token has no {name} claim")
        if not isinstance(own, str):
            raise Forbidden(f"the token's {name} claim is not a string")
        if not is_valid_id(own):
            raise Forbidden(f"the token's {name} claim is not {what} ({ID_PATTERN})")
        raw = raw_claims(event)
        if raw is not None and not isinstance(raw.get(name), str):
            raise Forbidden(f"the token's {name} claim is not a string")
        if raw is not None and raw[name] != own:
            raise Forbidden(f"the token's {name} claim differs from the authorizer's")
        return own

    def check_org_reader(self, event: Mapping[str, Any], jwt: Any) -> None:
        """An operator (`is_org_reading_operator`), or the administrator of the path's
        organization: the org claim naming it, checked as the account claim is; else Forbidden."""
        if not isinstance(jwt, Mapping) or not isinstance(jwt.get("claims"), Mapping):
            raise Unauthorized("no token claims in the request")
        if self.is_org_reading_operator(event, jwt):
            return
        org = (event.get("pathParameters") or {}).get("org_id")
        if self.claimed_id(event, jwt["claims"], self.org_claim, "an organization id") != org:
            raise Forbidden(NOT_YOUR_ORG)

    def is_org_reading_operator(self, event: Mapping[str, Any], jwt: Mapping[str, Any]) -> bool:
        """Whether the caller of an organization read holds the operator scope: in `jwt.scopes`
        when API Gateway filled it (a route with scopes), else in the token's own `scope` claim,
        read strictly (`scope_claim`). For the three organization reads only."""
        if jwt.get("scopes") is not None:
            return self.operator_scope in token_scopes(jwt)
        return self.operator_scope in scope_claim(event, jwt["claims"])

    def document(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The OpenAPI description with this policy's security scheme and per-route requirements."""
        if self.mode == "jwt":
            scheme: dict[str, Any] = {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
                "description": (
                    "Send `Authorization: Bearer <token>` with every request but GET /openapi.json: "
                    f"an OIDC access token from the deployment's issuer. Its {self.account_claim!r} claim "
                    f"names the caller's account (a string matching the account id pattern); the "
                    f"{self.operator_scope!r} scope, checked by API Gateway on the operator routes, is "
                    "needed to set limits, to read any account's limits and usage, and for every "
                    f"organization route. An organization's administrator (a token whose "
                    f"{self.org_claim!r} claim names the organization; no scope needed) reads that "
                    "organization, its usage and its history; there, where API Gateway checks no "
                    "scope, an operator's token must carry the scope in its 'scope' claim as a "
                    "space-delimited string."
                ),
            }
        else:
            scheme = {
                "type": "apiKey",
                "name": "Authorization",
                "in": "header",
                "x-amazon-apigateway-authtype": "awsSigv4",
                "description": "Sign every request but GET /openapi.json with AWS Signature Version 4 "
                "(service execute-api): the Authorization header, with X-Amz-Date (and X-Amz-Security-Token "
                "for temporary credentials). The account is the path's; which routes a principal may call "
                "is its IAM policy on execute-api:Invoke.",
            }
        name = SECURITY_SCHEMES[self.mode]
        schema.setdefault("components", {})["securitySchemes"] = {name: scheme}
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                access = ROUTE_ACCESS.get((method.upper(), path))
                if access is Access.PUBLIC:
                    operation["security"] = []
                elif access is Access.OPERATOR and self.mode == "jwt":
                    operation["security"] = [{name: [self.operator_scope]}]
                elif access is Access.ORG_READER and self.mode == "jwt":
                    # an operator, or any token (its org claim must name the organization)
                    operation["security"] = [{name: [self.operator_scope]}, {name: []}]
                else:
                    operation["security"] = [{name: []}]
        return schema


def caller_of(event: Mapping[str, Any]) -> str:
    """Who makes the request, for the history of limit changes: the token's ``sub`` (or its
    ``client_id``: client-credentials tokens), or the IAM principal."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    iam = authorizer.get("iam")
    if isinstance(iam, Mapping):
        return str(iam.get("userArn") or iam.get("callerId") or iam.get("accessKey") or "iam")
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    return str(claims.get("sub") or claims.get("client_id") or "unknown")


def token_scopes(jwt: Mapping[str, Any]) -> set[str]:
    """The scopes API Gateway verified: `jwt.scopes`, which it fills on routes with
    AuthorizationScopes (null elsewhere). Exact strings; the claims are never parsed for scopes."""
    scopes = jwt.get("scopes")
    if not isinstance(scopes, list):
        return set()
    return {scope for scope in scopes if isinstance(scope, str)}


def scope_claim(event: Mapping[str, Any], claims: Mapping[str, Any]) -> set[str]:
    """The scopes of a verified token's `scope` claim, for the organization reads only (routes
    without scopes, where `jwt.scopes` is null): a plain string of space-delimited scopes (RFC 8693
    section 4.2, RFC 9068 section 2.2.3), split on single spaces; nothing for a value that looks
    like a stringified list (API Gateway's `[a b]`) or that is not that same JSON string in the
    request's own token. `scp` is never read (module docstring)."""
    value = claims.get("scope")
    if not isinstance(value, str) or value.startswith("[") or value.endswith("]"):
        return set()
    raw = raw_claims(event)
    if raw is not None and raw.get("scope") != value:
        return set()
    return set(value.split(" "))


def raw_claims(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The claims of the token the request carries, with their JSON types (API Gateway validated
    this very token, from the same header, before the function ran), or None without a token.
    A header that is not a readable JWT reads as claims of no kind, which no check accepts."""
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    value = str(headers.get("authorization") or "").strip()
    if not value:
        return None
    token = value[7:].strip() if value[:7].lower() == "bearer " else value
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return payload if isinstance(payload, dict) else {}


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
