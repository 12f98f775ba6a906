"""The API's one access check: who may act on which account, decided before anything else."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from hybrid_counter.api.access import ROUTE_ACCESS, Access, AccessPolicy, token_scopes
from hybrid_counter.api.app import build_app
from hybrid_counter.api.console_routes import CONSOLE_ROUTES
from tests.conftest import load_event
from tests.unit.api_routes import event_for, every_route, route_id
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
    # (the console's page and files are routes with a rule, outside the API's contract)
    assert routes == set(ROUTE_ACCESS) - CONSOLE_ROUTES


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
    # API Gateway checked the route's scope and filled `scopes`: the function trusts that alone
    status, _, calls = call("api_put_limit.json", jwt_context(scopes=["openid", "hc/operator"]))
    assert status == 200
    assert calls == [("set_limit", ("acct-demo", 3))]


def test_an_operator_reads_any_accounts_limits_but_not_its_usage_route_or_resources():
    assert call("api_get_limits.json", jwt_context(scopes=["hc/operator"]))[0] == 200
    # The tenant routes grant no operator powers, whatever the token holds
    assert call("api_get_usage.json", jwt_context(scopes=["hc/operator"]))[0] == 403
    assert call("api_get_resource.json", jwt_context(scopes=["hc/operator"]))[0] == 403


@pytest.mark.parametrize(
    "authorizer",
    [
        # What a tenant can put in its own token: only API Gateway's `scopes` grant the scope
        jwt_context("tenant-b", scope="hc/operator"),
        jwt_context("tenant-b", scope="[hc/operator]"),
        {"jwt": {"claims": {"account_id": "tenant-b", "scp": "[x hc/operator]"}, "scopes": None}},
        {"jwt": {"claims": {"account_id": "tenant-b", "scp": ["hc/operator"]}, "scopes": None}},
        # and scopes that merely resemble it
        jwt_context("tenant-b", scopes=["xhc/operator"]),
        jwt_context("tenant-b", scopes=["hc/operator/x"]),
        jwt_context("tenant-b", scopes=["HC/OPERATOR"]),
        jwt_context("tenant-b", scopes=["hc/operator "]),
        jwt_context("tenant-b", scopes=["x hc/operator"]),
        {"jwt": {"claims": {"account_id": "tenant-b"}, "scopes": "hc/operator"}},
    ],
)
def test_no_crafted_scope_opens_an_operator_route_or_another_tenants_usage(authorizer):
    # Given a token of tenant-b that is not API Gateway's operator
    # When it asks for another account's usage and limits, and to set a limit
    usage = call("api_get_usage.json", authorizer)
    limits = call("api_get_limits.json", authorizer)
    put = call("api_put_limit.json", authorizer)
    # Then every answer is 403 and nothing is read or written
    assert [usage[0], limits[0], put[0]] == [403, 403, 403]
    assert usage[2] == limits[2] == put[2] == []


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        (None, "has no account_id claim"),
        (123, "is not a string"),
        (True, "is not a string"),
        (["acct-demo"], "is not a string"),
        ({"id": "acct-demo"}, "is not a string"),
        ("", "is not an account id"),
        (" acct-demo", "is not an account id"),
        ("acct-demo/x", "is not an account id"),
        ("[acct-demo]", "is not an account id"),
        ("ACCT-DEMO", "may not act on that account"),
        ("acct-demO", "may not act on that account"),
    ],
)
def test_an_account_claim_that_is_not_exactly_the_accounts_id_is_refused(claim, why):
    authorizer = {"jwt": {"claims": {"iss": "x", "account_id": claim}, "scopes": None}}
    status, body, calls = call("api_get_usage.json", authorizer)
    assert (status, body["error"]["code"], calls) == (403, "Forbidden", [])
    assert why in body["error"]["message"]


def _bearer(payload: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"Bearer {part({'alg': 'RS256', 'kid': 'k'})}.{part(payload)}.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("in_token", "status"),
    [("acct-demo", 200), (123, 403), (True, 403), (None, 403), (["acct-demo"], 403), ("other", 403)],
)
def test_the_account_claim_must_be_a_json_string_in_the_token_itself(in_token, status):
    # Given API Gateway's stringified claims naming the account (as it passes 123 as "123")
    claims = {"iss": "x", "account_id": "acct-demo"}
    token = {"iss": "x", "account_id": in_token}
    headers = {**load_event("api_get_usage.json")["headers"], "authorization": _bearer(token)}
    # When the request's own token holds the claim with another JSON type
    result = call("api_get_usage.json", {"jwt": {"claims": claims, "scopes": None}}, headers=headers)
    # Then only a JSON string is an account id
    assert result[0] == status


def test_an_unreadable_token_in_the_request_is_refused():
    headers = {"authorization": "Bearer not-a-jwt"}
    result = call("api_get_usage.json", jwt_context("acct-demo"), headers=headers)
    assert result[0] == 403


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
        ({"claims": {"scope": "a b"}, "scopes": None}, set()),  # claims are never parsed for scopes
        ({"claims": {"scp": "[a b]"}, "scopes": None}, set()),
        ({"claims": {}, "scopes": ["c", "d e"]}, {"c", "d e"}),  # exactly what API Gateway verified
        ({"claims": {}, "scopes": "c"}, set()),
    ],
)
def test_token_scopes_are_only_those_api_gateway_verified(jwt, expected):
    assert token_scopes(jwt) == expected


def test_configuration_is_read_from_the_environment_on_first_use():
    policy = AccessPolicy.from_env({"AUTH_MODE": "iam", "ACCOUNT_CLAIM": "tenant", "OPERATOR_SCOPE": "ops"})
    assert policy == AccessPolicy("iam", "tenant", "ops")
    with pytest.raises(RuntimeError):
        AccessPolicy.from_env({"AUTH_MODE": "none"})


# ---- organizations ------------------------------------------------------------------------------
ORG_POLICY = AccessPolicy(
    mode="jwt", account_claim="account_id", operator_scope="hc/operator", org_claim="org_id"
)
ORG_READS = ["GET /orgs/{org_id}", "GET /orgs/{org_id}/usage", "GET /orgs/{org_id}/limits/history"]
ORG_WRITES = [
    "PUT /orgs/{org_id}",
    "DELETE /orgs/{org_id}",
    "PUT /orgs/{org_id}/limits/{kind}",
    "DELETE /orgs/{org_id}/limits/{kind}",
    "PUT /orgs/{org_id}/accounts/{account_id}",
    "DELETE /orgs/{org_id}/accounts/{account_id}",
]


def org_call(route_key: str, authorizer: dict | None, policy: AccessPolicy = ORG_POLICY, **headers: str):
    """The route's valid request about organization org-demo (tests/unit/api_routes.py), as this
    caller: (status, body, what was asked of the service)."""
    route = next(r for r in every_route() if route_id(r) == route_key)
    event = event_for(route)
    event["requestContext"].pop("authorizer", None)
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    event["headers"].update(headers)
    service = RecordingService()
    response = build_app(lambda: service, policy).resolve(event, None)  # type: ignore[arg-type, return-value]
    body = json.loads(response["body"]) if response.get("body") else None
    return response["statusCode"], body, service.calls


def org_admin(org: Any, scopes: list[str] | None = None, **claims: Any) -> dict:
    """A token's authorizer context as API Gateway builds it on the organization reads, routes
    without scopes (`scopes` null), with the org claim naming ``org`` (left out when None)."""
    every = {"iss": "x", **claims} if org is None else {"iss": "x", "org_id": org, **claims}
    return {"jwt": {"claims": every, "scopes": scopes}}


def with_scope(scope: Any) -> dict:
    """A token with no org claim whose `scope` claim API Gateway passed as ``scope``, on a route
    without scopes (`jwt.scopes` null)."""
    return org_admin(None, scope=scope)


def test_the_organization_routes_are_those_of_the_issue():
    # Given the access table, Then it has the nine organization routes, reads open to org admins
    org_routes = {f"{m} {p}": access for (m, p), access in ROUTE_ACCESS.items() if p.startswith("/orgs")}
    assert {key for key, access in org_routes.items() if access is Access.ORG_READER} == set(ORG_READS)
    assert {key for key, access in org_routes.items() if access is Access.OPERATOR} == set(ORG_WRITES)


@pytest.mark.parametrize("route_key", ORG_READS + ORG_WRITES)
def test_an_operator_may_call_every_organization_route(route_key):
    # Given the operator scope API Gateway verified (no org claim at all)
    status, _, calls = org_call(route_key, jwt_context(scopes=["openid", "hc/operator"]))
    # Then the route answers, having asked the service
    assert status < 300, route_key
    assert calls[0][1][0] == "org-demo"


@pytest.mark.parametrize("route_key", ORG_READS)
@pytest.mark.parametrize(
    "authorizer",
    [
        pytest.param(org_admin("org-demo"), id="the claim alone"),
        # a token with the org-admin scope of earlier deployments as well: still its administrator
        pytest.param(org_admin("org-demo", scope="hybrid-counter/org-admin"), id="the claim and a scope"),
        pytest.param(org_admin("org-demo", scopes=["hybrid-counter/org-admin"]), id="a route with scopes"),
    ],
)
def test_the_organizations_administrator_reads_it_with_the_claim_alone(route_key, authorizer):
    # Given a token whose org claim names the path's organization (issue 24: no scope needed)
    status, _, calls = org_call(route_key, authorizer)
    # Then it reads it
    assert status == 200
    assert calls[0][1][0] == "org-demo"


@pytest.mark.parametrize("route_key", ORG_READS)
@pytest.mark.parametrize(
    "scope",
    ["hc/operator", "openid hc/operator", "hc/operator openid", "a hc/operator b", "hc/operator hc/operator"],
)
def test_an_operator_is_told_apart_by_the_scope_claim_on_the_organization_reads(route_key, scope):
    # Given a token with no org claim whose `scope` claim is a space-delimited string holding the
    # operator scope, on a route without scopes (API Gateway passes `jwt.scopes` as null there)
    status, _, calls = org_call(route_key, with_scope(scope))
    # Then it reads any organization
    assert status == 200
    assert calls[0][1][0] == "org-demo"


@pytest.mark.parametrize("route_key", ORG_READS)
@pytest.mark.parametrize(
    ("authorizer", "why"),
    [
        # another organization's administrator, and ids that only resemble the organization's
        (org_admin("org-other"), "may not read that organization"),
        (org_admin("ORG-DEMO"), "may not read that organization"),
        (org_admin("org-demO"), "may not read that organization"),
        (org_admin(" org-demo"), "is not an organization id"),
        (org_admin("org-demo "), "is not an organization id"),
        (org_admin("[org-demo]"), "is not an organization id"),
        (org_admin(["org-demo"]), "is not a string"),
        (org_admin(123), "is not a string"),
        (org_admin(None), "has no org_id claim"),
        # a tenant (of any account), even one whose account is named like the organization
        (jwt_context("acct-demo"), "has no org_id claim"),
        ({"jwt": {"claims": {"account_id": "org-demo"}, "scopes": None}}, "has no org_id claim"),
        # the org-admin scope of earlier deployments, without the claim
        (with_scope("hybrid-counter/org-admin"), "has no org_id claim"),
        (org_admin(None, scopes=["hybrid-counter/org-admin"]), "has no org_id claim"),
    ],
)
def test_no_other_token_reads_an_organization(route_key, authorizer, why):
    # When another caller asks for the organization
    status, body, calls = org_call(route_key, authorizer)
    # Then it is refused, saying why, and nothing is read
    assert (status, body["error"]["code"], calls) == (403, "Forbidden", [])
    assert why in body["error"]["message"]


@pytest.mark.parametrize("route_key", ORG_READS)
@pytest.mark.parametrize(
    "authorizer",
    [
        # a list claim as API Gateway stringifies it (a list and a crafted string look alike)
        pytest.param(with_scope("[hc/operator]"), id="stringified list"),
        pytest.param(with_scope("[openid hc/operator]"), id="stringified list, last"),
        pytest.param(with_scope("[openid hc/operator profile]"), id="stringified list, in the middle"),
        pytest.param(with_scope("[hc/operator"), id="opening bracket"),
        pytest.param(with_scope("hc/operator]"), id="closing bracket"),
        pytest.param(with_scope(["hc/operator"]), id="a list, not a string"),
        # scp is never read, in any form
        pytest.param(org_admin(None, scp="hc/operator"), id="scp string"),
        pytest.param(org_admin(None, scp="[hc/operator]"), id="scp stringified list"),
        pytest.param(org_admin(None, scp=["hc/operator"]), id="scp list"),
        # scopes that only resemble it, or not split on spaces
        pytest.param(with_scope("hc/operatorx"), id="longer"),
        pytest.param(with_scope("xhc/operator"), id="prefixed"),
        pytest.param(with_scope("hc/operator/x"), id="a sub-scope"),
        pytest.param(with_scope("HC/OPERATOR"), id="case"),
        pytest.param(with_scope("openid,hc/operator"), id="comma"),
        pytest.param(with_scope("openid\thc/operator"), id="tab"),
        pytest.param(with_scope(""), id="empty"),
        # where API Gateway filled `jwt.scopes` (a route with scopes), that list alone decides
        pytest.param(org_admin(None, scopes=["openid"], scope="hc/operator"), id="scopes without it"),
        pytest.param(org_admin(None, scopes=[], scope="hc/operator"), id="empty scopes"),
        pytest.param(org_admin(None, scopes="hc/operator"), id="scopes not a list"),  # type: ignore[arg-type]
    ],
)
def test_no_other_scope_makes_an_operator_of_the_organization_reads(route_key, authorizer):
    # When a token with no org claim and no operator scope in the one form read asks
    status, body, calls = org_call(route_key, authorizer)
    # Then it is refused as any other caller without the claim, and nothing is read
    assert (status, body["error"]["code"], calls) == (403, "Forbidden", [])
    assert "has no org_id claim" in body["error"]["message"]


@pytest.mark.parametrize(
    ("in_token", "status"),
    [
        ("hc/operator", 200),
        ("openid hc/operator", 403),  # another value than the authorizer's
        (["hc/operator"], 403),  # a list API Gateway would have stringified
        (None, 403),
        ("[hc/operator]", 403),
    ],
)
def test_the_scope_claim_must_be_that_json_string_in_the_token_itself(in_token, status):
    # Given API Gateway's claims with the operator scope as a plain string
    token = {"iss": "x"} if in_token is None else {"iss": "x", "scope": in_token}
    # When the request's own token (API Gateway verified that very header) holds another value
    result = org_call("GET /orgs/{org_id}/usage", with_scope("hc/operator"), authorization=_bearer(token))
    # Then only the same JSON string makes an operator
    assert result[0] == status


@pytest.mark.parametrize("route_key", ORG_WRITES)
def test_an_organizations_administrator_changes_nothing(route_key):
    # Given the organization's own administrator, with or without the old org-admin scope, a
    # tenant of a member account, and a token whose operator scope is only in its `scope` claim
    # (API Gateway refuses all of them on these routes; the function does too: only `jwt.scopes`)
    for authorizer in (
        org_admin("org-demo"),
        org_admin("org-demo", scope="hybrid-counter/org-admin"),
        org_admin("org-demo", scopes=["hybrid-counter/org-admin"]),
        jwt_context("acct-demo"),
        with_scope("hc/operator"),
    ):
        status, body, calls = org_call(route_key, authorizer)
        # Then every write is refused: writes are the operators'
        assert (status, body["error"]["code"], calls) == (403, "Forbidden", []), (route_key, authorizer)


@pytest.mark.parametrize(
    ("route_key", "event_name"),
    [
        ("GET /accounts/{account_id}/limits", "api_get_limits.json"),
        ("PUT /accounts/{account_id}/limit", "api_put_limit.json"),
        ("GET /accounts/{account_id}/usage", "api_get_usage.json"),
    ],
)
def test_the_scope_claim_is_read_on_the_organization_reads_only(route_key, event_name):
    # Given a token whose `scope` claim holds the operator scope as a plain string, where
    # API Gateway passed no verified scopes
    authorizer = jwt_context("someone-else", scope="hc/operator")
    # When it calls an operator route or another account's tenant route
    status, _, calls = call(event_name, authorizer, ORG_POLICY)
    # Then it is no operator there
    assert (status, calls) == (403, []), route_key


@pytest.mark.parametrize(("in_token", "status"), [("org-demo", 200), (123, 403), (None, 403), ("other", 403)])
def test_the_org_claim_must_be_a_json_string_in_the_token_itself(in_token, status):
    # Given API Gateway's stringified claims naming the organization
    token = {"iss": "x", "org_id": in_token}
    # When the request's own token holds the claim with another JSON type (or another value)
    result = org_call("GET /orgs/{org_id}/usage", org_admin("org-demo"), authorization=_bearer(token))
    # Then only a JSON string naming the organization is its administrator
    assert result[0] == status


def test_iam_mode_admits_a_signed_caller_on_every_organization_route():
    iam = {"iam": {"accessKey": "AKIA", "userArn": "arn:aws:iam::1:user/backend"}}
    policy = AccessPolicy(mode="iam")
    for route_key in ORG_READS + ORG_WRITES:
        assert org_call(route_key, iam, policy)[0] < 300, route_key
    assert org_call("GET /orgs/{org_id}", org_admin("org-demo"), policy)[0] == 401  # not an IAM caller


@pytest.mark.parametrize("route_key", ORG_READS)
@pytest.mark.parametrize("authorizer", [None, {}, {"jwt": None}, {"jwt": {"scopes": None}}])
def test_no_identity_on_an_organization_read_is_401(route_key, authorizer):
    status, body, calls = org_call(route_key, authorizer)
    assert (status, body["error"]["code"], calls) == (401, "Unauthorized", [])


def test_the_org_claim_is_read_from_the_environment():
    assert AccessPolicy.from_env({"ORG_CLAIM": "https://x/org"}).org_claim == "https://x/org"
    assert AccessPolicy.from_env({}).org_claim == "org_id"
    # the org-admin scope of earlier deployments is no setting of the function's
    assert AccessPolicy.from_env({"ORG_ADMIN_SCOPE": "api/org"}) == AccessPolicy()
