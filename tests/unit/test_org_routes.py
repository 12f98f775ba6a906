"""The organizations' routes are thin: each asks the service one thing and answers its result with
the status the issue names (201 created or joined, 200 already so, 204 removed); the domain's
refusals go through the one error map. The domain itself is tested against DynamoDB Local
(tests/integration/test_organizations.py) and over HTTP (tests/e2e/test_organizations.py)."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.api.errors import domain_error_response
from hybrid_counter.errors import LimitExceeded, MembershipConflict
from tests.unit.api_routes import answer, event_for, every_route, route_id


def call(route_key: str, path: dict[str, str] | None = None, query: str = "", body: Any = ...):
    route = next(r for r in every_route() if route_id(r) == route_key)
    return answer(event_for(route, query, path=path, body=body))


def test_put_org_answers_201_when_it_created_the_organization_and_200_otherwise():
    # Given an id the recording service creates (new-...) and one it already has
    created = call("PUT /orgs/{org_id}", {"org_id": "new-org"}, body={"plan_id": "pro"})
    moved = call("PUT /orgs/{org_id}", {"org_id": "org-demo"}, body={"plan_id": "gold", "force": True})
    # Then the statuses say which, with the organization as the body
    assert created[:2] == (
        201,
        {
            "org_id": "new-org",
            "plan_id": "pro",
            "members": 0,
            "created_at": "2026-11-21T00:00:00.000Z",
            "shards": 1,
        },
    )
    assert (moved[0], moved[1]["plan_id"]) == (200, "gold")
    # And force reaches the service
    assert moved[2] == [("put_org", ("org-demo", "gold", {"force": True}))]
    # And so does shards (how many items each of its counters is split over)
    split = call("PUT /orgs/{org_id}", {"org_id": "org-demo"}, body={"plan_id": "gold", "shards": 4})
    assert split[2] == [("put_org", ("org-demo", "gold", {"shards": 4}))]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"plan_id": ""},
        {"plan_id": "a/b"},
        {"plan_id": "pro", "force": "yes"},
        {"plan_id": "pro", "x": 1},
        {"plan_id": "pro", "shards": 3},
        {"plan_id": "pro", "shards": "4"},
        {"plan_id": "pro", "shards": 32},
    ],
)
def test_put_org_refuses_a_body_that_is_not_a_plan(body):
    status, answered, calls = call("PUT /orgs/{org_id}", body=body)
    assert (status, answered["error"]["code"], calls) == (400, "ValidationError", [])


def test_get_org_answers_the_organization_or_404():
    status, body, _ = call("GET /orgs/{org_id}")
    assert (status, sorted(body)) == (200, ["created_at", "members", "org_id", "plan_id", "shards"])
    status, body, _ = call("GET /orgs/{org_id}", {"org_id": "missing"})
    assert (status, body["error"]["code"]) == (404, "NotFound")


def test_delete_org_answers_204_or_404():
    assert call("DELETE /orgs/{org_id}")[:2] == (204, None)
    assert call("DELETE /orgs/{org_id}", {"org_id": "missing"})[0] == 404


def test_an_override_is_set_and_removed_through_the_same_service_call():
    # When an override is set, then removed with force
    status, body, calls = call("PUT /orgs/{org_id}/limits/{kind}", {"kind": "seats"}, body={"limit": 7})
    removed = call("DELETE /orgs/{org_id}/limits/{kind}", {"kind": "seats"}, "force=true")
    # Then the first answers what was set, the second 204, and None is the removal
    assert (status, body) == (200, {"org_id": "org-demo", "kind": "seats", "limit": 7})
    assert calls == [("set_org_limit", ("org-demo", "seats", 7))]
    assert removed[:2] == (204, None)
    assert removed[2] == [("set_org_limit", ("org-demo", "seats", None, {"force": True}))]


def test_a_reserved_kind_cannot_be_given_an_organization_override():
    status, body, calls = call("PUT /orgs/{org_id}/limits/{kind}", {"kind": "history"}, body={"limit": 1})
    assert (status, body["error"]["code"], calls) == (400, "ValidationError", [])
    assert "'history' is reserved" in body["error"]["message"]


def test_a_member_joins_with_201_and_is_already_one_with_200():
    joined = call("PUT /orgs/{org_id}/accounts/{account_id}", {"account_id": "new-acct"}, body=None)
    already = call("PUT /orgs/{org_id}/accounts/{account_id}", body=None)
    assert joined[:2] == (201, {"org_id": "org-demo", "account_id": "new-acct"})
    assert already[:2] == (200, {"org_id": "org-demo", "account_id": "acct-demo"})
    missing = call("PUT /orgs/{org_id}/accounts/{account_id}", {"org_id": "missing"}, body=None)
    assert (missing[0], missing[1]["error"]["code"]) == (404, "NotFound")


def test_a_member_leaves_with_204():
    status, body, calls = call("DELETE /orgs/{org_id}/accounts/{account_id}")
    assert (status, body, calls) == (204, None, [("remove_member", ("org-demo", "acct-demo"))])


@pytest.mark.parametrize(("query", "top"), [("", 5), ("top=0", 0), ("top=100", 100)])
def test_org_usage_takes_top_from_0_to_100(query, top):
    status, body, calls = call("GET /orgs/{org_id}/usage", query=query)
    assert status == 200
    assert calls == [("org_usage", ("org-demo", {"top": top}))]
    assert body["kinds"]["projects"]["top_accounts"] == (
        [{"account_id": "acct-demo", "used": 2}] if top else []
    )


@pytest.mark.parametrize("query", ["top=-1", "top=101", "top=x", "top=1.5"])
def test_org_usage_refuses_a_top_out_of_range(query):
    status, body, calls = call("GET /orgs/{org_id}/usage", query=query)
    assert (status, body["error"]["code"], calls) == (400, "ValidationError", [])


def test_org_history_pages_like_an_accounts():
    status, body, calls = call("GET /orgs/{org_id}/limits/history", query="kind=seats&limit=2")
    assert (status, body) == (200, {"items": [{"what": "org_plan", "new": "pro"}], "next_token": None})
    assert calls == [("org_history", ("org-demo", {"kind": "seats"}))]


@pytest.mark.parametrize(
    ("code", "status"),
    [("AccountNotEmpty", 409), ("AccountInAnotherOrganization", 409), ("OrganizationNotEmpty", 409)],
)
def test_a_membership_conflict_is_a_409_with_its_own_code(code, status):
    response = domain_error_response(MembershipConflict(code, "why"))
    assert (response.status_code, f'"code": "{code}"' in str(response.body)) == (status, True)


def test_a_refusal_by_the_organization_says_so():
    response = domain_error_response(LimitExceeded(10, 10, "seats", scope="organization"))
    assert response.status_code == 409
    assert '"scope": "organization"' in str(response.body)
