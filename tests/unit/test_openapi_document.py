"""The OpenAPI description reads as a reference and generates a usable client: every operation has
a summary, a description, one section (tag) and an operationId a person would write, stable
across releases; its success answers come first; every example in it is one the API accepts or
could answer; the security scheme is the Authorization header's; the servers are where to send
requests. (What the operations answer is tests/unit/test_documented_answers.py's.)"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import build_app
from tests.unit.api_routes import answer, event_for, every_route, route_id

# A generated client's method names: renaming one breaks every caller, so each stays (a route may
# be added; none of these may change).
STABLE_IDS = {
    "GET /accounts/{account_id}/usage": "getUsage",
    "POST /accounts/{account_id}/kinds/{kind}/resources": "createKindResource",
    "GET /accounts/{account_id}/kinds/{kind}/resources": "listKindResources",
    "PUT /accounts/{account_id}/kinds/{kind}/resources/{resource_id}": "putKindResource",
    "PATCH /accounts/{account_id}/kinds/{kind}/resources/{resource_id}": "resizeKindResource",
    "GET /accounts/{account_id}/kinds/{kind}/resources/{resource_id}": "getKindResource",
    "DELETE /accounts/{account_id}/kinds/{kind}/resources/{resource_id}": "deleteKindResource",
    "POST /accounts/{account_id}/kinds/{kind}/resources/{resource_id}/confirm": "confirmKindResource",
    "POST /accounts/{account_id}/resources": "createResource",
    "GET /accounts/{account_id}/resources": "listResources",
    "PUT /accounts/{account_id}/resources/{resource_id}": "putResource",
    "GET /accounts/{account_id}/resources/{resource_id}": "getResource",
    "DELETE /accounts/{account_id}/resources/{resource_id}": "deleteResource",
    "POST /accounts/{account_id}/resources/{resource_id}/confirm": "confirmResource",
    "GET /accounts/{account_id}/limits": "getAccountLimits",
    "PUT /accounts/{account_id}/limit": "putLimit",
    "PUT /accounts/{account_id}/limits/{kind}": "putKindLimit",
    "DELETE /accounts/{account_id}/limits/{kind}": "deleteKindLimit",
    "GET /accounts/{account_id}/limits/history": "getAccountHistory",
    "PUT /accounts/{account_id}/plan": "putAccountPlan",
    "PUT /plans/{plan_id}": "putPlan",
    "GET /plans/{plan_id}": "getPlan",
    "GET /plans": "listPlans",
    "GET /plans/{plan_id}/history": "getPlanHistory",
    "PUT /orgs/{org_id}": "putOrg",
    "GET /orgs/{org_id}": "getOrg",
    "DELETE /orgs/{org_id}": "deleteOrg",
    "PUT /orgs/{org_id}/limits/{kind}": "putOrgLimit",
    "DELETE /orgs/{org_id}/limits/{kind}": "deleteOrgLimit",
    "PUT /orgs/{org_id}/accounts/{account_id}": "putOrgMember",
    "DELETE /orgs/{org_id}/accounts/{account_id}": "deleteOrgMember",
    "GET /orgs/{org_id}/usage": "getOrgUsage",
    "GET /orgs/{org_id}/limits/history": "getOrgHistory",
    "GET /events": "listEvents",
    "GET /openapi.json": "getOpenApiDescription",
}
# The sections a tenant reads, before any operator's.
TENANT_TAGS = ["Resources", "Holds", "Usage"]
HUMAN_ID = re.compile(r"^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]+)*$")  # camelCase words, nothing else


def served(policy: AccessPolicy) -> dict[str, Any]:
    """GET /openapi.json, as a caller gets it."""
    openapi = next(route for route in every_route() if route_id(route) == "GET /openapi.json")
    event = event_for(openapi)
    response = build_app(lambda: None, policy).resolve(event, None)  # type: ignore[arg-type, return-value]
    assert response["statusCode"] == 200
    return dict(json.loads(response["body"]))


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return served(AccessPolicy())


def operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, items in document["paths"].items()
        for method, operation in items.items()
    ]


def test_every_operation_has_a_summary_a_description_and_one_declared_section(document):
    declared = [tag["name"] for tag in document["tags"]]
    used: set[str] = set()
    for name, operation in operations(document):
        # Then each says in a line what it does (a renderer's heading), and more below it
        assert operation.get("summary", "").strip(), name
        assert operation["summary"] != name, name  # not the method and path again
        assert len(operation["summary"]) <= 60, name
        assert operation.get("description", "").strip(), name
        # And it sits in exactly one declared section
        assert len(operation.get("tags", [])) == 1, name
        assert operation["tags"][0] in declared, name
        used.update(operation["tags"])
    assert used == set(declared)
    # And the sections a tenant needs come before the operators'
    assert declared[: len(TENANT_TAGS)] == TENANT_TAGS


def test_every_operation_id_is_a_human_name_and_unique(document):
    ids = [operation.get("operationId", "") for _, operation in operations(document)]
    for (name, _), operation_id in zip(operations(document), ids, strict=True):
        # Then a generated client's method is named like a person would (createResource), with no
        # fragment of the path or method in it (create_resource_accounts__account_id__..._post)
        assert HUMAN_ID.match(operation_id), (name, operation_id)
        assert len(operation_id) <= 32, (name, operation_id)
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)


def test_the_operation_ids_clients_were_generated_with_stay(document):
    found = {name: operation["operationId"] for name, operation in operations(document)}
    changed = {name: (want, found.get(name)) for name, want in STABLE_IDS.items() if found.get(name) != want}
    assert not changed


def test_success_answers_come_first(document):
    for name, operation in operations(document):
        statuses = [int(status) for status in operation["responses"]]
        successes = [status for status in statuses if 200 <= status < 300]
        # Then every operation documents a success, and lists its successes before any refusal
        assert successes, name
        assert statuses[: len(successes)] == successes, (name, statuses)


def media_examples(document: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(where, schema, example value) of every example of a body, request or answer."""
    found = []
    for name, operation in operations(document):
        bodies = [("request", operation.get("requestBody", {}))]
        bodies += [(status, answer) for status, answer in operation["responses"].items()]
        for where, body in bodies:
            for media in body.get("content", {}).values():
                for label, example in media.get("examples", {}).items():
                    found.append((f"{name} {where} {label}", media["schema"], example["value"]))
    return found


