"""A local OpenID Connect issuer: the identity provider `make dev` stands in for.

It makes an RSA key pair when it starts (the private key never leaves this process) and
serves, on 127.0.0.1:

- `GET /.well-known/openid-configuration`: the discovery document API Gateway reads;
- `GET /.well-known/jwks.json`: the public key, with its `kid`;
- `POST /token`: an OAuth 2.0 client-credentials token endpoint without client
  authentication (local use only): form fields `scope` (space-separated), `claims` (a JSON
  object of extra claims, e.g. `{"account_id": "acme"}`; `sub` and `client_id`, if given, non-empty
  strings), `expires_in` (seconds, at most 24 h);
- `GET /authorize` and `POST /token` with `grant_type=authorization_code`: the authorization-code
  flow with PKCE (RFC 7636, S256 only) for browser clients such as the operator console
  (authorization.py). Locally there is no password: the form it serves signs in **any user name
  typed into it**, and grants whatever scopes the client asked for (the operator scope included).
  That is the point of a local stand-in, and why it listens on 127.0.0.1 only.

The issuer owns the registered claims `iss`, `aud`, `exp`, `nbf`, `iat` and `jti` (and `scope`,
which the `scope` field sets): a request that sets one in `claims` is refused rather than given a
token of another issuer, audience or lifetime. Every request gets an answer, malformed ones an
OAuth error (`400 {"error": "invalid_request", "error_description": ...}`, RFC 6749 5.2), never a
dropped connection. Its log lines (request lines at DEBUG) go through `localrun.gateway.redaction`.

`mint()` does the same in-process without those checks: it makes the malformed tokens tests need
(expired, not yet valid, other issuer or audience). PyJWT signs; cryptography makes the key.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NoReturn, Self
from urllib.parse import parse_qsl

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from localrun.gateway.authorization import (
    AuthorizationCodes,
    AuthorizationRefused,
    Page,
    authorization_form,
    redirect_after_sign_in,
)
from localrun.gateway.redaction import RedactSecrets

DEFAULT_LIFETIME_SECONDS = 3600
MAX_LIFETIME_SECONDS = 24 * 3600
MAX_FORM_BYTES = 1024 * 1024  # far above any real form; read whole before answering
OWNED_CLAIMS = ("iss", "aud", "exp", "nbf", "iat", "jti", "scope")
STRING_CLAIMS = ("sub", "client_id")
Answer = tuple[int, dict[str, Any]]

log = logging.getLogger("localrun.oidc")
log.addFilter(RedactSecrets())  # request lines may carry tokens: never log them


class InvalidTokenRequest(ValueError):
    """A token request the endpoint refuses: `400 invalid_request` with this description."""

    def answer(self) -> Answer:
        return 400, {"error": "invalid_request", "error_description": str(self)}


class LocalIssuer:
    def __init__(self, audiences: tuple[str, ...], port: int = 0, host: str = "127.0.0.1") -> None:
        if not audiences:
            raise ValueError("the local issuer needs the audience its tokens are for")
        self.audiences = audiences
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = secrets.token_hex(8)
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None
        self.codes = AuthorizationCodes()

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="local-oidc-issuer", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    # -- documents --------------------------------------------------------------------------------

    @property
    def jwks_uri(self) -> str:
        return f"{self.url}/.well-known/jwks.json"

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/token"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.url}/authorize"

    def register_client(self, client_id: str, redirect_uris: list[str]) -> None:
        """A public client of the authorization-code flow (the console), with its redirect URIs."""
        self.codes.register(client_id, redirect_uris)

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.jwks_uri,
            "token_endpoint": self.token_endpoint,
            "authorization_endpoint": self.authorization_endpoint,
            "grant_types_supported": ["client_credentials", "authorization_code"],
            "response_types_supported": ["token", "code"],
            "code_challenge_methods_supported": ["S256"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }

    def jwks(self) -> dict[str, Any]:
        public: dict[str, Any] = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    # -- tokens -----------------------------------------------------------------------------------

    def mint(
        self,
        claims: dict[str, Any] | None = None,
        scopes: list[str] | tuple[str, ...] = (),
        *,
        expires_in: int = DEFAULT_LIFETIME_SECONDS,
        not_before: int | None = None,
        issuer: str | None = None,
        audience: str | list[str] | None = None,
    ) -> str:
        """A signed access token; the keyword arguments make deliberately wrong ones for tests."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.url,
            "aud": audience if audience is not None else self.audiences[0],
            "sub": "local-client",
            "iat": now if not_before is None else min(now, not_before),
            "exp": now + expires_in,
            "jti": secrets.token_hex(8),
            "token_use": "access",
        }
        if not_before is not None:
            payload["nbf"] = not_before
        if scopes:
            payload["scope"] = " ".join(scopes)
        payload.update(claims or {})
        return jwt.encode(payload, self._key, algorithm="RS256", headers={"kid": self.kid})

    def token_response(self, form: dict[str, str]) -> Answer:
        """The token endpoint's answer to a client-credentials or authorization-code request."""
        grant_type = form.get("grant_type", "client_credentials")
        if grant_type == "authorization_code":
            return self.exchange_code(form)
        if grant_type != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        try:
            claims = requested_claims(form.get("claims") or "{}")
            lifetime = requested_lifetime(form.get("expires_in"))
        except InvalidTokenRequest as refusal:
            return refusal.answer()
        token = self.mint(claims, (form.get("scope") or "").split(), expires_in=lifetime)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}

    def exchange_code(self, form: dict[str, str]) -> Answer:
        """An authorization code for an access token: the code once, with its client, redirect
        URI and PKCE verifier; the token names the user signed in and carries the scopes asked for."""
        try:
            grant = self.codes.redeem(form)
        except AuthorizationRefused as refusal:
            return 400, {"error": refusal.error, "error_description": str(refusal)}
        claims = {"sub": grant.subject, "client_id": grant.client_id}
        token = self.mint(claims, grant.scopes)
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": DEFAULT_LIFETIME_SECONDS,
            "scope": " ".join(grant.scopes),
        }

    def authorize_page(self, query: str) -> Page:
        """`GET /authorize`: the sign-in form, or why the request is refused."""
        try:
            request = self.codes.authorization_request(parse_form(query.encode()))
        except AuthorizationRefused as refusal:
            return refusal.page()
        return authorization_form(request, self.authorization_endpoint)

    def sign_in(self, form: dict[str, str]) -> Page:
        """`POST /authorize`: the form sent back with a user name: a code, by redirect."""
        try:
            request = self.codes.authorization_request(form)
            code = self.codes.issue(request, form.get("username", ""))
        except AuthorizationRefused as refusal:
            return refusal.page()
        return redirect_after_sign_in(request, code)


