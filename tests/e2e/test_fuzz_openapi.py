"""Fuzz the HTTP API from its own OpenAPI description (schemathesis): no 5xx, every error in the
documented body, and nothing written by a request that was rejected.

Each operation gets HC_FUZZ_EXAMPLES valid and as many invalid examples (schemathesis'
positive and negative generation), sent with the token a permitted caller would have (the path's
account's tenant, or the operator to set a limit); CI uses the default below, the long run more.
A second pass sends the same kinds of requests without credentials: every operation but the
public description gets API Gateway's 401 and writes nothing. A third sends valid requests to the
operations that take a body with the body replaced by one JSON parsers choke on (deep nesting, huge
integers, NaN and the infinities, repeated names: tests/hostile_json.py), which schemathesis, always
sending json.dumps of a Python value, never generates: each is a 400 ValidationError.
"""

from __future__ import annotations

import itertools
import os
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from hybrid_counter.api.access import ROUTE_ACCESS
from hybrid_counter.api.console_routes import CONSOLE_ROUTES
from hybrid_counter.keys import account_pk, is_valid_id
from localrun.gateway.client_connection import MAX_REQUEST_HEAD
from tests.e2e.conftest import Target
from tests.hostile_json import hostile_body

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("HC_FUZZ_EXAMPLES", "40"))
TALLY: dict[str, int] = {
    "cases": 0,
    "rejected": 0,
    "accepted": 0,
    "validation_errors": 0,
    "rejected_writes_checked": 0,
    "front_door_refusals": 0,
}


def load_schema(target: Target) -> Any:
    spec = requests.get(target.api_url.rstrip("/") + "/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(spec)
    schema.config.update(base_url=target.api_url.rstrip("/"))
    return schema


_written_accounts: set[str] = set()


def partition_is_empty(target: Target, account_id: str) -> bool:
    assert target.runtime is not None
    dynamodb = boto3.client("dynamodb", endpoint_url=target.runtime.dynamodb_url)
    found = dynamodb.query(
        TableName=target.runtime.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": account_pk(account_id)}},
        ConsistentRead=True,
        Select="COUNT",
    )
    return int(found["Count"]) == 0


def with_headers(case: Any, headers: dict[str, str]) -> Any:
    """The case with exactly these credentials (schemathesis may generate its own for the scheme)."""
    kept = {name: value for name, value in (case.headers or {}).items() if name.lower() != "authorization"}
    case.headers = {**kept, **headers}
    return case


def check_case(case: Any, target: Target) -> Any:
    response = with_headers(case, target.auth_headers(case.method, case.formatted_path)).call()
    TALLY["cases"] += 1
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)
    account_id = (case.path_parameters or {}).get("account_id")
    writes = case.method.upper() in {"PUT", "POST", "DELETE"}
    if response.status_code < 400:
        TALLY["accepted"] += 1
        if isinstance(account_id, str) and writes:
            _written_accounts.add(account_id)
        return response
    TALLY["rejected"] += 1
    body = response.json()
    if "error" not in body:
        # A request the front door refuses as malformed HTTP (a header value h11 will not parse,
        # say) is answered by the gateway itself, as API Gateway answers one, and reaches no function.
        assert (response.status_code, body) == (400, {"message": "Bad Request"}), body
        TALLY["front_door_refusals"] += 1
    else:
        check_error_body(body, account_id)
    untouched = isinstance(account_id, str) and account_id and account_id not in _written_accounts
    if target.runtime is not None and writes and untouched and "/" not in str(account_id):
        assert partition_is_empty(target, str(account_id)), (case.method, case.formatted_path)
        TALLY["rejected_writes_checked"] += 1
    return response


def check_error_body(body: dict[str, Any], account_id: object) -> None:
    TALLY["validation_errors"] += body.get("error", {}).get("code") == "ValidationError"
    assert set(body) == {"error"}, body
    allowed = {"ValidationError", "NotFound", "LimitExceeded", "IdempotencyConflict", "HoldExpired"}
    # The organizations' refusals (an organization the fuzz created, "0" say, of accounts it wrote)
    allowed |= {"LimitBelowUsage", "AccountNotEmpty", "AccountInAnotherOrganization", "OrganizationNotEmpty"}
    if not (isinstance(account_id, str) and is_valid_id(account_id)):
        # The tenant token minted for a path account that is not an account id names no
        # account: refused before anything is read (api/access.py).
        allowed.add("Forbidden")
    assert body["error"]["code"] in allowed, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