def test_every_body_has_an_example_and_each_fits_its_schema(document):
    examples = media_examples(document)
    where = {place.rsplit(" ", 1)[0] for place, _, _ in examples}
    for name, operation in operations(document):
        # Given each body an operation takes or answers, Then the reference shows an example of it
        if "requestBody" in operation:
            assert f"{name} request" in where, name
        for status, answered in operation["responses"].items():
            if answered.get("content") and name != "GET /openapi.json":
                assert f"{name} {status}" in where, (name, status)
    # And each example is valid for its documented schema (so not a schema of nulls)
    for place, schema, value in examples:
        validator = jsonschema.Draft202012Validator({**schema, "components": document["components"]})
        errors = [error.message for error in validator.iter_errors(value)]
        assert not errors, (place, errors)


def test_the_request_examples_are_bodies_the_api_accepts():
    document = served(AccessPolicy())
    routes = {route_id(route): route for route in every_route()}
    checked = 0
    for name, operation in operations(document):
        for label, example in (
            operation.get("requestBody", {})
            .get("content", {})
            .get("application/json", {})
            .get("examples", {})
            .items()
        ):
            # When the route is sent its own example, Then it is not refused as invalid
            status, body, _ = answer(event_for(routes[name], body=example["value"]))
            assert status < 400, (name, label, status, body)
            checked += 1
    assert checked >= 15


def test_authentication_is_the_authorization_header_in_security_schemes(document):
    # Given the JWT deployment's description, Then its one scheme is a bearer JWT in the
    # Authorization header, and no operation takes a parameter standing in for the caller
    (name, scheme) = next(iter(document["components"]["securitySchemes"].items()))
    assert (name, scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == (
        "bearerAuth",
        "http",
        "bearer",
        "JWT",
    )
    assert "Authorization: Bearer" in scheme["description"]
    for operation_name, operation in operations(document):
        names = {parameter["name"].lower() for parameter in operation.get("parameters", [])}
        assert not names & {"caller", "authorization"}, operation_name
        assert operation["security"] == [] or {n for s in operation["security"] for n in s} == {"bearerAuth"}
    # And the IAM deployment's is SigV4's Authorization header
    iam = served(AccessPolicy(mode="iam"))
    ((name, scheme),) = iam["components"]["securitySchemes"].items()
    assert (name, scheme["type"], scheme["in"], scheme["name"]) == (
        "sigv4",
        "apiKey",
        "header",
        "Authorization",
    )
    assert scheme["x-amazon-apigateway-authtype"] == "awsSigv4"


def test_the_servers_are_the_local_runtime_and_a_deployment(document):
    urls = [server["url"] for server in document["servers"]]
    assert "http://127.0.0.1:3000" in urls
    (deployed,) = [server for server in document["servers"] if "execute-api" in server["url"]]
    # Then every variable of the deployed URL has a default (a renderer substitutes it)
    names = set(re.findall(r"\{([^}]+)\}", deployed["url"]))
    assert names == set(deployed["variables"]) == {"api_id", "region"}
    assert all(variable["default"] for variable in deployed["variables"].values())
