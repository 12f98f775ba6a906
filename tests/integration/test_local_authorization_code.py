"""The local issuer's authorization-code flow with PKCE (localrun/gateway/authorization.py), over
HTTP: the operator console signs in through it under `make dev`.

A code is issued only to a registered client for one of its redirect URIs, with an S256 challenge;
it is redeemed once, by the same client and redirect URI, with the verifier of that challenge.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests

from localrun.gateway.authorization import AuthorizationCodes, AuthorizationRefused
from localrun.gateway.oidc_issuer import LocalIssuer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

AUDIENCE = "hybrid-counter"
CLIENT = "hybrid-counter-console"
REDIRECT = "http://127.0.0.1:3000/console"
SCOPE = "hybrid-counter/operator"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    running = LocalIssuer((AUDIENCE,)).start()
    running.register_client(CLIENT, [REDIRECT])
    yield running
    running.stop()


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize_fields(challenge: str, **changes: str) -> dict[str, str]:
    fields = {
        "response_type": "code",
        "client_id": CLIENT,
        "redirect_uri": REDIRECT,
        "scope": SCOPE,
        "state": "s-123",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return {name: value for name, value in {**fields, **changes}.items() if value != "-"}


def sign_in(issuer: LocalIssuer, challenge: str, user: str = "alice") -> str:
    """The code the form's POST redirects back with."""
    answer = requests.post(
        issuer.authorization_endpoint,
        data={**authorize_fields(challenge), "username": user},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    query = parse_qs(location.query)
    assert query["state"] == ["s-123"]
    (code,) = query["code"]
    return code


def redeem(issuer: LocalIssuer, code: str, verifier: str, **changes: str) -> requests.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": CLIENT,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        **changes,
    }
    return requests.post(issuer.token_endpoint, data=form, timeout=10)


def claims_of(issuer: LocalIssuer, token: str) -> dict[str, Any]:
    key = jwt.PyJWKSet.from_dict(issuer.jwks()).keys[0].key
    decoded: dict[str, Any] = jwt.decode(
        token, key, algorithms=["RS256"], audience=AUDIENCE, issuer=issuer.url
    )
    return decoded


def test_discovery_names_the_authorization_endpoint_and_s256(issuer: LocalIssuer) -> None:
    answer = requests.get(f"{issuer.url}/.well-known/openid-configuration", timeout=10)
    document = answer.json()
    assert document["authorization_endpoint"] == f"{issuer.url}/authorize"
    assert "authorization_code" in document["grant_types_supported"]
    assert "code" in document["response_types_supported"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    # A browser page on another origin reads it (the console, on the API's origin)
    assert answer.headers["Access-Control-Allow-Origin"] == "*"


def test_a_user_signs_in_and_the_code_is_redeemed_once_for_a_token_with_the_scope(
    issuer: LocalIssuer,
) -> None:
    verifier, challenge = pkce()
    # Given the authorization request, the issuer serves its form under a policy of its own
    form = requests.get(issuer.authorization_endpoint, params=authorize_fields(challenge), timeout=10)
    assert form.status_code == 200
    assert form.headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in form.headers["Content-Security-Policy"]
    assert re.search(r'name="code_challenge" value="' + re.escape(challenge), form.text)
    # When a user name is sent with it, a code comes back to the redirect URI, and is redeemed
    code = sign_in(issuer, challenge, "alice")
    answer = redeem(issuer, code, verifier)
    assert answer.status_code == 200, answer.text
    token = answer.json()
    assert (token["token_type"], token["scope"]) == ("Bearer", SCOPE)
    claims = claims_of(issuer, token["access_token"])
    assert (claims["sub"], claims["scope"], claims["client_id"]) == ("alice", SCOPE, CLIENT)
    # Then the same code is refused a second time
    again = redeem(issuer, code, verifier)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"code_verifier": "x" * 50}, "does not match"),
        ({"redirect_uri": "http://127.0.0.1:3000/other"}, "redirect_uri"),
        ({"client_id": "another-client"}, "another client"),
    ],
)
def test_a_code_is_refused_with_another_verifier_client_or_redirect_and_is_spent(
    issuer: LocalIssuer, changes: dict[str, str], why: str
) -> None:
    verifier, challenge = pkce()
    code = sign_in(issuer, challenge)
    refused = redeem(issuer, code, verifier, **changes)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_grant")
    assert why in refused.json()["error_description"]
    # The code is spent: even the right verifier gets nothing now
    assert redeem(issuer, code, verifier).json()["error"] == "invalid_grant"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"client_id": "unknown"}, "unknown client_id"),
        ({"redirect_uri": "https://attacker.example/console"}, "redirect_uri is not one registered"),
        ({"code_challenge_method": "plain"}, "PKCE is required"),
        ({"code_challenge_method": "-"}, "PKCE is required"),
        ({"code_challenge": "-"}, "code_challenge must be"),
        ({"response_type": "token"}, "response_type must be code"),
    ],
)
def test_an_authorization_request_without_pkce_or_from_an_unregistered_client_is_refused_without_redirect(
    issuer: LocalIssuer, changes: dict[str, str], why: str
) -> None:
    _, challenge = pkce()
    for answer in (
        requests.get(
            issuer.authorization_endpoint, params=authorize_fields(challenge, **changes), timeout=10
        ),
        requests.post(
            issuer.authorization_endpoint,
            data={**authorize_fields(challenge, **changes), "username": "alice"},
            allow_redirects=False,
            timeout=10,
        ),
    ):
        assert answer.status_code == 400
        assert "Location" not in answer.headers
        assert why in answer.text


def test_a_user_name_outside_the_pattern_gets_no_code(issuer: LocalIssuer) -> None:
    _, challenge = pkce()
    answer = requests.post(
        issuer.authorization_endpoint,
        data={**authorize_fields(challenge), "username": "<script>"},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 400
    assert "Location" not in answer.headers
    assert "<script>" not in answer.text  # escaped if shown at all


def test_an_expired_code_is_refused() -> None:
    codes = AuthorizationCodes(lifetime=0)
    codes.register(CLIENT, [REDIRECT])
    verifier, challenge = pkce()
    request = codes.authorization_request(authorize_fields(challenge))
    code = codes.issue(request, "alice")
    form = {"code": code, "client_id": CLIENT, "redirect_uri": REDIRECT, "code_verifier": verifier}
    with pytest.raises(AuthorizationRefused, match="expired"):
        codes.redeem(form)
