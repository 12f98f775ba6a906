"""Every answer of a walk through the API matches what its OpenAPI description says of that
route and status: the status is documented, and the body validates against its schema (an
error's against the schema of each code the status documents, so a code the description does
not give that status fails too).

The walk sees every success of every route, and the refusals: every operation without a token
and with a bad one (401), and with a query parameter it does not take (400); the 403s, 404s and
each 409's codes where an operation answers them, the organizations' routes among them (an
organization administrator's reads, membership and deletion refusals, a create refused by the
organization: LimitExceeded with scope organization).

The description is the one the target serves (GET /openapi.json), so this checks the contract
a client generator would read against what the service does."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import jsonschema
import pytest
import requests

from tests.e2e.auth import bearer
from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e


class Contract:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.routes = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), path)
            for path in sorted(document["paths"], key=lambda p: p.count("{"))
        ]
        self.checked: set[tuple[str, str, int]] = set()

    def check(self, method: str, path: str, response: requests.Response) -> None:
        bare = path.split("?", maxsplit=1)[0]
        template = next(
            t
            for pattern, t in self.routes
            if pattern.match(bare) and method.lower() in self.document["paths"][t]
        )
        documented = self.document["paths"][template][method.lower()]["responses"]
        assert str(response.status_code) in documented, (
            method,
            template,
            response.status_code,
            sorted(documented),
        )
        content = documented[str(response.status_code)].get("content")
        if not content:
            assert response.content == b"", (method, template)
        else:
            schema = {**content["application/json"]["schema"], "components": self.document["components"]}
            jsonschema.validate(response.json(), schema)
        self.checked.add((method, template, response.status_code))


def test_a_walk_through_every_kind_of_answer_matches_the_description(target: Target) -> None:
    contract = Contract(target.call("GET", "/openapi.json", auth=None).json())
    account, plan = f"doc-{uuid.uuid4().hex[:8]}", f"doc-{uuid.uuid4().hex[:8]}"

    def call(method: str, path: str, body: Any = None) -> requests.Response:
        response = target.call(method, path, body)
        contract.check(method, path, response)
        return response

    # plans, an account on one, an override (operator)
    call("PUT", f"/plans/{plan}", {"limits": {"seats": 3, "projects": 2}})
    call("GET", f"/plans/{plan}")
    call("GET", "/plans?limit=2")
    call("PUT", f"/accounts/{account}/plan", {"plan_id": plan})
    call("PUT", f"/accounts/{account}/limits/seats", {"limit": 5})
    # resources of a kind, with units (tenant): created, exists, dry run, resized, refused
    base = f"/accounts/{account}/kinds/seats/resources"
    created = call("POST", base, {"name": "team", "units": 2}).json()
    call("PUT", f"{base}/fixed", {"name": "fixed", "units": 1})
    call("PUT", f"{base}/fixed", {"name": "fixed", "units": 1})
    call("PUT", f"{base}/other?dry_run=true", {"name": "other", "units": 1})
    call("POST", f"{base}?dry_run=true", {"name": "other", "units": 1})
    call("PATCH", f"{base}/{created['resource_id']}", {"units": 3})
    call("PATCH", f"{base}/{created['resource_id']}?dry_run=true", {"units": 5})
    held = call("PUT", f"{base}/held?hold_seconds=600", {"name": "held", "units": 1}).json()
    assert held["held"] is True
    assert call("POST", f"{base}/held/confirm").json()["held"] is False
    call("DELETE", f"{base}/held")
    assert call("POST", base, {"name": "too-big", "units": 9}).status_code == 409
    call("GET", f"{base}/{created['resource_id']}")
    call("GET", f"{base}?limit=1")
    call("GET", f"/accounts/{account}/usage")
    call("GET", f"/accounts/{account}/limits")
    call("GET", f"/accounts/{account}/limits/history")
    call("GET", f"/plans/{plan}/history")
    call("GET", "/usage/over?limit=5")  # who is near a limit (operator)
    call("GET", "/events?limit=5")  # the events published recently (operator)
    call("DELETE", f"{base}/{created['resource_id']}")
    assert call("GET", f"{base}/{created['resource_id']}").status_code == 404
    call("DELETE", f"/accounts/{account}/limits/seats?force=true")
    # the routes without a kind (the stack's default kind) and the old flat limit
    call("PUT", f"/accounts/{account}/limit", {"limit": 2})
    flat = call("POST", f"/accounts/{account}/resources", {"name": "flat"}).json()
    call("POST", f"/accounts/{account}/resources?dry_run=true", {"name": "flat"})
    call("PUT", f"/accounts/{account}/resources/put-flat", {"name": "put-flat"})
    call("PUT", f"/accounts/{account}/resources/put-flat", {"name": "put-flat"})
    call("POST", f"/accounts/{account}/resources/put-flat/confirm")
    call("GET", f"/accounts/{account}/resources")
    call("GET", f"/accounts/{account}/resources/{flat['resource_id']}")
    call("DELETE", f"/accounts/{account}/resources/{flat['resource_id']}")
    # an organization (operator): created, already so, read, an override set and removed, a
    # member that joins, is already one, creates, is read with its organization, and leaves
    org, member = f"doc-{uuid.uuid4().hex[:8]}", f"doc-{uuid.uuid4().hex[:8]}"
    assert call("PUT", f"/orgs/{org}", {"plan_id": plan}).status_code == 201
    assert call("PUT", f"/orgs/{org}", {"plan_id": plan}).status_code == 200
    call("GET", f"/orgs/{org}")
    call("PUT", f"/orgs/{org}/limits/seats", {"limit": 4})
    call("DELETE", f"/orgs/{org}/limits/seats")
    call("PUT", f"/accounts/{member}/plan", {"plan_id": plan})
    assert call("PUT", f"/orgs/{org}/accounts/{member}").status_code == 201
    assert call("PUT", f"/orgs/{org}/accounts/{member}").status_code == 200
    seat = call("POST", f"/accounts/{member}/kinds/seats/resources", {"name": "s", "units": 2}).json()
    call("GET", f"/accounts/{member}/usage")
    call("GET", f"/orgs/{org}/usage?top=2")
    call("GET", f"/orgs/{org}/limits/history?kind=seats")
    call("DELETE", f"/accounts/{member}/kinds/seats/resources/{seat['resource_id']}")
    target.settle()  # the stream path finishes the delete: the account is empty again
    call("DELETE", f"/orgs/{org}/accounts/{member}")
    call("DELETE", f"/orgs/{org}")

    # Then every route was walked, with each success status it documents
    successes = {(m, t, s) for m, t, s in contract.checked if s < 300}
    documented = {
        (method.upper(), template, int(status))
        for template, operations in contract.document["paths"].items()
        for method, operation in operations.items()
        for status in operation["responses"]
        if status.startswith("2") and template != "/openapi.json"
    }
    assert documented - successes == set()


def fill(template: str, account: str) -> str:
    values = {
        "account_id": account,
        "kind": "seats",
        "resource_id": "r1",
        "plan_id": "doc-plan",
        "org_id": "doc-org",
    }
    return re.sub(r"\{([^}]+)\}", lambda match: values[match.group(1)], template)


def test_every_operation_documents_its_refusals(target: Target) -> None:
    contract = Contract(target.call("GET", "/openapi.json", auth=None).json())
    account, other = f"doc-{uuid.uuid4().hex[:8]}", f"doc-{uuid.uuid4().hex[:8]}"
    operations = [
        (method.upper(), template)
        for template, items in contract.document["paths"].items()
        for method in items
    ]

    def call(method: str, path: str, body: Any = None, **auth: Any) -> requests.Response:
        response = target.call(method, path, body, **auth)
        contract.check(method, path, response)
        return response

    for method, template in operations:
        path = fill(template, account)
        # without a token, and with one that is no token: API Gateway's 401
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            answered = call(method, path, auth=headers).status_code
            assert answered == (200 if template == "/openapi.json" else 401), (method, template)
        # a permitted caller, with a parameter the operation does not take: 400 naming it
        refused = call(method, f"{path}?not_a_parameter=1")
        assert refused.status_code == 400, (method, template, refused.text)
        assert '"not_a_parameter"' in refused.json()["error"]["message"]

    # 403: another account's tenant (the function), a tenant on an operator route (API Gateway)
    assert target.tokens is not None
    intruder = {"auth": bearer(target.tokens.tenant_token(other))}
    assert call("GET", f"/accounts/{account}/usage", **intruder).status_code == 403
    assert call("DELETE", f"/accounts/{account}/resources/r1", **intruder).status_code == 403
    assert call("PUT", f"/accounts/{account}/limit", {"limit": 1}, **intruder).status_code == 403
    # 404: no such resource or plan
    base = f"/accounts/{account}/kinds/seats/resources"
    for method, path, body in [
        ("GET", f"{base}/missing", None),
        ("PATCH", f"{base}/missing", {"units": 2}),
        ("PATCH", f"{base}/missing?dry_run=true", {"units": 2}),
        ("DELETE", f"{base}/missing", None),
        ("GET", f"/accounts/{account}/resources/missing", None),
        ("DELETE", f"/accounts/{account}/resources/missing", None),
        ("POST", f"/accounts/{account}/resources/missing/confirm", None),
        ("POST", f"{base}/missing/confirm", None),
        ("GET", f"/plans/missing-{uuid.uuid4().hex[:8]}", None),
    ]:
        assert call(method, path, body).status_code == 404, (method, path)

    # 409: each code where it is answered
    def conflict(method: str, path: str, body: Any, code: str) -> None:
        response = call(method, path, body)
        assert (response.status_code, response.json()["error"]["code"]) == (409, code), (method, path)

    call("PUT", f"/accounts/{account}/limits/seats", {"limit": 2})
    call("PUT", f"{base}/a", {"name": "a", "units": 2})
    conflict("POST", base, {"name": "b"}, "LimitExceeded")
    conflict("PUT", f"{base}/b", {"name": "b"}, "LimitExceeded")
    conflict("PUT", f"{base}/a", {"name": "other", "units": 2}, "IdempotencyConflict")
    conflict("PUT", f"{base}/a?dry_run=true", {"name": "other", "units": 2}, "IdempotencyConflict")
    conflict("PATCH", f"{base}/a", {"units": 3}, "LimitExceeded")
    call("DELETE", f"{base}/a")
    call("PUT", f"{base}/brief?hold_seconds=1", {"name": "brief"})
    time.sleep(1.2)
    conflict("POST", f"{base}/brief/confirm", None, "HoldExpired")
    call("PUT", f"{base}/a", {"name": "a", "units": 2})
    conflict("PUT", f"/accounts/{account}/limits/seats", {"limit": 1}, "LimitBelowUsage")
    conflict("DELETE", f"/accounts/{account}/limits/seats", None, "LimitBelowUsage")
    # (the routes without a kind: a plan without room for what the account has, then its limit)
    call("POST", f"/accounts/{account}/resources", {"name": "flat"})
    no_room = f"doc-{uuid.uuid4().hex[:8]}"
    call("PUT", f"/plans/{no_room}", {"limits": {"seats": 2}})
    conflict("PUT", f"/accounts/{account}/plan", {"plan_id": no_room}, "LimitBelowUsage")
    call("PUT", f"/accounts/{account}/limit", {"limit": 1})
    conflict("POST", f"/accounts/{account}/resources", {"name": "flat2"}, "LimitExceeded")
    conflict("PUT", f"/accounts/{account}/resources/flat2", {"name": "flat2"}, "LimitExceeded")
    conflict("PUT", f"/accounts/{account}/limit", {"limit": 0}, "LimitBelowUsage")
    # 400: a reserved kind, a body that is not valid
    assert call("PUT", f"/accounts/{account}/limits/history", {"limit": 1}).status_code == 400
    assert call("PUT", "/plans/doc-plan", {"limits": {"history": 1}}).status_code == 400
    assert call("POST", base, {"name": ""}).status_code == 400
    assert call("PUT", "/orgs/doc-org/limits/history", {"limit": 1}).status_code == 400

    # Organizations: plans of 2 and 5 seats, an organization on 5 with a member of 5 using 3
    small, large = f"doc-{uuid.uuid4().hex[:8]}", f"doc-{uuid.uuid4().hex[:8]}"
    call("PUT", f"/plans/{small}", {"limits": {"seats": 2}})
    call("PUT", f"/plans/{large}", {"limits": {"seats": 5}})
    org, another, member = (f"doc-{uuid.uuid4().hex[:8]}" for _ in range(3))
    call("PUT", f"/orgs/{org}", {"plan_id": large})
    call("PUT", f"/orgs/{another}", {"plan_id": large})
    call("PUT", f"/accounts/{member}/plan", {"plan_id": large})
    call("PUT", f"/orgs/{org}/accounts/{member}")
    call("POST", f"/accounts/{member}/kinds/seats/resources", {"name": "three", "units": 3})
    # 409: limit changes below the organization's use, a create the organization refuses
    conflict("PUT", f"/orgs/{org}", {"plan_id": small}, "LimitBelowUsage")
    conflict("PUT", f"/orgs/{org}/limits/seats", {"limit": 2}, "LimitBelowUsage")
    call("PUT", f"/orgs/{org}/limits/seats", {"limit": 3})
    refused = call("POST", f"/accounts/{member}/kinds/seats/resources", {"name": "four"}).json()["error"]
    assert (refused["code"], refused["scope"], refused["limit"], refused["used"]) == (
        "LimitExceeded",
        "organization",
        3,
        3,
    )
    call("PUT", f"/orgs/{org}", {"plan_id": small})  # the override holds: nothing below it
    conflict("DELETE", f"/orgs/{org}/limits/seats", None, "LimitBelowUsage")
    # 409: membership of accounts that hold resources or are in another organization, deletion
    conflict("PUT", f"/orgs/{org}/accounts/{account}", None, "AccountNotEmpty")
    conflict("PUT", f"/orgs/{another}/accounts/{member}", None, "AccountInAnotherOrganization")
    conflict("DELETE", f"/orgs/{org}/accounts/{member}", None, "AccountNotEmpty")
    conflict("DELETE", f"/orgs/{org}", None, "OrganizationNotEmpty")
    # 403: a tenant's token on the organization's reads (the function: no org claim) and writes
    # (API Gateway: no scope of the route), another organization's administrator (the function),
    # its own on a write (API Gateway)
    member_token = {"auth": bearer(target.tokens.tenant_token(member))}
    assert call("GET", f"/orgs/{org}", **member_token).status_code == 403
    assert call("GET", f"/orgs/{org}/usage", **member_token).status_code == 403
    assert call("PUT", f"/orgs/{org}/accounts/{member}", **member_token).status_code == 403
    other_admin = {"auth": bearer(target.tokens.org_admin_token(another))}
    assert call("GET", f"/orgs/{org}/usage", **other_admin).status_code == 403
    assert call("GET", f"/orgs/{org}/limits/history", **other_admin).status_code == 403
    own_admin = {"auth": bearer(target.tokens.org_admin_token(org))}
    assert call("GET", f"/orgs/{org}/usage", **own_admin).status_code == 200
    assert call("DELETE", f"/orgs/{org}/limits/seats?force=true", **own_admin).status_code == 403
    # 404: no such organization
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    for method, path, body in [
        ("GET", f"/orgs/{missing}", None),
        ("DELETE", f"/orgs/{missing}", None),
        ("GET", f"/orgs/{missing}/usage", None),
        ("PUT", f"/orgs/{missing}/limits/seats", {"limit": 1}),
        ("DELETE", f"/orgs/{missing}/limits/seats", None),
        ("PUT", f"/orgs/{missing}/accounts/{other}", None),
    ]:
        assert call(method, path, body).status_code == 404, (method, path)

    # Then every operation was seen answering 400, and every secured one 401
    for method, template in operations:
        assert (method, template, 400) in contract.checked, (method, template)
        if template != "/openapi.json":
            assert (method, template, 401) in contract.checked, (method, template)
