"""The local gateway and issuer refuse what AWS refuses (or leaves undocumented), and log no secret.

A gateway with a JWT authorizer served by a local issuer, in this process, with a stub function
that records the events it gets: no DynamoDB, no execution environments. Requests are made with
http.client, which sends the request target and repeated headers exactly as written.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jwt
import pytest

from localrun.gateway.auth import GatewayAuth, RouteAuth
from localrun.gateway.jwt_authorizer import JwtAuthorizer
from localrun.gateway.oidc_issuer import LocalIssuer
from localrun.gateway.routes import Route, RouteTable
from localrun.gateway.server import HttpGateway
from localrun.gateway.token_cli import main as token_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

AUDIENCE = "hybrid-counter"
USAGE = "GET /accounts/{account_id}/usage"
NOT_FOUND = (404, {"message": "Not Found"})


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Api:
    gateway: HttpGateway
    issuer: LocalIssuer
    events: list[dict[str, Any]] = field(default_factory=list)

    def token(self, **claims: Any) -> str:
        return self.issuer.mint({"account_id": "acme", **claims})

    def call(self, target: str, headers: list[tuple[str, str]]) -> Answer:
        return request(self.gateway.port, "GET", target, headers)


def request(port: int, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b"") -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        if body or method == "POST":
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def port_of(issuer: LocalIssuer) -> int:
    return int(issuer.url.rsplit(":", 1)[1])


def bearer(token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {token}")]


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    running = LocalIssuer((AUDIENCE,)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def api(issuer: LocalIssuer) -> Iterator[Api]:
    authorizer = JwtAuthorizer("TokenAuthorizer", issuer.url, (AUDIENCE,))
    auth = GatewayAuth({USAGE: RouteAuth("JWT", authorizer)})
    events: list[dict[str, Any]] = []

    def invoke(function: str, event: dict[str, Any]) -> Any:
        events.append(event)
        return {"statusCode": 200, "body": "{}"}

    routes = RouteTable([Route("GET", "/accounts/{account_id}/usage", "ApiFunction")])
    gateway = HttpGateway(routes, invoke, api_id="refusals", port=0, auth=auth)
    gateway.start()
    yield Api(gateway, issuer, events)
    gateway.stop()


@pytest.fixture
def fresh(api: Api) -> Api:
    api.events.clear()
    return api


def assert_invalid_token(answer: Answer, description: str) -> None:
    assert (answer.status, answer.json()) == (401, {"message": "Unauthorized"})
    assert answer.headers["www-authenticate"] == (
        f'Bearer scope="" error="invalid_token" error_description="{description}"'
    )


# -- 15a: repeated Authorization headers ----------------------------------------------------------


@pytest.mark.parametrize("second", ["same token", "another account's token", "empty"])
def test_two_authorization_headers_are_joined_and_refused_as_an_invalid_token(
    fresh: Api, second: str
) -> None:
    # Given a valid token, sent in a first Authorization header
    token = fresh.token()
    other = {
        "same token": f"Bearer {token}",
        "another account's token": "Bearer " + fresh.token(account_id="b"),
    }
    headers = [("Authorization", f"Bearer {token}"), ("Authorization", other.get(second, ""))]

    # When a second Authorization header comes with it
    answer = fresh.call("/accounts/acme/usage", headers)

    # Then, as API Gateway joins repeated headers with a comma, the token is not a JWT: 401
    assert_invalid_token(answer, "the token is not a valid JWT")
    assert fresh.events == []
    # (and the same token alone passes)
    assert fresh.call("/accounts/acme/usage", bearer(token)).status == 200


# -- 15b: NumericDate claims that are strings -----------------------------------------------------


@pytest.mark.parametrize(("claim", "offset"), [("exp", 600), ("nbf", -60), ("iat", -60)])
def test_a_date_claim_given_as_a_numeric_string_is_refused(fresh: Api, claim: str, offset: int) -> None:
    # Given two tokens that differ only in the claim's JSON type (number, or a string of digits)
    value = int(time.time()) + offset
    as_number, as_string = fresh.token(**{claim: value}), fresh.token(**{claim: str(value)})

    # When each is used
    number_answer = fresh.call("/accounts/acme/usage", bearer(as_number))
    string_answer = fresh.call("/accounts/acme/usage", bearer(as_string))

    # Then the number passes and the string is refused (RFC 7519: a NumericDate is a JSON number)
    assert number_answer.status == 200
    assert_invalid_token(string_answer, f"the token's {claim} claim is not a number")
    assert len(fresh.events) == 1


# -- 15d: empty and dot path segments ------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "//accounts/acme/usage",
        "///accounts/acme/usage",
        "/accounts//acme/usage",
        "/accounts/acme//usage",
        "/accounts/acme/usage/",
        "/accounts/./usage",
        "/accounts/../usage",
        "/accounts/%2e%2e/usage",
        "/accounts/%2E/usage",
        "/accounts/acme/../acme/usage",
    ],
)
def test_a_path_with_an_empty_or_dot_segment_matches_no_route(fresh: Api, target: str) -> None:
    # Given a valid token for the route the path would name once normalised
    headers = bearer(fresh.token())

    # When the path has an empty, `.` or `..` segment
    answer = fresh.call(target, headers)

    # Then no route matches: API Gateway's 404, and the function is not called
    assert (answer.status, answer.json()) == NOT_FOUND
    assert answer.headers["apigw-requestid"]
    assert fresh.events == []
    assert fresh.call("/accounts/acme/usage", headers).status == 200  # the route itself answers


# -- 15f: secrets in log lines -------------------------------------------------------------------

SECRET_QUERY = "access_token={0}1&ID_TOKEN={0}2&Code={0}3&client_secret={0}4&password={0}5&token={0}6&limit=5"


def test_no_token_or_secret_reaches_the_gateway_or_issuer_logs(
    fresh: Api, caplog: pytest.LogCaptureFixture
) -> None:
    # Given every log line of the gateway and the issuer, at DEBUG
    caplog.set_level(logging.DEBUG, logger="localrun")
    token = fresh.token()
    secret = "s3cr3t-value"
    query = SECRET_QUERY.format(secret)

    # When requests carry secrets in their query, Authorization and X-Amz-Security-Token
    headers = [*bearer(token), ("X-Amz-Security-Token", f"{secret}7")]
    assert fresh.call(f"/accounts/acme/usage?{query}", headers).status == 200
    assert fresh.call(f"/nowhere?{query}", headers).status == 404
    assert fresh.call(f"/accounts/acme/usage?{query}", [("Authorization", f"Bearer {secret}8")]).status == 401
    request(port_of(fresh.issuer), "GET", f"/.well-known/jwks.json?{query}", headers)
    request(port_of(fresh.issuer), "POST", f"/token?{query}", headers, b"claims=%7B%22iss%22%3Anull%7D")

    # Then the lines say what was asked, with every secret value replaced
    lines = [record.getMessage() for record in caplog.records]
    assert any("/accounts/acme/usage?" in line and "limit=5" in line for line in lines), lines
    leaked = [line for line in lines if secret in line or token in line]
    assert leaked == []


# -- 15g: claims passed to the function -----------------------------------------------------------


def test_null_claims_are_left_out_and_the_others_passed_as_strings(fresh: Api) -> None:
    # Given a token with a null claim, a number, a boolean and a list
    token = fresh.token(email=None, level=3, admin=False, groups=["a", "b"])

    # When it is used
    assert fresh.call("/accounts/acme/usage", bearer(token)).status == 200

    # Then the function sees the claims as API Gateway passes them: null ones omitted
    (event,) = fresh.events
    claims = event["requestContext"]["authorizer"]["jwt"]["claims"]
    assert "email" not in claims
    assert (claims["level"], claims["admin"], claims["groups"]) == ("3", "false", "[a b]")
    assert claims["account_id"] == "acme"


# -- 15e: the issuer's token endpoint -------------------------------------------------------------


def token_request(issuer: LocalIssuer, body: bytes, headers: list[tuple[str, str]] | None = None) -> Answer:
    headers = headers or [("Content-Type", "application/x-www-form-urlencoded")]
    return request(port_of(issuer), "POST", "/token", headers, body)


def form(**fields: str) -> bytes:
    return urlencode(fields).encode()


def assert_invalid_request(answer: Answer, mentions: str) -> None:
    assert answer.status == 400, answer.body
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()
    assert error["error"] == "invalid_request"
    assert mentions in error["error_description"]


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("iss", "https://elsewhere.example/"),
        ("aud", "another-api"),
        ("exp", 4_000_000_000),
        ("nbf", 0),
        ("iat", 0),
        ("jti", "chosen"),
        ("scope", "hybrid-counter/operator"),  # the scope field's
    ],
)
def test_the_token_endpoint_refuses_claims_the_issuer_sets(
    issuer: LocalIssuer, claim: str, value: object
) -> None:
    # When a client asks for a token with a registered claim the issuer owns
    answer = token_request(issuer, form(claims=json.dumps({"account_id": "acme", claim: value})))

    # Then it is refused (the lifetime comes from expires_in, capped at 24 h)
    assert_invalid_request(answer, claim)


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        pytest.param(form(claims='{"iss": null}'), "iss", id="iss-null"),
        pytest.param(form(claims='{"sub": null}'), "sub", id="sub-null"),
        pytest.param(form(claims='{"client_id": 7}'), "client_id", id="client_id-number"),
        pytest.param(form(claims="[1, 2]"), "claims", id="claims-a-list"),
        pytest.param(form(claims="null"), "claims", id="claims-null"),
        pytest.param(form(claims="{not json"), "claims", id="claims-not-json"),
        pytest.param(form(claims='{"n": NaN}'), "claims", id="claims-NaN"),
        pytest.param(form(claims="[" * 100_000 + "]" * 100_000), "claims", id="claims-nested-100000-deep"),
        pytest.param(form(expires_in="soon"), "expires_in", id="expires_in-not-a-number"),
        pytest.param(form(expires_in="0"), "expires_in", id="expires_in-0"),
        pytest.param(form(expires_in=str(25 * 3600)), "expires_in", id="expires_in-25h"),
        pytest.param(b"claims=%7B%7D&claims=%7B%7D", "claims", id="claims-twice"),
        pytest.param(b"\xff\xfe=\xff", "UTF-8", id="form-not-utf8"),
    ],
)
def test_the_token_endpoint_answers_a_malformed_request_with_a_400(
    issuer: LocalIssuer, body: bytes, mentions: str
) -> None:
    assert_invalid_request(token_request(issuer, body), mentions)


@pytest.mark.parametrize("length", ["many", "-1"])
def test_the_token_endpoint_answers_a_bad_content_length_with_a_400(issuer: LocalIssuer, length: str) -> None:
    answer = token_request(issuer, b"", [("Content-Length", length)])
    assert_invalid_request(answer, "Content-Length")


def test_the_token_endpoint_still_issues_tokens_with_extra_claims(issuer: LocalIssuer) -> None:
    # When a client asks for a token with its own claims, a subject and a scope
    fields = form(claims='{"account_id": "acme", "sub": "me", "tier": null}', scope="a b", expires_in="600")
    answer = token_request(issuer, fields)

    # Then it gets one, with the issuer's registered claims and its own
    assert answer.status == 200, answer.body
    token = answer.json()["access_token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["iss"], claims["aud"], claims["exp"] - claims["iat"]) == (issuer.url, AUDIENCE, 600)
    assert (claims["account_id"], claims["sub"], claims["scope"], claims["tier"]) == (
        "acme",
        "me",
        "a b",
        None,
    )


def write_state(path: Path, issuer: LocalIssuer) -> Path:
    auth = {
        "mode": "jwt",
        "issuer": issuer.url,
        "audiences": [AUDIENCE],
        "token_endpoint": issuer.token_endpoint,
        "account_claim": "account_id",
        "operator_scope": "hybrid-counter/operator",
    }
    path.write_text(json.dumps({"auth": auth}))
    return path


def test_hybrid_counter_token_keeps_working_and_says_why_the_issuer_refused(
    issuer: LocalIssuer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = write_state(tmp_path / "runtime.json", issuer)

    assert token_cli(["--account", "acme", "--claim", "tier=gold", "--state", str(state)]) == 0
    tenant = jwt.decode(capsys.readouterr().out.strip(), options={"verify_signature": False})
    assert (tenant["account_id"], tenant["sub"], tenant["tier"]) == ("acme", "local-tenant-acme", "gold")

    assert token_cli(["--operator", "--state", str(state)]) == 0
    operator = jwt.decode(capsys.readouterr().out.strip(), options={"verify_signature": False})
    assert (operator["scope"], operator["sub"]) == ("hybrid-counter/operator", "local-operator")

    assert token_cli(["--account", "acme", "--claim", "exp=4000000000", "--state", str(state)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "exp" in captured.err


def test_hybrid_counter_token_mints_an_organization_administrators_token(
    issuer: LocalIssuer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a running make dev's state (with the template's OrgClaim)
    state = write_state(tmp_path / "runtime.json", issuer)
    described = json.loads(state.read_text())
    described["auth"] |= {"org_claim": "https://example.com/org"}
    state.write_text(json.dumps(described))
    # When an org admin's token is asked for
    assert token_cli(["--org", "widgets", "--state", str(state)]) == 0
    admin = jwt.decode(capsys.readouterr().out.strip(), options={"verify_signature": False})
    # Then it carries the claim naming the organization, and no scope and no account: the claim
    # alone makes the organization's administrator (issue 24)
    assert (admin["https://example.com/org"], admin["sub"]) == ("widgets", "local-org-admin-widgets")
    assert "scope" not in admin
    assert "account_id" not in admin
    # (an extra scope is still the caller's to ask for)
    assert token_cli(["--org", "widgets", "--scope", "api/org-admin", "--state", str(state)]) == 0
    admin = jwt.decode(capsys.readouterr().out.strip(), options={"verify_signature": False})
    assert (admin["https://example.com/org"], admin["scope"]) == ("widgets", "api/org-admin")
    # And --org is one identity among --account and --operator, not beside them
    with pytest.raises(SystemExit):
        token_cli(["--org", "widgets", "--operator", "--state", str(state)])
