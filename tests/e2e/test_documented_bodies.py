"""Every answer of a walk through the API matches what its OpenAPI description says of that
route and status: the status is documented, and the body validates against its schema.

The description is the one the target serves (GET /openapi.json), so this checks the contract
a client generator would read against what the service does."""

from __future__ import annotations

import re
import uuid
from typing import Any

import jsonschema
import pytest
import requests

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
        template = next(t for pattern, t in self.routes if pattern.match(path.split("?", maxsplit=1)[0]))
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
    assert call("POST", base, {"name": "too-big", "units": 9}).status_code == 409
    call("GET", f"{base}/{created['resource_id']}")
    call("GET", f"{base}?limit=1")
    call("GET", f"/accounts/{account}/usage")
    call("GET", f"/accounts/{account}/limits")
    call("GET", f"/accounts/{account}/limits/history")
    call("GET", f"/plans/{plan}/history")
    call("DELETE", f"{base}/{created['resource_id']}")
    assert call("GET", f"{base}/{created['resource_id']}").status_code == 404
    call("DELETE", f"/accounts/{account}/limits/seats?force=true")
    # the routes without a kind (the stack's default kind) and the old flat limit
    call("PUT", f"/accounts/{account}/limit", {"limit": 2})
    flat = call("POST", f"/accounts/{account}/resources", {"name": "flat"}).json()
    call("POST", f"/accounts/{account}/resources?dry_run=true", {"name": "flat"})
    call("PUT", f"/accounts/{account}/resources/put-flat", {"name": "put-flat"})
    call("PUT", f"/accounts/{account}/resources/put-flat", {"name": "put-flat"})
    call("GET", f"/accounts/{account}/resources")
    call("GET", f"/accounts/{account}/resources/{flat['resource_id']}")
    call("DELETE", f"/accounts/{account}/resources/{flat['resource_id']}")

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