def requested_claims(text: str) -> dict[str, Any]:
    """The `claims` field: a JSON object that leaves the issuer's own claims to the issuer."""
    try:
        claims = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise InvalidTokenRequest("claims must be a JSON object") from None
    if not isinstance(claims, dict):
        raise InvalidTokenRequest("claims must be a JSON object")
    owned = [name for name in OWNED_CLAIMS if name in claims]
    if owned:
        raise InvalidTokenRequest(
            f"claims may not set {', '.join(owned)}: the issuer sets iss, aud, exp, nbf, iat and jti, "
            "the scope field sets scope, expires_in the lifetime"
        )
    for name in STRING_CLAIMS:
        if name in claims and not (isinstance(claims[name], str) and claims[name]):
            raise InvalidTokenRequest(f"claims: {name} must be a non-empty string")
    return claims


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity, which json.loads would accept


def requested_lifetime(text: str | None) -> int:
    if text is None or text == "":
        return DEFAULT_LIFETIME_SECONDS
    lifetime = int(text) if re.fullmatch(r"[0-9]{1,9}", text) else 0
    if not 0 < lifetime <= MAX_LIFETIME_SECONDS:
        raise InvalidTokenRequest(f"expires_in must be whole seconds from 1 to {MAX_LIFETIME_SECONDS}")
    return lifetime


def parse_form(body: bytes) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body; each field at most once (RFC 6749 3.2)."""
    try:
        fields = parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidTokenRequest("the form must be UTF-8") from None
    names = [name for name, _ in fields]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidTokenRequest(f"fields sent more than once: {', '.join(repeated)}")
    return dict(fields)


def content_length(value: str | None) -> int:
    if value is None or value == "":
        return 0
    if not re.fullmatch(r"[0-9]{1,9}", value.strip()):
        raise InvalidTokenRequest("Content-Length must be a number of bytes")
    length = int(value)
    if length > MAX_FORM_BYTES:
        raise InvalidTokenRequest(f"the form is larger than {MAX_FORM_BYTES} bytes")
    return length


def _handler_for(issuer: LocalIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/authorize":
                self._page(lambda: issuer.authorize_page(query))
            else:
                self._answer(self._document)

        def do_POST(self) -> None:
            if self.path.partition("?")[0] == "/authorize":
                self._page(lambda: issuer.sign_in(self._form()))
            else:
                self._answer(self._token)

        def _form(self) -> dict[str, str]:
            return parse_form(self.rfile.read(content_length(self.headers.get("Content-Length"))))

        def _document(self) -> Answer:
            if self.path == "/.well-known/openid-configuration":
                return 200, issuer.discovery()
            if self.path == "/.well-known/jwks.json":
                return 200, issuer.jwks()
            return 404, {"error": "not_found"}

        def _token(self) -> Answer:
            if self.path.partition("?")[0] != "/token":
                return 404, {"error": "not_found"}
            return issuer.token_response(self._form())

        def _page(self, respond: Callable[[], Page]) -> None:
            try:
                status, headers, body = respond()
            except InvalidTokenRequest as refusal:
                self.close_connection = True
                status, headers, body = AuthorizationRefused(str(refusal)).page()
            except Exception:
                log.exception("%s %s failed", self.command, self.path)
                status, headers, body = AuthorizationRefused("the issuer failed").page(500)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _answer(self, respond: Callable[[], Answer]) -> None:
            """Whatever the request, an answer: a refusal, or 500 for what nothing here foresaw."""
            try:
                status, body = respond()
            except InvalidTokenRequest as refusal:
                self.close_connection = True  # its body may not have been read
                status, body = refusal.answer()
            except Exception:
                log.exception("%s %s failed", self.command, self.path)
                status, body = 500, {"error": "server_error"}
            self._json(status, body)

        def _json(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            # Browser clients (the console, on the API's origin) read the discovery document and
            # redeem codes from another origin; no cookies are involved, so any origin may read.
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler
