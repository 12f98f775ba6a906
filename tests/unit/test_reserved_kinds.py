"""A kind is never named like a route (keys.RESERVED_KINDS): wherever a kind is named (a path's
{kind}, a plan's limits, the history's filter) a reserved word is a 400 ValidationError naming
it, before the service is asked anything; and the list covers every word the routes use."""

from __future__ import annotations

import json
import re

import pytest

from hybrid_counter.api.query import declared_query
from hybrid_counter.keys import RESERVED_KINDS
from hybrid_counter.settings import Settings
from tests.unit.api_routes import answer, event_for, every_route, route_id

ROUTES = every_route()
KIND_ROUTES = [route for route in ROUTES if "{kind}" in route.openapi_path]
# The routes that take a kind as a filter (?kind=): the account's and the organization's history,
# and who is at or over a threshold
FILTER_ROUTES = [route for route in ROUTES if "kind" in declared_query(route)]


def assert_refused_naming(status: int, body: dict, calls: list, word: str) -> None:
    assert (status, body["error"]["code"]) == (400, "ValidationError")
    assert f"'{word}' is reserved" in body["error"]["message"]
    assert calls == []


def same_segment(a: str, b: str) -> bool:
    """Two path segments match the same requests: equal, or both parameters."""
    return a == b or (a.startswith("{") and b.startswith("{"))


def test_every_word_a_route_uses_beside_a_kind_is_reserved():
    # Given every route's path, and the literal segments of routes that stand where another
    # route has {kind} (the same segments before it)
    paths = [route.openapi_path.strip("/").split("/") for route in ROUTES]
    beside_a_kind = {
        other[at]
        for path in paths
        for at, segment in enumerate(path)
        if segment == "{kind}"
        for other in paths
        if len(other) > at and not other[at].startswith("{") and all(map(same_segment, other[:at], path[:at]))
    }
    # Then each of them is a reserved kind name (history: GET /accounts/{a}/limits/history)
    assert "history" in beside_a_kind  # the scan finds the collision the issue names
    assert beside_a_kind <= RESERVED_KINDS


# Each route that names a kind, and each of those that take a dry run with ?dry_run=true too
CASES = [(route, "") for route in KIND_ROUTES] + [
    (route, "dry_run=true") for route in KIND_ROUTES if "dry_run" in declared_query(route)
]


@pytest.mark.parametrize(("route", "query"), CASES, ids=[f"{route_id(r)}?{q}" for r, q in CASES])
def test_a_route_naming_a_reserved_kind_refuses_it(route, query):
    # Given a request that is valid but for its kind, history
    assert answer(event_for(route, query))[0] != 400
    # When it names the kind history
    status, body, calls = answer(event_for(route, query, path={"kind": "history"}))
    # Then it is refused naming the word, and nothing was asked of the service
    assert_refused_naming(status, body, calls, "history")


def test_a_plan_cannot_give_a_reserved_kind_a_limit():
    route = next(r for r in ROUTES if route_id(r) == "PUT /plans/{plan_id}")
    # When a plan lists history among its kinds
    status, body, calls = answer(event_for(route, body={"limits": {"projects": 3, "history": 5}}))
    # Then the plan is refused naming the word, and nothing was written
    assert_refused_naming(status, body, calls, "history")


def test_the_kind_filters_are_the_histories_and_the_near_limit_list():
    assert sorted(map(route_id, FILTER_ROUTES)) == [
        "GET /accounts/{account_id}/limits/history",
        "GET /orgs/{org_id}/limits/history",
        "GET /usage/over",
    ]


@pytest.mark.parametrize("route", FILTER_ROUTES, ids=route_id)
def test_the_history_filter_refuses_a_reserved_kind(route):
    # Given a history request filtered by a kind that is valid
    assert answer(event_for(route, "kind=projects"))[0] == 200
    # When the filter names history, Then it is refused naming the word
    status, body, calls = answer(event_for(route, "kind=history"))
    assert_refused_naming(status, body, calls, "history")


def test_a_kind_that_only_resembles_a_reserved_word_is_a_kind():
    route = next(r for r in ROUTES if route_id(r) == "PUT /accounts/{account_id}/limits/{kind}")
    for kind in ["History", "history2", "histories"]:
        status, _, calls = answer(event_for(route, path={"kind": kind}))
        assert status == 200
        assert calls[-1][0] == "set_limit"


def test_the_description_says_which_kinds_are_reserved():
    openapi = next(r for r in ROUTES if route_id(r) == "GET /openapi.json")
    _, document, _ = answer(event_for(openapi))
    text = json.dumps(document)
    # every kind parameter (path and filter) and a plan's limits' names exclude the reserved words
    not_reserved = {"not": {"enum": sorted(RESERVED_KINDS)}}
    kind_parameters = [
        parameter
        for operations in document["paths"].values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "kind"
    ]
    assert len(kind_parameters) == len(KIND_ROUTES) + len(FILTER_ROUTES)  # and the history filters
    for parameter in kind_parameters:
        schema = parameter["schema"]
        assert not_reserved.items() <= next(iter(schema.get("anyOf", [schema]))).items()
    limits = document["components"]["schemas"]["PlanBody"]["properties"]["limits"]
    assert limits["propertyNames"] == not_reserved
    assert re.search(r"not history \(reserved", text)


def test_a_stack_whose_default_kind_is_reserved_does_not_start():
    with pytest.raises(RuntimeError, match="'history' is reserved"):
        Settings.from_env({"TABLE_NAME": "t", "DEFAULT_KIND": "history"})
