"""API Gateway's JWT authorizer for HTTP APIs, locally: the checks and answers AWS documents.

For a route with a JWT authorizer, API Gateway (developer guide, "Control access to HTTP APIs
with JWT authorizers"):

1. takes the token from the identity source (`$request.header.Authorization`, repeated headers
   joined with commas as API Gateway joins them), with or without a `Bearer ` prefix;
2. checks the algorithm (RSA only) and the signature with the issuer's key named by `kid`,
   fetched from the `jwks_uri` of `<issuer>/.well-known/openid-configuration` (cached 2 hours);
3. checks `iss` (the authorizer's issuer), `aud` or, only without `aud`, `client_id` (one of
   the authorizer's audiences), `exp` (future), `nbf` and `iat` (past);
4. on a route with authorization scopes, needs one of them in the token's `scope` or `scp`.

Stricter than AWS documents, on purpose: the token must be a compact JWS (three base64url parts;
two joined Authorization headers are not), and `exp`, `nbf` and `iat` must be JSON numbers
(RFC 7519's NumericDate), where PyJWT alone would accept `"exp": "1999999999"`; what AWS does
with such a string is not documented.

Steps 1-3 failing: 401 `{"message":"Unauthorized"}` with a `www-authenticate` header
(`Bearer scope="" error="invalid_token" error_description="..."`; the wording AWS publishes is
"the token does not have a valid audience", the other descriptions here are ours). Step 4: 403
`{"message":"Forbidden"}`. A passing token's claims reach the integration in
`requestContext.authorizer.jwt.claims` as API Gateway passes them (measured on AWS by the floci
emulator project, floci-io/floci#2011): strings as they are, numbers and booleans as their text,
lists as `[a b]`, and claims whose value is null left out. `scopes` is the token's scopes on
routes that have authorization scopes and null elsewhere. PyJWT does the cryptography and the
registered-claim checks.
"""

from __future__ import annotations

import json
import math
import re
import threading
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jwt

RSA_ALGORITHMS = ("RS256", "RS384", "RS512")
JWKS_CACHE_SECONDS = 7200
DATE_CLAIMS = ("exp", "nbf", "iat")
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class JwtAuthorizer:
    name: str
    issuer: str
    audiences: tuple[str, ...]
    jwks_uri: str | None = None  # None: discovered from the issuer


class TokenRejected(Exception):
    """The token is not valid for this authorizer (401) or lacks the route's scopes (403)."""

    def __init__(self, description: str, *, status: int = 401) -> None:
        super().__init__(description)
        self.description = description
        self.status = status


class JwtVerifier:
    """Validates tokens for one authorizer; thread-safe; keys fetched on first use."""

    def __init__(self, authorizer: JwtAuthorizer) -> None:
        self.authorizer = authorizer
        self._client: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def verify(self, header_value: str | None, route_scopes: Sequence[str]) -> dict[str, Any]:
        """The `requestContext.authorizer` value for a valid token; raises TokenRejected."""
        token = _token_from(header_value)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise TokenRejected("the token is not a valid JWT") from None
        algorithm = header.get("alg")
        if algorithm not in RSA_ALGORITHMS:
            raise TokenRejected("the token is not signed with a supported algorithm")
        try:
            key = self._keys().get_signing_key(str(header.get("kid")))
        except (jwt.PyJWKClientError, jwt.InvalidKeyError):
            raise TokenRejected("the token's kid does not match a key of the issuer") from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                issuer=self.authorizer.issuer,
                options={"verify_aud": False, "require": ["exp", "iss"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("the token is not valid yet") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("the token does not have a valid issuer") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenRejected(f"the token has no {error.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("the token signature is invalid") from None
        except jwt.InvalidTokenError:
            raise TokenRejected("the token is not valid") from None
        _require_numeric_dates(claims)
        if not _audience_matches(claims, self.authorizer.audiences):
            raise TokenRejected("the token does not have a valid audience")
        scopes = token_scopes(claims)
        if route_scopes and not scopes.intersection(route_scopes):
            raise TokenRejected("the token does not have a required scope", status=403)
        return {
            "jwt": {
                "claims": passed_claims(claims),
                "scopes": sorted(scopes) if route_scopes else None,
            }
        }

    def _keys(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._client is None:
                uri = self.authorizer.jwks_uri or discover_jwks_uri(self.authorizer.issuer)
                self._client = jwt.PyJWKClient(uri, cache_keys=True, lifespan=JWKS_CACHE_SECONDS, timeout=5)
            return self._client


def discover_jwks_uri(issuer: str) -> str:
    """The `jwks_uri` of the issuer's OpenID Connect discovery document (as API Gateway reads it)."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    if not url.startswith(("https://", "http://")):
        raise TokenRejected("the authorizer's issuer is not a URL")
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - http(s) only, checked above
            document = json.load(response)
    except (OSError, ValueError):
        raise TokenRejected("the issuer's keys could not be fetched") from None
    return str(document["jwks_uri"])


def _token_from(header_value: str | None) -> str:
    value = (header_value or "").strip()
    token = value[7:].strip() if value[:7].lower() == "bearer " else value
    if not token or token.lower() == "bearer":
        raise TokenRejected("")  # no token: the challenge names the scheme only
    if _COMPACT_JWS.fullmatch(token) is None:
        # The base64 decoding under PyJWT is lenient (it skips characters outside the alphabet),
        # so whether "<token>,Bearer <token>" (two joined headers) is refused should not hang
        # on padding: only three base64url parts are a token.
        raise TokenRejected("the token is not a valid JWT")
    return token


def _require_numeric_dates(claims: dict[str, Any]) -> None:
    """`exp`, `nbf` and `iat` as JSON numbers: PyJWT turns the string "1999999999" into one."""
    for name in DATE_CLAIMS:
        if name in claims and not _is_numeric_date(claims[name]):
            raise TokenRejected(f"the token's {name} claim is not a number")


def _is_numeric_date(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _audience_matches(claims: dict[str, Any], audiences: Sequence[str]) -> bool:
    if "aud" in claims:
        audience = claims["aud"]
        values = audience if isinstance(audience, list) else [audience]
    else:
        values = [claims.get("client_id")]
    return any(isinstance(value, str) and value in audiences for value in values)


def token_scopes(claims: dict[str, Any]) -> set[str]:
    scopes: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            scopes.update(value.split())
        elif isinstance(value, list):
            scopes.update(str(item) for item in value)
    return scopes


def passed_claims(claims: dict[str, Any]) -> dict[str, str]:
    """The claims as API Gateway passes them to the integration: as strings, null ones left out."""
    return {name: claim_text(value) for name, value in claims.items() if value is not None}


def claim_text(value: Any) -> str:
    """A claim's value as API Gateway passes it to the integration: as a string."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "[" + " ".join(claim_text(item) for item in value) + "]"
    return json.dumps(value, separators=(",", ":"))  # objects: JSON text (AWS's form is unverified)
