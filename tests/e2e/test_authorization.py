"""Tenants touch only their own account, only operators change limits, and bad tokens get 401.

Over HTTP against the chosen target. The 401 cases that need a token signed by the issuer
itself (expired, not yet valid, another issuer or audience) run against the embedded runtime,
whose issuer's key the tests can use; a remote target reports them as skipped.
"""

from __future__ import annotations

import time
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.e2e.auth import ACCOUNT_CLAIM, OPERATOR_SCOPE, bearer
from tests.e2e.conftest import Target, eventually

pytestmark = pytest.mark.e2e

FORBIDDEN = {"error": {"code": "Forbidden", "message": "this caller may not act on that account"}}


def new_account(prefix: str = "authz") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def tenant(target: Target, account: str) -> dict[str, str]:
    assert target.tokens is not None
    return bearer(target.tokens.tenant_token(account))


def operator(target: Target) -> dict[str, str]:
    assert target.tokens is not None
    return bearer(target.tokens.operator())


def local_issuer(target: Target):
    if target.runtime is None:
        pytest.skip("needs the local issuer's signing key (embedded runtime)")
    return target.runtime.issuer


def snapshot(target: Target, account: str) -> tuple[dict, list]:
    """What the owner sees of its account: usage and every resource."""
    usage = target.call("GET", f"/accounts/{account}/usage")
    listing = target.call("GET", f"/accounts/{account}/resources?limit=100")
    assert (usage.status_code, listing.status_code) == (200, 200)
    return usage.json(), listing.json()["items"]


@pytest.fixture(scope="module")
def victim(target: Target) -> tuple[str, str]:
    """Account B with one resource that exists only there (shared: no test may change it)."""
    account = new_account("victim")
    created = target.call("PUT", f"/accounts/{account}/resources/only-in-b", {"name": "b's"})
    assert created.status_code == 201
    target.settle()

    def counted() -> None:  # remote targets: the stream path has caught up (locally: already)
        assert target.call("GET", f"/accounts/{account}/usage").json()["eventual"] == 1

    eventually(counted, timeout=60)
    return account, "only-in-b"


CROSS_ACCOUNT_REQUESTS = [
    ("GET", "/usage", None),
    ("GET", "/resources", None),
    ("GET", "/resources?limit=1&next_token=abc", None),
    ("POST", "/resources", {"name": "intruder"}),
    ("POST", "/resources", {"name": 42}),  # invalid as well: still 403, not 400
    ("PUT", "/resources/{existing}", {"name": "overwrite"}),
    ("PUT", "/resources/{missing}", {"name": "plant"}),
    ("PUT", "/resources/bad%20id", {"name": "plant"}),
    ("GET", "/resources/{existing}", None),
    ("GET", "/resources/{missing}", None),
    ("DELETE", "/resources/{existing}", None),
    ("DELETE", "/resources/{missing}", None),
    ("PUT", "/limit", {"limit": 1000}),
]


@pytest.mark.parametrize(("method", "suffix", "body"), CROSS_ACCOUNT_REQUESTS)
def test_a_tenant_gets_403_for_anything_about_another_account_and_nothing_changes(
    target: Target, victim: tuple[str, str], method: str, suffix: str, body: object
) -> None:
    # Given account B with a resource, and a tenant of account A
    account_b, existing = victim
    before = snapshot(target, account_b)
    intruder = tenant(target, new_account("intruder"))
    path = f"/accounts/{account_b}" + suffix.format(existing=existing, missing="never-created")

    # When A's token is used on B's account
    response = target.call(method, path, body, auth=intruder)

    # Then 403 with the error body (API Gateway's own body for the operator-only route)
    assert response.status_code == 403, response.text
    expected = {"message": "Forbidden"} if suffix == "/limit" else FORBIDDEN
    assert response.json() == expected
    # And B's account is exactly as it was
    target.settle()
    assert snapshot(target, account_b) == before


def test_the_answer_does_not_tell_whether_the_other_accounts_resource_exists(
    target: Target, victim: tuple[str, str]
) -> None:
    account_b, existing = victim
    intruder = tenant(target, new_account("intruder"))
    for method in ("GET", "DELETE"):
        answers = {
            (r.status_code, r.text)
            for r in (
                target.call(method, f"/accounts/{account_b}/resources/{existing}", auth=intruder),
                target.call(method, f"/accounts/{account_b}/resources/never-created", auth=intruder),
            )
        }
        assert len(answers) == 1, answers


def test_a_token_for_account_a_cannot_reach_a_resource_id_that_exists_only_in_b(
    target: Target, victim: tuple[str, str]
) -> None:
    account_b, existing = victim
    account_a = new_account("owner-a")
    # A asks for the id in its own account: it is not there (B's resource is not A's)
    response = target.call("GET", f"/accounts/{account_a}/resources/{existing}")
    assert response.status_code == 404
    assert target.call("DELETE", f"/accounts/{account_a}/resources/{existing}").status_code == 404
    # And B's resource is untouched
    assert target.call("GET", f"/accounts/{account_b}/resources/{existing}").json()["name"] == "b's"


