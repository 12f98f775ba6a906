"""The OpenAPI description says what every operation answers: its refusals on every secured
operation (401, 403, 400, 429 and 503 with Retry-After), and for each error code the body the
one error map (api/errors.py) really sends. What is observed over HTTP is checked against the
same description by tests/e2e/test_documented_bodies.py."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from hybrid_counter.api.access import ROUTE_ACCESS, Access, Forbidden, Unauthorized
from hybrid_counter.api.console_routes import CONSOLE_ROUTES
from hybrid_counter.api.errors import STATUS, domain_error_response
from hybrid_counter.errors import (
    DomainError,
    HoldExpired,
    IdempotencyConflict,
    InProgress,
    LimitBelowUsage,
    LimitExceeded,
    MembershipConflict,
    NotFound,
    StoreUnavailable,
    Throttled,
    ValidationError,
)
from tests.unit.api_routes import answer, event_for, every_route, route_id

SECURED_ANSWERS = {"400", "401", "403", "429", "503"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    openapi = next(route for route in every_route() if route_id(route) == "GET /openapi.json")
    status, served, _ = answer(event_for(openapi))
    assert status == 200
    return dict(served)


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, items in document["paths"].items()
        for method, operation in items.items()
    ]


def schemas_of(document: dict[str, Any], response: dict[str, Any]) -> list[dict[str, Any]]:
    """The component schemas a response's body may be (one, or each of an anyOf)."""
    schema = response["content"]["application/json"]["schema"]
    refs = [option["$ref"] for option in schema.get("anyOf", [schema])]
    return [document["components"]["schemas"][ref.rsplit("/", 1)[1]] for ref in refs]


def test_every_secured_operation_documents_its_refusals(document):
    checked = 0
    for method, path, operation in operations(document):
        answers = set(operation["responses"])
        if ROUTE_ACCESS[(method, path)] is Access.PUBLIC:
            # Given the public description, Then it documents its 400 but no 401
            assert "400" in answers, path
            assert "401" not in answers, path
            continue
        # Given a secured operation, Then it documents 401 and every refusal every route can give
        assert answers >= SECURED_ANSWERS, (method, path, sorted(answers))
        for status in ("429", "503"):
            assert "Retry-After" in operation["responses"][status]["headers"], (method, path, status)
        # And API Gateway's own body for the answers it gives before the function runs
        for status in ("401", "403", "429", "503"):
            titles = {schema["title"] for schema in schemas_of(document, operation["responses"][status])}
            assert "GatewayBody" in titles, (method, path, status)
        checked += 1
    assert checked == len(ROUTE_ACCESS) - 1 - len(CONSOLE_ROUTES)  # public: the description, the console


def codes_of(document: dict[str, Any], response: dict[str, Any]) -> set[str]:
    """The error codes a documented answer may carry (each body's code enum)."""
    details = [
        document["components"]["schemas"][body["properties"]["error"]["$ref"].rsplit("/", 1)[1]]
        for body in schemas_of(document, response)
    ]
    return {code for detail in details for code in detail["properties"]["code"]["enum"]}