def test_no_5xx_documented_errors_and_rejected_requests_write_nothing(target: Target) -> None:
    schema = load_schema(target)
    operations = [result.ok() for result in schema.get_all_operations()]
    # every route of the API is described and fuzzed (the console's page and files are not the API's)
    assert len(operations) == len(ROUTE_ACCESS) - len(CONSOLE_ROUTES)
    for operation, mode in itertools.product(operations, schemathesis.GenerationMode):

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def fuzz(case: Any) -> None:
            check_case(case, target)

        try:
            fuzz()
        except Unsatisfiable:
            # An operation without inputs that could be invalid (GET /openapi.json) has no
            # negative cases; anything else must generate.
            assert mode == schemathesis.GenerationMode.NEGATIVE
            assert operation.path == "/openapi.json", operation.path
    assert TALLY["rejected"] > 0
    assert TALLY["accepted"] > 0
    assert TALLY["validation_errors"] > 0
    assert target.runtime is None or TALLY["rejected_writes_checked"] > 0
    print(f"\nfuzz cases: {TALLY}")


def test_hostile_json_bodies_are_400_and_write_nothing(target: Target) -> None:
    schema = load_schema(target)
    operations = [result.ok() for result in schema.get_all_operations()]
    with_body = [operation for operation in operations if len(operation.body) > 0]
    # every operation that takes a body (the limits, plans, resources and resizes)
    assert {op.method.upper() for op in with_body} == {"PUT", "POST", "PATCH"}
    cases = 0
    for operation in with_body:

        @given(case=operation.as_strategy(schemathesis.GenerationMode.POSITIVE), raw=hostile_body())
        @settings(
            max_examples=max(10, EXAMPLES // 4),
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def fuzz(case: Any, raw: str) -> None:
            nonlocal cases
            case.body = raw.encode()  # bytes: sent as they are (schemathesis would json.dumps a value)
            response = check_case(case, target)
            assert response.status_code == 400, (case.method, case.formatted_path, raw[:200])
            assert response.json()["error"]["code"] == "ValidationError"
            cases += 1

        fuzz()
    assert cases >= len(with_body) * 10
    print(f"\nhostile body cases: {cases}")


UNAUTHENTICATED = {"cases": 0, "writes_checked": 0, "over_the_head_quota": 0}


def over_the_head_quota(request: requests.PreparedRequest) -> bool:
    """The request line and header values as sent are over API Gateway's 10,240 bytes, which it
    refuses before any authorizer (the local gateway: 400, docs/local-runtime.md). A generated
    case can be: a long id and a long query, percent-encoded (a clean clone's fuzz, 2026-11-28:
    an unauthenticated GET of an organization's history answered 400 where 401 was expected,
    refused by the gateway's head quota)."""
    line = len(str(request.method)) + len(request.path_url) + len(" HTTP/1.1") + 1
    values = sum(len(str(value).encode()) for value in request.headers.values())
    host = len(urlsplit(str(request.url)).netloc)  # (the Host header, added as it is sent)
    return line + values + host > MAX_REQUEST_HEAD


def test_without_credentials_every_operation_but_the_description_gets_401_and_writes_nothing(
    target: Target,
) -> None:
    schema = load_schema(target)
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation, mode in itertools.product(operations, schemathesis.GenerationMode):
        if operation.path == "/openapi.json":
            continue

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=max(10, EXAMPLES // 4),
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def fuzz(case: Any) -> None:
            response = with_headers(case, {}).call()
            UNAUTHENTICATED["cases"] += 1
            if over_the_head_quota(response.request):
                UNAUTHENTICATED["over_the_head_quota"] += 1
                assert (response.status_code, response.json()) == (400, {"message": "Bad Request"})
                return
            assert response.status_code == 401, (case.method, case.formatted_path, response.text)
            assert response.json() == {"message": "Unauthorized"}
            challenge = response.headers["www-authenticate"]  # schemathesis: a list per header
            assert (challenge[0] if isinstance(challenge, list) else challenge).startswith("Bearer")
            account_id = (case.path_parameters or {}).get("account_id")
            fresh = isinstance(account_id, str) and account_id and account_id not in _written_accounts
            if target.runtime is not None and fresh and "/" not in str(account_id):
                assert partition_is_empty(target, str(account_id)), (case.method, case.formatted_path)
                UNAUTHENTICATED["writes_checked"] += 1

        fuzz()
    assert UNAUTHENTICATED["cases"] >= 7 * 2  # every protected operation, valid and invalid inputs
    assert target.runtime is None or UNAUTHENTICATED["writes_checked"] > 0
    print(f"\nunauthenticated cases: {UNAUTHENTICATED}")