def test_only_operators_change_limits_and_read_any_accounts_limits(target: Target) -> None:
    account = new_account("limits")
    own = tenant(target, account)
    # A tenant cannot change even its own limit, nor read the operators' view (API Gateway
    # refuses the missing scope)
    refused = target.call("PUT", f"/accounts/{account}/limit", {"limit": 7}, auth=own)
    assert (refused.status_code, refused.json()) == (403, {"message": "Forbidden"})
    refused = target.call("GET", f"/accounts/{account}/limits", auth=own)
    assert (refused.status_code, refused.json()) == (403, {"message": "Forbidden"})
    assert target.call("GET", f"/accounts/{account}/usage", auth=own).json()["limit"] == 100
    # An operator can, for any account, and reads its limits and usage on the operators' route
    changed = target.call("PUT", f"/accounts/{account}/limit", {"limit": 7}, auth=operator(target))
    assert (changed.status_code, changed.json()) == (200, {"account_id": account, "limit": 7})
    limits = target.call("GET", f"/accounts/{account}/limits", auth=operator(target))
    assert (limits.status_code, limits.json()["limit"]) == (200, 7)
    # The tenant's own route grants no operator powers
    assert target.call("GET", f"/accounts/{account}/usage", auth=operator(target)).status_code == 403


@pytest.mark.parametrize(
    "scope_claims",
    [
        {"scope": "[hybrid-counter/operator]"},
        {"scp": ["x hybrid-counter/operator"]},
        {"scp": "[hybrid-counter/operator]"},
        {"scope": "xhybrid-counter/operator"},
    ],
)
def test_no_crafted_scope_claim_makes_a_tenant_an_operator(
    target: Target, victim: tuple[str, str], scope_claims: dict
) -> None:
    # Given a tenant token whose scope claims only look like the operator's
    issuer = local_issuer(target)
    account_b, _ = victim
    token = issuer.mint({ACCOUNT_CLAIM: new_account("crafted"), **scope_claims})
    before = snapshot(target, account_b)
    # When it reads another tenant's usage and limits and sets a limit
    usage = target.call("GET", f"/accounts/{account_b}/usage", auth=bearer(token))
    limits = target.call("GET", f"/accounts/{account_b}/limits", auth=bearer(token))
    put = target.call("PUT", f"/accounts/{account_b}/limit", {"limit": 0}, auth=bearer(token))
    # Then the function refuses the tenant route and API Gateway the operator routes
    assert (usage.status_code, usage.json()) == (403, FORBIDDEN)
    assert (limits.status_code, put.status_code) == (403, 403)
    assert snapshot(target, account_b) == before


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        (None, "account_id claim"),  # AWS omits a null claim ("has no"); passed on, "is not a string"
        (123, "is not a string"),
        (True, "is not a string"),
        (["acme"], "is not an account id"),
        ("ACME/x", "is not an account id"),
    ],
)
def test_an_account_claim_that_is_not_an_account_id_is_refused_and_reads_nothing(
    target: Target, claim: object, why: str
) -> None:
    issuer = local_issuer(target)
    path_account = str(claim).lower() if claim is None or isinstance(claim, int) else "acme"
    token = issuer.mint({ACCOUNT_CLAIM: claim})
    response = target.call("GET", f"/accounts/{path_account}/usage", auth=bearer(token))
    assert response.status_code == 403
    assert why in response.json()["error"]["message"]


def test_an_operator_token_does_not_open_tenants_resources(target: Target, victim: tuple[str, str]) -> None:
    account_b, existing = victim
    for method, suffix, body in [
        ("GET", f"/resources/{existing}", None),
        ("GET", "/resources", None),
        ("POST", "/resources", {"name": "by-operator"}),
        ("DELETE", f"/resources/{existing}", None),
    ]:
        response = target.call(method, f"/accounts/{account_b}{suffix}", body, auth=operator(target))
        # (an operator's token names no account: the refusal says so)
        assert (response.status_code, response.json()["error"]["code"]) == (403, "Forbidden"), (
            method,
            suffix,
        )


def test_a_tenant_works_on_its_own_account(target: Target) -> None:
    account = new_account("own")
    own = tenant(target, account)
    created = target.call("POST", f"/accounts/{account}/resources", {"name": "mine"}, auth=own)
    assert created.status_code == 201
    resource_id = created.json()["resource_id"]
    assert target.call("GET", f"/accounts/{account}/resources/{resource_id}", auth=own).status_code == 200
    assert target.call("DELETE", f"/accounts/{account}/resources/{resource_id}", auth=own).status_code == 204


def test_the_api_description_is_public_and_documents_the_security_scheme(target: Target) -> None:
    response = target.call("GET", "/openapi.json", auth=None)
    assert response.status_code == 200
    spec = response.json()
    (scheme,) = spec["components"]["securitySchemes"].values()
    assert scheme["type"] == "http"
    assert scheme["scheme"] == "bearer"
    assert spec["paths"]["/openapi.json"]["get"]["security"] == []
    assert spec["paths"]["/accounts/{account_id}/limit"]["put"]["security"] == [
        {"bearerAuth": [OPERATOR_SCOPE]}
    ]


