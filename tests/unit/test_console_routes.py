"""The operator console's routes (api/console_routes.py): the page and its files, public, under a
strict Content-Security-Policy, outside the API's OpenAPI contract."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from hybrid_counter.api.console_routes import ConsoleSettings, console_files
from tests.conftest import load_event
from tests.unit.api_routes import app_and_service

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE"
ENVIRONMENT = {
    "CONSOLE_ISSUER": ISSUER,
    "CONSOLE_CLIENT_ID": "console-client",
    "OPERATOR_SCOPE": "hc/operator",
    "CONSOLE_CONNECT_ORIGINS": "https://hc.auth.eu-west-1.amazoncognito.com",
}


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


def get(path: str, query: str = "", path_parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """A public GET as API Gateway hands it over: no authorizer at all."""
    route = "GET /console/{asset}" if path_parameters else "GET /console"
    event = load_event("api_get_console.json")
    event.update(routeKey=route, rawPath=path, rawQueryString=query)
    event["requestContext"].update(routeKey=route)
    event["requestContext"]["http"]["path"] = path
    event["queryStringParameters"] = dict(pair.split("=", 1) for pair in query.split("&")) if query else None
    event["pathParameters"] = path_parameters
    app, service = app_and_service()
    response: dict[str, Any] = app.resolve(event, None)  # type: ignore[arg-type]
    assert service.calls == []  # the console's routes never touch the store
    return response


def headers_of(response: dict[str, Any]) -> dict[str, str]:
    return {name.lower(): value for name, value in response["headers"].items()}


def test_the_policy_allows_this_origin_and_the_identity_provider_only() -> None:
    policy = ConsoleSettings.from_env(ENVIRONMENT).content_security_policy()
    directives = dict(part.split(" ", 1) for part in policy.split("; "))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["connect-src"] == (
        "'self' https://cognito-idp.eu-west-1.amazonaws.com https://hc.auth.eu-west-1.amazoncognito.com"
    )
    assert "unsafe" not in policy


def test_the_page_is_served_when_the_identity_provider_redirects_back_to_it() -> None:
    response = get("/console", "code=abc&state=xyz")
    headers = headers_of(response)
    assert response["statusCode"] == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["content-security-policy"] == ConsoleSettings.from_env().content_security_policy()
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert '<script type="module" src="console/app.js">' in response["body"]


def test_a_query_parameter_the_page_does_not_take_is_refused() -> None:
    response = get("/console", "verbose=1")
    assert response["statusCode"] == 400
    assert '"verbose"' in json.loads(response["body"])["error"]["message"]


def test_config_says_where_and_as_which_client_to_sign_in() -> None:
    response = get("/console/config.json", path_parameters={"asset": "config.json"})
    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {
        "issuer": ISSUER,
        "client_id": "console-client",
        "scope": "hc/operator",
    }


@pytest.mark.parametrize(
    ("asset", "status"), [("missing.js", 404), ("..%2Fapp.py", 400), ("index.HTML", 400)]
)
def test_only_the_console_s_own_files_are_served(asset: str, status: int) -> None:
    response = get(f"/console/{asset}", path_parameters={"asset": asset})
    assert response["statusCode"] == status


def test_the_console_is_not_in_the_api_s_contract() -> None:
    app, _ = app_and_service()
    paths = json.loads(app.get_openapi_json_schema())["paths"]
    assert not [path for path in paths if path.startswith("/console")]


def test_every_file_the_page_and_its_modules_load_is_served() -> None:
    served = console_files()
    page = served["index.html"].decode()
    wanted = set(re.findall(r'(?:src|href)="console/([^"]+)"', page))
    for name, body in served.items():
        if name.endswith(".js"):
            wanted |= set(re.findall(r'from "\./([^"]+)"', body.decode()))
    assert wanted
    assert wanted <= set(served), wanted - set(served)
    # No inline script or style anywhere: the policy would block it
    assert "<style" not in page
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []
    assert " style=" not in page
