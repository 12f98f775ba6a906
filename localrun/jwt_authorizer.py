"""API Gateway's JWT authorizer for HTTP APIs, locally: the checks and answers AWS documents.

For a route with a JWT authorizer, API Gateway (developer guide, "Control access to HTTP APIs
with JWT authorizers"):

1. takes the token from the identity source (`$request.header.Authorization`), with or without
   a `Bearer ` prefix;
2. checks the algorithm (RSA only) and the signature with the issuer's key named by `kid`,
   fetched from the `jwks_uri` of `<issuer>/.well-known/openid-configuration` (cached 2 hours);
3. checks `iss` (the authorizer's issuer), `aud` or, only without `aud`, `client_id` (one of
   the authorizer's audiences), `exp` (future), `nbf` and `iat` (past);
4. on a route with authorization scopes, needs one of them in the token's `scope` or `scp`.

Steps 1-3 failing: 401 `{"message":"Unauthorized"}` with a `www-authenticate` header
(`Bearer scope="" error="invalid_token" error_description="..."`; the wording AWS publishes is
"the token does not have a valid audience", the other descriptions here are ours). Step 4: 403
`{"message":"Forbidden"}`. A passing token's claims reach the integration as strings (numbers
and booleans as their text, lists as `[a b]`) in `requestContext.authorizer.jwt.claims`, with
`scopes` the token's scopes on routes that have authorization scopes and null elsewhere.
PyJWT does the cryptography and the registered-claim checks.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jwt

RSA_ALGORITHMS = ("RS256", "RS384", "RS512")
JWKS_CACHE_SECONDS = 7200


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
        if not _audience_matches(claims, self.authorizer.audiences):
            raise TokenRejected("the token does not have a valid audience")
        scopes = token_scopes(claims)
        if route_scopes and not scopes.intersection(route_scopes):
            raise TokenRejected("the token does not have a required scope", status=403)
        return {
            "jwt": {
                "claims": {name: claim_text(value) for name, value in claims.items()},
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
    return token


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


def claim_text(value: Any) -> str:
    """A claim as API Gateway passes it to the integration: as a string."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return "[" + " ".join(claim_text(item) for item in value) + "]"
    return json.dumps(value, separators=(",", ":"))  # objects: JSON text (AWS's form is unverified)