# -- 401: what API Gateway's JWT authorizer answers ---------------------------------------------


def assert_unauthorized(response, description: str | None) -> None:
    assert response.status_code == 401, response.text
    assert response.json() == {"message": "Unauthorized"}
    challenge = response.headers["www-authenticate"]
    if description is None:
        assert challenge == "Bearer"
    else:
        assert challenge == f'Bearer scope="" error="invalid_token" error_description="{description}"'


def foreign_key_token(account: str, issuer_url: str = "https://attacker.example/") -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {
        "iss": issuer_url,
        "aud": "hybrid-counter",
        ACCOUNT_CLAIM: account,
        "exp": int(time.time()) + 600,
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "not-the-issuers"})


def test_401_without_a_token_with_garbage_and_with_a_token_signed_by_another_key(target: Target) -> None:
    account = new_account("noauth")
    path = f"/accounts/{account}/resources"
    assert_unauthorized(target.call("POST", path, {"name": "x"}, auth=None), None)
    assert_unauthorized(target.call("POST", path, {"name": "x"}, auth={"Authorization": "Bearer"}), None)
    garbage = target.call("POST", path, {"name": "x"}, auth=bearer("not.a.jwt"))
    assert garbage.status_code == 401
    assert garbage.json() == {"message": "Unauthorized"}
    forged = target.call("POST", path, {"name": "x"}, auth=bearer(foreign_key_token(account)))
    assert forged.status_code == 401
    assert forged.json() == {"message": "Unauthorized"}
    # nothing was written by any of them
    assert target.call("GET", f"{path}?limit=100").json()["items"] == []


def test_401_for_a_token_signed_with_the_issuers_key_id_but_another_key(target: Target) -> None:
    issuer = local_issuer(target)
    account = new_account("wrongsig")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {
        "iss": issuer.url,
        "aud": issuer.audiences[0],
        ACCOUNT_CLAIM: account,
        "exp": int(time.time()) + 600,
    }
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": issuer.kid})
    response = target.call("GET", f"/accounts/{account}/usage", auth=bearer(token))
    assert_unauthorized(response, "the token signature is invalid")


@pytest.mark.parametrize(
    ("wrong", "description"),
    [
        ({"expires_in": -60}, "the token has expired"),
        ({"not_before": int(time.time()) + 3600}, "the token is not valid yet"),
        ({"issuer": "https://another-issuer.example/"}, "the token does not have a valid issuer"),
        ({"audience": "another-api"}, "the token does not have a valid audience"),
    ],
)
def test_401_for_tokens_of_the_issuer_that_are_expired_early_or_for_someone_else(
    target: Target, wrong: dict, description: str
) -> None:
    issuer = local_issuer(target)
    account = new_account("badtoken")
    token = issuer.mint({ACCOUNT_CLAIM: account}, **wrong)
    for method, suffix, body in [("GET", "/usage", None), ("POST", "/resources", {"name": "x"})]:
        response = target.call(method, f"/accounts/{account}{suffix}", body, auth=bearer(token))
        assert_unauthorized(response, description)
    assert target.call("GET", f"/accounts/{account}/resources").json()["items"] == []


def test_client_id_stands_in_for_a_missing_aud_as_with_cognito_access_tokens(target: Target) -> None:
    issuer = local_issuer(target)
    account = new_account("clientid")
    token = jwt.encode(
        {
            "iss": issuer.url,
            "client_id": issuer.audiences[0],
            ACCOUNT_CLAIM: account,
            "exp": int(time.time()) + 600,
        },
        issuer._key,
        algorithm="RS256",
        headers={"kid": issuer.kid},
    )
    assert target.call("GET", f"/accounts/{account}/usage", auth=bearer(token)).status_code == 200


def test_the_handler_sees_the_claims_and_scopes_in_the_payload_2_shape(target: Target, local_runtime) -> None:
    seen: list[dict] = []

    def capture(event, context, call_next):
        seen.append(event["requestContext"]["authorizer"])
        return call_next(event, context)

    account = new_account("shape")
    unwrap = local_runtime.wrap_function("ApiFunction", capture)
    try:
        assert target.call("GET", f"/accounts/{account}/usage").status_code == 200
        assert target.call("PUT", f"/accounts/{account}/limit", {"limit": 3}).status_code == 200
    finally:
        unwrap()
    tenant_view, operator_view = seen
    assert tenant_view["jwt"]["claims"][ACCOUNT_CLAIM] == account
    assert isinstance(tenant_view["jwt"]["claims"]["exp"], str)  # claims arrive as strings
    assert tenant_view["jwt"]["scopes"] is None  # the route has no authorization scopes
    assert operator_view["jwt"]["scopes"] == [OPERATOR_SCOPE]
