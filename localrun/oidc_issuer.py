"""A local OpenID Connect issuer: the identity provider `make dev` stands in for.

It makes an RSA key pair when it starts (the private key never leaves this process) and
serves, on 127.0.0.1:

- `GET /.well-known/openid-configuration`: the discovery document API Gateway reads;
- `GET /.well-known/jwks.json`: the public key, with its `kid`;
- `POST /token`: an OAuth 2.0 client-credentials token endpoint without client
  authentication (local use only): form fields `scope` (space-separated), `claims` (a JSON
  object of extra claims, e.g. `{"account_id": "acme"}`), `expires_in` (seconds).

`mint()` does the same in-process, and also makes the malformed tokens tests need (expired,
not yet valid, other issuer or audience). PyJWT signs; cryptography makes the key.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qsl

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

DEFAULT_LIFETIME_SECONDS = 3600
MAX_LIFETIME_SECONDS = 24 * 3600


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

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.jwks_uri,
            "token_endpoint": self.token_endpoint,
            "grant_types_supported": ["client_credentials"],
            "response_types_supported": ["token"],
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

    def token_response(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if form.get("grant_type", "client_credentials") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        try:
            claims = json.loads(form.get("claims") or "{}")
            lifetime = int(form.get("expires_in") or DEFAULT_LIFETIME_SECONDS)
        except ValueError:
            return 400, {
                "error": "invalid_request",
                "error_description": "claims must be JSON, expires_in a number",
            }
        if not isinstance(claims, dict) or not 0 < lifetime <= MAX_LIFETIME_SECONDS:
            return 400, {"error": "invalid_request", "error_description": "claims must be an object"}
        token = self.mint(claims, (form.get("scope") or "").split(), expires_in=lifetime)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}


def _handler_for(issuer: LocalIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                self._json(200, issuer.discovery())
            elif self.path == "/.well-known/jwks.json":
                self._json(200, issuer.jwks())
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if self.path != "/token":
                self._json(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(parse_qsl(self.rfile.read(length).decode("utf-8", "replace")))
            self._json(*issuer.token_response(form))

        def _json(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
