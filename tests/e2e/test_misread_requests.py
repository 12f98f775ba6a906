"""Requests a caller may have meant otherwise are refused and write nothing (issue 23): a query
parameter the route does not take (``DELETE ...?dry_run=true`` deleted, before), one given twice,
and a kind named like a route (``history``: an override of it was one no GET could show).

Over HTTP through the target's gateway. Locally the account's partition is read too, to see
that nothing at all was written; against a deployed target the API's own reads say so."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest
import requests

from hybrid_counter.keys import account_pk
from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e


def new_account() -> str:
    return f"misread-{uuid.uuid4().hex[:10]}"


def refused_naming(response: requests.Response, word: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "ValidationError"
    assert word in error["message"]
    return str(error["message"])


def partition(target: Target, account: str) -> list[dict[str, Any]] | None:
    """Every item of the account's partition (locally), None on a remote target."""
    if target.runtime is None:
        return None
    dynamodb = boto3.client("dynamodb", endpoint_url=target.runtime.dynamodb_url)
    found = dynamodb.query(
        TableName=target.runtime.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": account_pk(account)}},
        ConsistentRead=True,
    )
    return list(found["Items"])


def test_a_delete_with_dry_run_is_refused_and_the_resource_is_still_there(target: Target) -> None:
    # Given a resource
    account = new_account()
    path = f"/accounts/{account}/kinds/projects/resources/keep-me"
    target.call("PUT", f"/accounts/{account}/limits/projects", {"limit": 5})
    assert target.call("PUT", path, {"name": "keep-me"}).status_code == 201
    target.settle()
    before = target.call("GET", f"/accounts/{account}/usage").json()["kinds"]["projects"]
    # When it is deleted "as a dry run" (deletes have none)
    response = target.call("DELETE", f"{path}?dry_run=true")
    # Then the delete is refused naming the parameter, and the resource and its count are there
    refused_naming(response, '"dry_run"')
    assert target.call("GET", path).json()["name"] == "keep-me"
    target.settle()
    assert target.call("GET", f"/accounts/{account}/usage").json()["kinds"]["projects"] == before
    # And the same delete without the parameter deletes it
    assert target.call("DELETE", path).status_code == 204


def test_the_legacy_delete_refuses_an_unknown_parameter_too(target: Target) -> None:
    account = new_account()
    path = f"/accounts/{account}/resources/keep-me"
    assert target.call("PUT", path, {"name": "keep-me"}).status_code == 201
    refused_naming(target.call("DELETE", f"{path}?confirm=false"), '"confirm"')
    assert target.call("GET", path).status_code == 200


def test_a_parameter_given_twice_is_refused_and_writes_nothing(target: Target) -> None:
    # Given a 1-unit resource with room for 3
    account = new_account()
    target.call("PUT", f"/accounts/{account}/limits/seats", {"limit": 3})
    path = f"/accounts/{account}/kinds/seats/resources/team"
    assert target.call("PUT", path, {"name": "team"}).status_code == 201
    target.settle()  # the stream path's writes (the counter's eventual count) done first
    before = partition(target, account)
    # When a resize sends dry_run twice (API Gateway joins the values: "true,true")
    response = target.call("PATCH", f"{path}?dry_run=true&dry_run=true", {"units": 2})
    # Then it is refused naming the parameter, and the resource kept its units
    refused_naming(response, '"dry_run" is given more than once')
    assert target.call("GET", path).json()["units"] == 1
    assert partition(target, account) == before


RESERVED_KIND_REQUESTS = [
    ("PUT", "/accounts/{a}/limits/history", {"limit": 5}),
    ("PUT", "/accounts/{a}/limits/history", {"limit": 5, "force": True}),
    ("DELETE", "/accounts/{a}/limits/history", None),
    ("DELETE", "/accounts/{a}/limits/history?force=true", None),
    ("POST", "/accounts/{a}/kinds/history/resources", {"name": "h"}),
    ("POST", "/accounts/{a}/kinds/history/resources?dry_run=true", {"name": "h"}),
    ("PUT", "/accounts/{a}/kinds/history/resources/h1", {"name": "h"}),
    ("PUT", "/accounts/{a}/kinds/history/resources/h1?dry_run=true", {"name": "h"}),
    ("PATCH", "/accounts/{a}/kinds/history/resources/h1", {"units": 2}),
    ("PATCH", "/accounts/{a}/kinds/history/resources/h1?dry_run=true", {"units": 2}),
    ("GET", "/accounts/{a}/kinds/history/resources/h1", None),
    ("GET", "/accounts/{a}/kinds/history/resources", None),
    ("DELETE", "/accounts/{a}/kinds/history/resources/h1", None),
    ("GET", "/accounts/{a}/limits/history?kind=history", None),
]


@pytest.mark.parametrize(("method", "path", "body"), RESERVED_KIND_REQUESTS)
def test_every_route_refuses_the_kind_history_and_writes_nothing(
    target: Target, method: str, path: str, body: Any
) -> None:
    # Given an account that has never been written
    account = new_account()
    # When a request names the kind history
    response = target.call(method, path.format(a=account), body)
    # Then it is refused naming the reserved word
    refused_naming(response, "'history' is reserved")
    # And nothing was written: no change in the history, no kind, no item at all
    history = target.call("GET", f"/accounts/{account}/limits/history")
    assert (history.status_code, history.json()["items"]) == (200, [])
    assert "history" not in target.call("GET", f"/accounts/{account}/usage").json()["kinds"]
    assert partition(target, account) in (None, [])


def test_a_plan_cannot_list_the_kind_history(target: Target) -> None:
    plan = f"misread-{uuid.uuid4().hex[:10]}"
    response = target.call("PUT", f"/plans/{plan}", {"limits": {"projects": 3, "history": 5}})
    refused_naming(response, "'history' is reserved")
    assert target.call("GET", f"/plans/{plan}").status_code == 404
    assert target.call("GET", f"/plans/{plan}/history").json()["items"] == []
