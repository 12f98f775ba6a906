"""The API's one access check: who may act on which account, decided before anything else."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hybrid_counter.api.access import ROUTE_ACCESS, AccessPolicy, token_scopes
from hybrid_counter.api.app import build_app
from tests.conftest import load_event
from tests.unit.test_api_validation import RecordingService

POLICY = AccessPolicy(mode="jwt", account_claim="account_id", operator_scope="hc/operator")


def jwt_context(
    account: str | None = None, scope: str | None = None, scopes: list[str] | None = None
) -> dict:
    claims: dict[str, Any] = {"iss": "https://issuer.example/", "exp": "1999999999"}
    if account is not None:
        claims["account_id"] = account
    if scope is not None:
        claims["scope"] = scope
    return {"jwt": {"claims": claims, "scopes": scopes}}


def call(event_name: str, authorizer: dict | None, policy: AccessPolicy = POLICY, **changes: Any):
    service = RecordingService()
    app = build_app(lambda: service, policy)  # type: ignore[arg-type, return-value]
    event = load_event(event_name)
    event["requestContext"].pop("authorizer", None)
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    event.update(changes)
    response = app.resolve(event, None)  # type: ignore[arg-type]
    body = json.loads(response["body"]) if response.get("body") else None
    return response["statusCode"], body, service.calls


def test_every_route_of_the_app_has_an_access_rule():
    app = build_app(RecordingService, POLICY)  # type: ignore[arg-type]
    routes = {
        (method, path)
        for path, item in json.loads(app.get_openapi_json_schema())["paths"].items()
        for method in (m.upper() for m in item)
    }
    assert routes == set(ROUTE_ACCESS)


def test_a_tenant_acts_on_its_own_account():
    # Given a token for the account the sample event names
    status, _, calls = call("api_get_usage.json", jwt_context("acct-demo"))
    assert status == 200
    assert calls == [("usage", ("acct-demo",))]


@pytest.mark.parametrize(
    "event_name",
    [
        "api_get_usage.json",
        "api_create_resource.json",
        "api_put_resource.json",
        "api_get_resource.json",
        "api_list_resources.json",
        "api_delete_resource.json",
    ],
)
def test_another_accounts_token_is_refused_before_validation_or_the_store(event_name):
    # Given a bad body as well: the answer is still 403, and the service is never called
    status, body, calls = call(event_name, jwt_context("someone-else"), body="{not json")
    assert (status, body["error"]["code"]) == (403, "Forbidden")
    assert calls == []


def test_a_token_without_the_account_claim_is_refused():
    status, body, calls = call("api_get_usage.json", jwt_context(None))
    assert (status, body["error"]["code"], calls) == (403, "Forbidden", [])


def test_setting_a_limit_needs_the_operator_scope_even_for_the_own_account():
    status, _, calls = call("api_put_limit.json", jwt_context("acct-demo"))
    assert (status, calls) == (403, [])
    status, _, calls = call("api_put_limit.json", jwt_context(scope="openid hc/operator"))
    assert status == 200
    assert calls == [("set_limit", ("acct-demo", 3))]


def test_an_operator_reads_any_usage_but_no_tenants_resources():
    assert call("api_get_usage.json", jwt_context(scope="hc/operator"))[0] == 200
    assert call("api_get_resource.json", jwt_context(scope="hc/operator"))[0] == 403


def test_no_identity_in_the_event_is_401_in_the_projects_error_body():
    status, body, calls = call("api_get_usage.json", None)
    assert (status, body["error"]["code"], calls) == (401, "Unauthorized", [])


def test_iam_mode_trusts_the_signed_caller_and_takes_the_account_from_the_path():
    iam = {"iam": {"accessKey": "AKIA", "userArn": "arn:aws:iam::1:user/backend"}}
    policy = AccessPolicy(mode="iam")
    assert call("api_get_usage.json", iam, policy)[0] == 200
    assert call("api_put_limit.json", iam, policy)[0] == 200
    assert call("api_get_usage.json", jwt_context("acct-demo"), policy)[0] == 401  # not an IAM caller


def test_the_description_is_public():
    status, body, _ = call(
        "api_get_usage.json",
        None,
        routeKey="GET /openapi.json",
        rawPath="/openapi.json",
        pathParameters=None,
        requestContext={
            **load_event("api_get_usage.json")["requestContext"],
            "http": {"method": "GET", "path": "/openapi.json"},
        },
    )
    assert status == 200
    assert body["paths"]["/openapi.json"]["get"]["security"] == []


@pytest.mark.parametrize(
    ("jwt", "expected"),
    [
        ({"claims": {"scope": "a b"}, "scopes": None}, {"a", "b"}),
        (
            {"claims": {"scp": "[a b]"}, "scopes": None},
            {"a", "b"},
        ),  # Okta's list claim, as API Gateway passes it
        ({"claims": {}, "scopes": ["c"]}, {"c"}),
    ],
)
def test_token_scopes_come_from_the_scopes_field_or_the_scope_claims(jwt, expected):
    assert token_scopes(jwt) == expected


def test_configuration_is_read_from_the_environment_on_first_use():
    policy = AccessPolicy.from_env({"AUTH_MODE": "iam", "ACCOUNT_CLAIM": "tenant", "OPERATOR_SCOPE": "ops"})
    assert policy == AccessPolicy("iam", "tenant", "ops")
    with pytest.raises(RuntimeError):
        AccessPolicy.from_env({"AUTH_MODE": "none"})
