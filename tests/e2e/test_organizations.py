"""Organizations over HTTP (issue 24): a limit on the total of several accounts, who may read and
change an organization, and the answers of its routes, against the chosen target with real
tokens (locally: the embedded runtime's issuer).

- The walkthrough: a plan, an organization on it, two member accounts creating until the
  organization refuses (409 LimitExceeded with scope organization), the usage of the
  organization and of a member, the organization's history, a delete at one account freeing a
  unit for the other, membership refused to accounts with resources, deletion refused while the
  organization has members and allowed once it has none.
- Access: operators call every organization route; an organization's administrator (a token
  with its org claim and no scope, as issue 24 words it; the org-admin scope of earlier
  deployments beside the claim changes nothing) reads its own organization, usage and history
  and nothing else; a tenant, another organization's administrator, and crafted scope claims are
  refused (403), bad tokens are 401, unknown query parameters 400.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest

from localrun.gateway.token_cli import main as token_cli
from tests.e2e.auth import ORG_ADMIN_SCOPE, ORG_CLAIM, bearer
from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e

SEATS = "seats"
FORBIDDEN_BY_GATEWAY = {"message": "Forbidden"}
READS = ["", "/usage", "/limits/history"]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def as_operator(target: Target) -> dict[str, str]:
    assert target.tokens is not None
    return bearer(target.tokens.operator())


def as_tenant(target: Target, account: str) -> dict[str, str]:
    assert target.tokens is not None
    return bearer(target.tokens.tenant_token(account))


def as_org_admin(target: Target, org: str) -> dict[str, str]:
    assert target.tokens is not None
    return bearer(target.tokens.org_admin_token(org))


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str), body
    assert body["error"]["message"], body
    return dict(body["error"])


def create(target: Target, account: str, name: str, units: int = 1) -> Any:
    return target.call("POST", f"/accounts/{account}/kinds/{SEATS}/resources", {"name": name, "units": units})


def organization(target: Target, seats: int, *members: str, member_seats: int = 10) -> str:
    """A fresh organization on a fresh plan of ``seats`` seats, with these (empty) accounts as
    members, each on a plan of ``member_seats`` seats."""
    org_plan, member_plan, org = new_id("orgplan"), new_id("memberplan"), new_id("org")
    ok(target.call("PUT", f"/plans/{org_plan}", {"limits": {SEATS: seats}}))
    ok(target.call("PUT", f"/plans/{member_plan}", {"limits": {SEATS: member_seats}}))
    ok(target.call("PUT", f"/orgs/{org}", {"plan_id": org_plan}), 201)
    for account in members:
        ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": member_plan}))
        ok(target.call("PUT", f"/orgs/{org}/accounts/{account}"), 201)
    return org


def test_two_accounts_share_their_organizations_limit_over_http(target: Target) -> None:
    # Given a plan of 5 seats for an organization, and two members of 4 seats each
    first, second = new_id("member"), new_id("member")
    org_plan, member_plan, org = new_id("orgplan"), new_id("memberplan"), new_id("org")
    ok(target.call("PUT", f"/plans/{org_plan}", {"limits": {SEATS: 5}}))
    ok(target.call("PUT", f"/plans/{member_plan}", {"limits": {SEATS: 4}}))
    created = ok(target.call("PUT", f"/orgs/{org}", {"plan_id": org_plan}), 201)
    assert (created["org_id"], created["plan_id"], created["members"]) == (org, org_plan, 0)
    assert created["created_at"]
    assert ok(target.call("PUT", f"/orgs/{org}", {"plan_id": org_plan})) == created  # already so: 200
    for account in (first, second):
        ok(target.call("PUT", f"/accounts/{account}/plan", {"plan_id": member_plan}))
        joined = target.call("PUT", f"/orgs/{org}/accounts/{account}")
        assert ok(joined, 201) == {"org_id": org, "account_id": account}
    assert ok(target.call("PUT", f"/orgs/{org}/accounts/{first}")) == {"org_id": org, "account_id": first}
    assert ok(target.call("GET", f"/orgs/{org}"))["members"] == 2

    # When the first takes 3 seats and the second 2, one at a time
    for n in range(3):
        ok(create(target, first, f"a{n}"), 201)
    for n in range(2):
        ok(create(target, second, f"b{n}"), 201)
    # Then the organization is full: either account is refused by it, though each has room
    for account in (first, second):
        refused = error_of(create(target, account, "more"), 409, "LimitExceeded")
        assert (refused["scope"], refused["kind"], refused["limit"], refused["used"]) == (
            "organization",
            SEATS,
            5,
            5,
        )

    # And the organization's usage says so, with its members by use (counted by the stream path)
    target.settle()
    usage = ok(target.call("GET", f"/orgs/{org}/usage"))
    assert (usage["org_id"], usage["plan_id"], usage["members"]) == (org, org_plan, 2)
    seats = usage["kinds"][SEATS]
    assert (seats["limit"], seats["limit_source"], seats["used"], seats["remaining"]) == (5, "plan", 5, 0)
    assert seats["top_accounts"] == [{"account_id": first, "used": 3}, {"account_id": second, "used": 2}]
    assert ok(target.call("GET", f"/orgs/{org}/usage?top=1"))["kinds"][SEATS]["top_accounts"] == [
        {"account_id": first, "used": 3}
    ]
    assert ok(target.call("GET", f"/orgs/{org}/usage?top=0"))["kinds"][SEATS]["top_accounts"] == []
    # And a member's own usage shows its organization's room beside its own
    own = ok(target.call("GET", f"/accounts/{second}/usage"))
    assert own["org_id"] == org
    assert (own["kinds"][SEATS]["used"], own["kinds"][SEATS]["remaining"]) == (2, 2)
    assert own["kinds"][SEATS]["organization"] == {
        "org_id": org,
        "limit": 5,
        "limit_source": "plan",
        "used": 5,
        "remaining": 0,
    }

    # When the first account deletes a seat, Then the second can take that unit, and no more
    first_seats = ok(target.call("GET", f"/accounts/{first}/kinds/{SEATS}/resources"))["items"]
    resource_path = f"/accounts/{first}/kinds/{SEATS}/resources/{first_seats[0]['resource_id']}"
    ok(target.call("DELETE", resource_path), 204)
    ok(create(target, second, "b2"), 201)
    assert error_of(create(target, second, "b3"), 409, "LimitExceeded")["scope"] == "organization"

    # When an operator gives the organization a seat more (an override), then takes it back
    grown = target.call("PUT", f"/orgs/{org}/limits/{SEATS}", {"limit": 6})
    assert ok(grown) == {"org_id": org, "kind": SEATS, "limit": 6}
    ok(create(target, second, "b3"), 201)
    # (the second is now at its own limit: refused by its account)
    assert error_of(create(target, second, "b4"), 409, "LimitExceeded")["scope"] == "account"
    below = error_of(target.call("DELETE", f"/orgs/{org}/limits/{SEATS}"), 409, "LimitBelowUsage")
    assert below["kinds"] == [{"kind": SEATS, "limit": 5, "used": 6}]
    assert ok(target.call("DELETE", f"/orgs/{org}/limits/{SEATS}?force=true"), 204) is None
    assert ok(target.call("DELETE", f"/orgs/{org}/limits/{SEATS}"), 204) is None  # nothing to remove
    # Then the history has the creation and both changes, newest first, made by the operator
    history = ok(target.call("GET", f"/orgs/{org}/limits/history"))
    changes = [(item["what"], item["old"], item["new"], item["force"]) for item in history["items"]]
    assert changes == [
        ("override_removed", 6, None, True),
        ("override", None, 6, False),
        ("org_plan", None, org_plan, False),
    ]
    assert {item["org_id"] for item in history["items"]} == {org}
    (by,) = {item["by"] for item in history["items"]}  # the operator token's subject, each time
    assert by not in ("", "unknown")
    first_page = ok(target.call("GET", f"/orgs/{org}/limits/history?limit=1"))
    assert [item["what"] for item in first_page["items"]] == ["override_removed"]
    assert first_page["next_token"]
    filtered = ok(target.call("GET", f"/orgs/{org}/limits/history?kind={SEATS}"))["items"]
    assert [item["what"] for item in filtered] == ["override_removed", "override"]

    # And membership is refused to an account that holds resources, in or out
    outsider = new_id("outsider")
    ok(target.call("PUT", f"/accounts/{outsider}/plan", {"plan_id": member_plan}))
    ok(create(target, outsider, "o"), 201)
    error_of(target.call("PUT", f"/orgs/{org}/accounts/{outsider}"), 409, "AccountNotEmpty")
    error_of(target.call("DELETE", f"/orgs/{org}/accounts/{first}"), 409, "AccountNotEmpty")
    other_org = organization(target, 5)
    error_of(target.call("PUT", f"/orgs/{other_org}/accounts/{first}"), 409, "AccountInAnotherOrganization")
    # And an organization with members is not deleted
    error_of(target.call("DELETE", f"/orgs/{org}"), 409, "OrganizationNotEmpty")
    assert ok(target.call("GET", f"/orgs/{org}"))["members"] == 2

    # When every member empties its account and leaves
    for account in (first, second):
        for resource in ok(target.call("GET", f"/accounts/{account}/kinds/{SEATS}/resources"))["items"]:
            path = f"/accounts/{account}/kinds/{SEATS}/resources/{resource['resource_id']}"
            ok(target.call("DELETE", path), 204)
    target.settle()  # the stream path finishes the deletes: the accounts are empty
    for account in (first, second):
        assert ok(target.call("DELETE", f"/orgs/{org}/accounts/{account}"), 204) is None
        assert ok(target.call("DELETE", f"/orgs/{org}/accounts/{account}"), 204) is None  # idempotent
        assert "org_id" not in ok(target.call("GET", f"/accounts/{account}/usage"))
    # Then the organization is deleted, and is no more
    assert ok(target.call("DELETE", f"/orgs/{org}"), 204) is None
    error_of(target.call("GET", f"/orgs/{org}"), 404, "NotFound")
    error_of(target.call("DELETE", f"/orgs/{org}"), 404, "NotFound")
    error_of(target.call("GET", f"/orgs/{org}/usage"), 404, "NotFound")


def test_the_answers_about_an_organization_that_does_not_exist(target: Target) -> None:
    missing, account = new_id("missing"), new_id("acct")
    for method, suffix, body in [
        ("GET", "", None),
        ("DELETE", "", None),
        ("GET", "/usage", None),
        ("PUT", f"/limits/{SEATS}", {"limit": 3}),
        ("DELETE", f"/limits/{SEATS}", None),
        ("PUT", f"/accounts/{account}", None),
    ]:
        error_of(target.call(method, f"/orgs/{missing}{suffix}", body), 404, "NotFound")
    # A history of nothing is empty, and leaving an organization one is not in changes nothing
    assert ok(target.call("GET", f"/orgs/{missing}/limits/history")) == {"items": [], "next_token": None}
    assert ok(target.call("DELETE", f"/orgs/{missing}/accounts/{account}"), 204) is None
    # An organization on a plan that does not exist is refused, and not created
    error_of(target.call("PUT", f"/orgs/{missing}", {"plan_id": new_id("noplan")}), 400, "ValidationError")
    error_of(target.call("GET", f"/orgs/{missing}"), 404, "NotFound")
    # And history is no kind's name
    error_of(target.call("PUT", f"/orgs/{missing}/limits/history", {"limit": 1}), 400, "ValidationError")


# ---- who may do what ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_org(target: Target) -> tuple[str, str]:
    """An organization with one member that holds a seat (no test may change it)."""
    member = new_id("shared")
    org = organization(target, 5, member)
    ok(create(target, member, "kept"), 201)
    target.settle()
    return org, member


def snapshot(target: Target, org: str) -> tuple[Any, Any, Any]:
    """What an operator sees of the organization."""
    return (
        ok(target.call("GET", f"/orgs/{org}")),
        ok(target.call("GET", f"/orgs/{org}/usage")),
        ok(target.call("GET", f"/orgs/{org}/limits/history")),
    )


@pytest.mark.parametrize("suffix", READS)
def test_the_organizations_administrator_and_operators_read_it(
    target: Target, shared_org: tuple[str, str], suffix: str
) -> None:
    org, _ = shared_org
    # An operator's answer and the administrator's (its org claim alone) are the same
    by_operator = ok(target.call("GET", f"/orgs/{org}{suffix}", auth=as_operator(target)))
    by_admin = ok(target.call("GET", f"/orgs/{org}{suffix}", auth=as_org_admin(target, org)))
    assert by_admin == by_operator


WRITES = [
    ("PUT", "", {"plan_id": "default"}),
    ("DELETE", "", None),
    ("PUT", f"/limits/{SEATS}", {"limit": 0, "force": True}),
    ("DELETE", f"/limits/{SEATS}?force=true", None),
    ("PUT", "/accounts/{intruder}", None),
    ("DELETE", "/accounts/{member}", None),
]


@pytest.mark.parametrize(("method", "suffix", "body"), WRITES)
def test_no_one_but_an_operator_changes_an_organization(
    target: Target, shared_org: tuple[str, str], method: str, suffix: str, body: Any
) -> None:
    org, member = shared_org
    before = snapshot(target, org)
    path = f"/orgs/{org}" + suffix.format(intruder=new_id("intruder"), member=member)
    # Given its own administrator, a member's tenant, and another tenant
    for auth in (as_org_admin(target, org), as_tenant(target, member), as_tenant(target, new_id("other"))):
        # When it tries a write, Then API Gateway refuses it (the route wants the operator scope)
        response = target.call(method, path, body, auth=auth)
        assert (response.status_code, response.json()) == (403, FORBIDDEN_BY_GATEWAY), path
    # And nothing changed
    target.settle()
    assert snapshot(target, org) == before


@pytest.mark.parametrize("suffix", READS)
def test_no_one_else_reads_an_organization(target: Target, shared_org: tuple[str, str], suffix: str) -> None:
    org, member = shared_org
    path = f"/orgs/{org}{suffix}"
    # A member's tenant token, and another tenant's: no org claim (the function; the route has no
    # scopes, so API Gateway lets every valid token through)
    for auth in (as_tenant(target, member), as_tenant(target, new_id("other"))):
        refused = error_of(target.call("GET", path, auth=auth), 403, "Forbidden")
        assert refused["message"] == f"the token has no {ORG_CLAIM} claim"
    # Another organization's administrator: the function compares the claim with the path
    other = error_of(target.call("GET", path, auth=as_org_admin(target, new_id("org"))), 403, "Forbidden")
    assert other["message"] == "this caller may not read that organization"


def test_the_org_claim_alone_makes_the_administrator_and_the_old_scope_changes_nothing(
    target: Target, shared_org: tuple[str, str]
) -> None:
    if target.runtime is None:
        pytest.skip("mints tokens with the local issuer's key (embedded runtime)")
    org, _ = shared_org
    issuer = target.runtime.issuer
    alone = issuer.mint({ORG_CLAIM: org})
    with_scope = issuer.mint({ORG_CLAIM: org}, [ORG_ADMIN_SCOPE])
    scope_only = issuer.mint({}, [ORG_ADMIN_SCOPE])
    for suffix in READS:
        path = f"/orgs/{org}{suffix}"
        # The claim alone reads, and so does a token with the org-admin scope beside it
        assert ok(target.call("GET", path, auth=bearer(alone))) == ok(
            target.call("GET", path, auth=bearer(with_scope))
        )
        # The scope without the claim is nobody's administrator
        refused = error_of(target.call("GET", path, auth=bearer(scope_only)), 403, "Forbidden")
        assert refused["message"] == f"the token has no {ORG_CLAIM} claim"
    # And a claim that only resembles the organization's id is refused by the function
    for claim in (org.upper(), f" {org}", [org]):
        token = issuer.mint({ORG_CLAIM: claim})
        response = target.call("GET", f"/orgs/{org}/usage", auth=bearer(token))
        assert (response.status_code, response.json()["error"]["code"]) == (403, "Forbidden"), claim


def test_only_a_plain_scope_string_makes_an_operator_of_the_organization_reads(
    target: Target, shared_org: tuple[str, str]
) -> None:
    if target.runtime is None:
        pytest.skip("mints tokens with the local issuer's key (embedded runtime)")
    org, _ = shared_org
    issuer = target.runtime.issuer
    operator = "hybrid-counter/operator"
    # Given tokens with no org claim whose operator scope is in another form than a plain
    # space-delimited `scope` string (lists reach the function stringified, `[a b]`; `scp` is
    # never read) or only resembles it
    crafted: list[dict[str, Any]] = [
        {"scope": [operator]},
        {"scope": ["openid", operator, "profile"]},
        {"scope": f"[{operator}]"},
        {"scp": [operator]},
        {"scp": operator},
        {"scope": f"{operator}x"},
        {"scope": operator.upper()},
        {"scope": f"openid,{operator}"},
    ]
    for claims in crafted:
        token = issuer.mint(claims)
        for suffix in READS:
            response = target.call("GET", f"/orgs/{org}{suffix}", auth=bearer(token))
            # Then the function refuses it: no operator, and no org claim
            refused = error_of(response, 403, "Forbidden")
            assert refused["message"] == f"the token has no {ORG_CLAIM} claim", claims
    # And the scope among others in a plain string is an operator's, on any organization
    token = issuer.mint({"scope": f"openid {operator} profile"})
    assert ok(target.call("GET", f"/orgs/{org}", auth=bearer(token)))["org_id"] == org


@pytest.mark.parametrize(("method", "suffix", "body"), [*[("GET", s, None) for s in READS], *WRITES])
def test_bad_tokens_get_401_on_every_organization_route(
    target: Target, shared_org: tuple[str, str], method: str, suffix: str, body: Any
) -> None:
    org, member = shared_org
    path = f"/orgs/{org}" + suffix.format(intruder="x", member=member)
    headers = [{}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic b3A6b3A="}]
    if target.runtime is not None:  # tokens the issuer signed, but expired or for another audience
        issuer = target.runtime.issuer
        headers.append(bearer(issuer.mint({ORG_CLAIM: org}, ["hybrid-counter/operator"], expires_in=-60)))
        headers.append(bearer(issuer.mint({}, ["hybrid-counter/operator"], audience="someone-else")))
        headers.append(
            bearer(issuer.mint({}, ["hybrid-counter/operator"], not_before=int(time.time()) + 600))
        )
    for auth in headers:
        response = target.call(method, path, body, auth=auth)
        assert (response.status_code, response.json()) == (401, {"message": "Unauthorized"}), auth


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [*[("GET", s, None) for s in READS], ("PUT", f"/limits/{SEATS}", {"limit": 5}), ("DELETE", "", None)],
)
def test_unknown_or_repeated_query_parameters_are_refused_before_anything_happens(
    target: Target, shared_org: tuple[str, str], method: str, suffix: str, body: Any
) -> None:
    org, _ = shared_org
    before = snapshot(target, org)
    for query, named in [("dry_run=true", '"dry_run"'), ("verbose=1", '"verbose"'), ("top=1&top=2", '"top"')]:
        if query.startswith("top") and suffix != "/usage":
            continue  # top is declared by the usage route only (elsewhere it is unknown, tested above)
        refused = error_of(target.call(method, f"/orgs/{org}{suffix}?{query}", body), 400, "ValidationError")
        assert named in refused["message"]
    assert snapshot(target, org) == before


def test_hybrid_counter_token_org_mints_a_token_the_gateway_lets_read_the_organization(
    target: Target, shared_org: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if target.runtime is None:
        pytest.skip("asks the embedded runtime's issuer, as make dev's hybrid-counter-token does")
    org, _ = shared_org
    # Given the state file make dev writes (what the runtime says of its authentication)
    state = tmp_path / "runtime.json"
    state.write_text(json.dumps({"auth": target.runtime.auth_description()}))
    # When hybrid-counter-token --org mints a token, as an operator would for curl
    assert token_cli(["--org", org, "--state", str(state)]) == 0
    token = capsys.readouterr().out.strip()
    # Then that token reads its organization through the gateway, and not another's
    assert ok(target.call("GET", f"/orgs/{org}/usage", auth=bearer(token)))["org_id"] == org
    assert "scope" not in jwt.decode(token, options={"verify_signature": False})  # the claim alone
    other = target.call("GET", f"/orgs/{new_id('org')}/usage", auth=bearer(token))
    assert other.status_code == 403
    # And it writes nothing (API Gateway: the operator scope is missing)
    refused = target.call("DELETE", f"/orgs/{org}", auth=bearer(token))
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN_BY_GATEWAY)
