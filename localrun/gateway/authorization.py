"""The local issuer's authorization-code flow with PKCE (RFC 6749 4.1, RFC 7636 S256), for
browser clients such as the operator console.

A client is registered with its redirect URIs (the local runtime registers the console's,
``<api>/console``). `GET /authorize` checks the request and serves a one-field form: whatever user
name is typed is signed in, with the scopes the client asked for (a local stand-in has no users
to check; a real identity provider decides both). `POST /authorize` issues a code bound to the
client, the redirect URI, the code challenge, the scopes and the user, and redirects back with it.
The token endpoint redeems a code once: it is taken out of the store before anything is checked,
so a code that fails a check (a wrong verifier, another redirect URI) is spent too, and a code is
good for `CODE_LIFETIME_SECONDS`.

Refusals follow RFC 6749 4.1.2.1: an unknown client or redirect URI is never redirected to (an
error page instead); a malformed request from a known client is an error page too, which keeps
this small (a real provider may redirect those with ``error=invalid_request``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

CODE_LIFETIME_SECONDS = 60
# The console's client (template.yaml ConsoleClientId's default) and the API function's variable
# naming the issuer it signs in at (template.yaml: JwtIssuer, empty locally, so the runtime fills it).
CONSOLE_CLIENT_ID = "hybrid-counter-console"
CONSOLE_ISSUER_VARIABLE = "CONSOLE_ISSUER"
# RFC 7636 4.1-4.2: a verifier is 43-128 unreserved characters; an S256 challenge is 43 base64url.
VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
USER_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}")  # RFC 6749 3.3
MAX_STATE = 512
# The pages' own policy: no script, no style, nothing loaded; the form posts here.
PAGE_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
Page = tuple[int, dict[str, str], bytes]


class AuthorizationRefused(ValueError):
    """A request the authorization or token endpoint refuses, with its OAuth error code."""

    def __init__(self, message: str, error: str = "invalid_request") -> None:
        super().__init__(message)
        self.error = error

    def page(self, status: int = 400) -> Page:
        body = _html("Sign-in refused", f"<p>{html.escape(self.error)}: {html.escape(str(self))}</p>")
        return status, {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": PAGE_CSP}, body


@dataclass(frozen=True)
class AuthorizationRequest:
    client_id: str
    redirect_uri: str
    code_challenge: str
    scopes: tuple[str, ...]
    state: str


@dataclass(frozen=True)
class Grant:
    """What a code stands for until it is redeemed."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    scopes: tuple[str, ...]
    subject: str
    expires_at: float