def test_each_error_status_documents_exactly_the_codes_its_operation_can_answer(document):
    # Given what each operation's 404 and 409 say
    codes = {
        (method, path, status): codes_of(document, operation["responses"][status])
        for method, path, operation in operations(document)
        for status in ("404", "409")
        if status in operation["responses"]
    }
    kind_resource = "/accounts/{account_id}/kinds/{kind}/resources/{resource_id}"
    # Then the codes are those the domain raises there
    assert codes[("PUT", kind_resource, "409")] == {"LimitExceeded", "IdempotencyConflict"}
    assert codes[("PATCH", kind_resource, "409")] == {
        "LimitExceeded",
        "HoldExpired",
    }  # a grow of an expired hold
    assert codes[("PATCH", kind_resource, "404")] == {"NotFound"}
    assert codes[("POST", "/accounts/{account_id}/kinds/{kind}/resources", "409")] == {"LimitExceeded"}
    for path in (
        "/accounts/{account_id}/limits/{kind}",
        "/accounts/{account_id}/plan",
        "/accounts/{account_id}/limit",
    ):
        assert codes[("PUT", path, "409")] == {"LimitBelowUsage"}
    assert codes[("DELETE", "/accounts/{account_id}/limits/{kind}", "409")] == {"LimitBelowUsage"}
    assert codes[("GET", "/plans/{plan_id}", "404")] == {"NotFound"}
    # And the organizations' routes: membership, deletion, overrides and plan moves
    member = "/orgs/{org_id}/accounts/{account_id}"
    assert codes[("PUT", member, "409")] == {"AccountNotEmpty", "AccountInAnotherOrganization"}
    assert codes[("PUT", member, "404")] == {"NotFound"}
    assert codes[("DELETE", member, "409")] == {"AccountNotEmpty"}
    assert codes[("DELETE", "/orgs/{org_id}", "409")] == {"OrganizationNotEmpty"}
    for method, path in [
        ("PUT", "/orgs/{org_id}"),
        ("PUT", "/orgs/{org_id}/limits/{kind}"),
        ("DELETE", "/orgs/{org_id}/limits/{kind}"),
    ]:
        assert codes[(method, path, "409")] == {"LimitBelowUsage"}, (method, path)
    for method, path in [
        ("GET", "/orgs/{org_id}"),
        ("DELETE", "/orgs/{org_id}"),
        ("GET", "/orgs/{org_id}/usage"),
        ("PUT", "/orgs/{org_id}/limits/{kind}"),
        ("DELETE", "/orgs/{org_id}/limits/{kind}"),
    ]:
        assert codes[(method, path, "404")] == {"NotFound"}, (method, path)


def test_the_organization_reads_document_both_ways_in():
    # Given the description with the JWT policy of the unit tests
    openapi = next(route for route in every_route() if route_id(route) == "GET /openapi.json")
    _, document, _ = answer(event_for(openapi))
    # Then the three reads an org admin may make name the operator scope or any token (the org
    # claim, which the scheme's description names), and the writes the operator's scope alone
    either = [{"bearerAuth": ["hc/operator"]}, {"bearerAuth": []}]
    for path in ("/orgs/{org_id}", "/orgs/{org_id}/usage", "/orgs/{org_id}/limits/history"):
        assert document["paths"][path]["get"]["security"] == either, path
    scheme = document["components"]["securitySchemes"]["bearerAuth"]
    assert "'org_id' claim names the organization" in scheme["description"]
    assert document["paths"]["/orgs/{org_id}"]["put"]["security"] == [{"bearerAuth": ["hc/operator"]}]


ERRORS: list[DomainError] = [
    ValidationError("bad"),
    Unauthorized("no identity"),
    Forbidden("not yours"),
    NotFound("no such resource"),
    LimitExceeded(5, 5, "seats", 2),
    LimitExceeded(5, 5),
    LimitExceeded(10, 9, "seats", 2, scope="organization"),
    IdempotencyConflict("another body"),
    HoldExpired("the hold expired"),
    LimitBelowUsage([("seats", 1, 2)]),
    LimitBelowUsage([("seats", 1, 2), ("projects", 0, 3)]),
    Throttled("throttled"),
    StoreUnavailable("unreachable"),
    InProgress("still running"),
    MembershipConflict("AccountNotEmpty", "holds resources"),
    MembershipConflict("AccountInAnotherOrganization", "in another"),
    MembershipConflict("OrganizationNotEmpty", "has members"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: f"{type(error).__name__}-{error.code}")
def test_the_body_each_error_is_sent_with_is_the_documented_one(document, error):
    # Given the response the one error map makes of a domain error
    response = domain_error_response(error)
    body = json.loads(str(response.body))
    status = str(response.status_code)
    # Then its status is documented on some operation, with this code's body among its schemas
    bodies = {
        schema["title"]
        for _, _, operation in operations(document)
        if status in operation["responses"]
        for schema in schemas_of(document, operation["responses"][status])
    }
    name = f"{error.code}Body"
    assert name in bodies, (status, sorted(bodies))
    # And the body validates against that schema
    schema = {**document["components"]["schemas"][name], "components": document["components"]}
    jsonschema.validate(body, schema)
    # And a retryable answer carries the Retry-After the description promises
    if status in {"429", "503"}:
        assert int(str(response.headers["Retry-After"])) >= 0


def test_every_error_class_of_the_map_is_exercised_here():
    assert set(STATUS) <= {type(error) for error in ERRORS} | {
        base for error in ERRORS for base in type(error).__mro__
    }