class AuthorizationCodes:
    """Registered clients and the codes not yet redeemed; thread-safe."""

    def __init__(self, lifetime: float = CODE_LIFETIME_SECONDS) -> None:
        self._clients: dict[str, frozenset[str]] = {}
        self._codes: dict[str, Grant] = {}
        self._lifetime = lifetime
        self._lock = threading.Lock()

    def register(self, client_id: str, redirect_uris: list[str]) -> None:
        with self._lock:
            self._clients[client_id] = self._clients.get(client_id, frozenset()) | frozenset(redirect_uris)

    def authorization_request(self, fields: dict[str, str]) -> AuthorizationRequest:
        client_id = fields.get("client_id", "")
        redirect_uri = fields.get("redirect_uri", "")
        with self._lock:
            registered = self._clients.get(client_id)
        if registered is None:
            raise AuthorizationRefused(f"unknown client_id {client_id[:64]!r}", "unauthorized_client")
        if redirect_uri not in registered:
            raise AuthorizationRefused("redirect_uri is not one registered for this client")
        if fields.get("response_type") != "code":
            raise AuthorizationRefused("response_type must be code", "unsupported_response_type")
        if fields.get("code_challenge_method") != "S256":
            raise AuthorizationRefused("PKCE is required: code_challenge_method must be S256")
        challenge = fields.get("code_challenge", "")
        if not CHALLENGE.fullmatch(challenge):
            raise AuthorizationRefused("code_challenge must be an S256 challenge (43 base64url characters)")
        scopes = tuple((fields.get("scope") or "").split())
        if not all(SCOPE_TOKEN.fullmatch(scope) for scope in scopes):
            raise AuthorizationRefused("scope must be space-separated scope tokens", "invalid_scope")
        state = fields.get("state", "")
        if len(state) > MAX_STATE:
            raise AuthorizationRefused(f"state is longer than {MAX_STATE} characters")
        return AuthorizationRequest(client_id, redirect_uri, challenge, scopes, state)

    def issue(self, request: AuthorizationRequest, user_name: str) -> str:
        if not USER_NAME.fullmatch(user_name):
            raise AuthorizationRefused("the user name must be 1-64 of A-Z a-z 0-9 _ . @ -", "access_denied")
        code = secrets.token_urlsafe(32)
        grant = Grant(
            request.client_id,
            request.redirect_uri,
            request.code_challenge,
            request.scopes,
            user_name,
            time.monotonic() + self._lifetime,
        )
        with self._lock:
            now = time.monotonic()
            self._codes = {known: kept for known, kept in self._codes.items() if kept.expires_at > now}
            self._codes[code] = grant
        return code

    def redeem(self, form: dict[str, str]) -> Grant:
        """The grant of the form's code, which is spent whatever the outcome."""
        with self._lock:
            grant = self._codes.pop(form.get("code", ""), None)
        if grant is None or grant.expires_at <= time.monotonic():
            raise AuthorizationRefused("the code is unknown, used or expired", "invalid_grant")
        if form.get("client_id") != grant.client_id:
            raise AuthorizationRefused("the code was issued to another client", "invalid_grant")
        if form.get("redirect_uri") != grant.redirect_uri:
            raise AuthorizationRefused(
                "redirect_uri differs from the authorization request's", "invalid_grant"
            )
        verifier = form.get("code_verifier", "")
        if not VERIFIER.fullmatch(verifier):
            raise AuthorizationRefused("code_verifier must be 43-128 unreserved characters")
        if not secrets.compare_digest(s256(verifier), grant.code_challenge):
            raise AuthorizationRefused("code_verifier does not match the code challenge", "invalid_grant")
        return grant


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_form(request: AuthorizationRequest, action: str) -> Page:
    hidden = {
        "response_type": "code",
        "client_id": request.client_id,
        "redirect_uri": request.redirect_uri,
        "code_challenge": request.code_challenge,
        "code_challenge_method": "S256",
        "scope": " ".join(request.scopes),
        "state": request.state,
    }
    fields = "".join(
        f'<input type="hidden" name="{name}" value="{html.escape(value)}">' for name, value in hidden.items()
    )
    scopes = html.escape(" ".join(request.scopes) or "(none)")
    body = _html(
        "Sign in (local issuer)",
        f"<p>Local identity provider of <code>make dev</code>: any user name signs in, no password.</p>"
        f"<p>Client <code>{html.escape(request.client_id)}</code> asks for the scopes <code>{scopes}</code>.</p>"
        f'<form method="post" action="{html.escape(action)}">{fields}'
        f'<label>User name <input name="username" id="username" required autofocus></label> '
        f'<button type="submit" id="sign-in">Sign in</button></form>',
    )
    # The form posts here, and the answer redirects to the client: Chrome applies form-action
    # to that redirect too, so the client's origin is allowed as well.
    target = urlsplit(request.redirect_uri)
    csp = f"{PAGE_CSP}; form-action 'self' {target.scheme}://{target.netloc}"
    return 200, {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": csp}, body


def redirect_after_sign_in(request: AuthorizationRequest, code: str) -> Page:
    query = {"code": code, **({"state": request.state} if request.state else {})}
    separator = "&" if "?" in request.redirect_uri else "?"
    return 302, {"Location": f"{request.redirect_uri}{separator}{urlencode(query)}"}, b""


def _html(title: str, content: str) -> bytes:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"</head><body><h1>{html.escape(title)}</h1>{content}</body></html>"
    ).encode()
