"""A route takes exactly the query parameters it declares (api/query.py): any other, or one given
twice, is a 400 ValidationError naming it, before the service is asked anything. Every route of
the resolver is checked, so a route added later is covered without being listed here."""

from __future__ import annotations

import json

import pytest

from hybrid_counter.api.access import ROUTE_ACCESS
from hybrid_counter.api.console_routes import CONSOLE_ROUTES
from hybrid_counter.api.query import REFUSED, declared_query
from tests.unit.api_routes import QUERY_VALUES, answer, event_for, every_route, route_id

# The API's routes (the console's page and files answer HTML, not JSON: test_console_routes.py)
ROUTES = [route for route in every_route() if (route.method, route.openapi_path) not in CONSOLE_ROUTES]
WITH_QUERY = [route for route in ROUTES if declared_query(route)]


def test_the_routes_are_enumerated_from_the_resolver():
    # Given the resolver's routes, Then they are every route that has an access rule
    assert {(route.method, route.openapi_path) for route in ROUTES} == set(ROUTE_ACCESS) - CONSOLE_ROUTES


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_a_query_parameter_the_route_does_not_declare_is_refused_naming_it(route):
    # Given a request the route answers without a 4xx
    status, _, _ = answer(event_for(route))
    assert status < 400 or status == 404, (status, route_id(route))
    # When the same request carries a parameter the route does not declare
    status, body, calls = answer(event_for(route, "verbose=1"))
    # Then it is a 400 ValidationError naming the parameter, and the service was asked nothing
    assert status == 400
    assert body["error"]["code"] == "ValidationError"
    assert '"verbose"' in body["error"]["message"]
    assert calls == []


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_every_declared_parameter_is_taken(route):
    # Given every parameter the route declares, each with a valid value
    query = "&".join(f"{name}={QUERY_VALUES[name]}" for name in sorted(declared_query(route)))
    # When the route is called with them
    status, body, _ = answer(event_for(route, query))
    # Then none of them is refused
    assert status != 400, (route_id(route), body)


@pytest.mark.parametrize(
    "route",
    [route for route in ROUTES if route.method == "DELETE"],
    ids=route_id,
)
def test_a_delete_with_dry_run_deletes_nothing(route):
    # Given a delete (no delete takes dry_run)
    # When it is sent with ?dry_run=true
    status, body, calls = answer(event_for(route, "dry_run=true"))
    # Then it is refused and the service was never asked to delete (or to change a limit)
    assert (status, body["error"]["code"]) == (400, "ValidationError")
    assert '"dry_run"' in body["error"]["message"]
    assert calls == []


@pytest.mark.parametrize("route", WITH_QUERY, ids=route_id)
def test_a_declared_parameter_given_twice_is_refused_even_with_the_same_value(route):
    name = sorted(declared_query(route))[0]
    value = QUERY_VALUES[name]
    # Given the event API Gateway builds for ?name=v&name=v (its values joined: "v,v")
    event = event_for(route, f"{name}={value}&{name}={value}")
    assert event["queryStringParameters"] == {name: f"{value},{value}"}
    # When it is answered
    status, body, calls = answer(event)
    # Then it is a 400 naming the parameter, and nothing was asked of the service
    assert (status, body["error"]["code"]) == (400, "ValidationError")
    assert f'"{name}" is given more than once' in body["error"]["message"]
    assert calls == []


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("dry%5Frun=true", '"dry_run"'),  # percent-encoded: the name API Gateway decodes
        ("dry_run", '"dry_run"'),  # a name without a value
        ("=true", '""'),  # a value without a name
        ("b=1&a=2", '"a", "b"'),  # each one named
    ],
)
def test_unknown_parameters_are_named_however_they_are_written(query, named):
    route = next(r for r in ROUTES if route_id(r) == "DELETE /accounts/{account_id}/resources/{resource_id}")
    status, body, calls = answer(event_for(route, query))
    assert (status, calls) == (400, [])
    assert named in body["error"]["message"]


def test_an_event_with_parsed_parameters_only_is_judged_by_those():
    # Given an event that carries queryStringParameters but no rawQueryString
    route = next(r for r in ROUTES if route_id(r) == "GET /accounts/{account_id}/usage")
    event = event_for(route)
    event.pop("rawQueryString")
    event["queryStringParameters"] = {"kind": "projects"}
    # When it is answered, Then the parameter the route does not declare is refused
    status, body, calls = answer(event)
    assert (status, calls) == (400, [])
    assert '"kind"' in body["error"]["message"]


def test_the_description_lists_exactly_the_parameters_each_operation_takes():
    # Given the description the API serves
    openapi = next(r for r in ROUTES if route_id(r) == "GET /openapi.json")
    status, document, _ = answer(event_for(openapi))
    assert status == 200
    # Then each operation lists as query parameters exactly those its route takes, says that
    # others are refused, and documents the 400 they get
    assert REFUSED in document["info"]["description"]
    for route in ROUTES:
        operation = document["paths"][route.openapi_path][route.method.lower()]
        listed = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert listed == declared_query(route), route_id(route)
        assert operation["description"].endswith(REFUSED), route_id(route)
        assert "400" in operation["responses"], route_id(route)
        assert "query parameter" in operation["responses"]["400"]["description"]
    # And the refusal sentence is in the rendered reference's source as served (once per operation)
    assert json.dumps(document).count(REFUSED) == len(ROUTES) + 1


def test_a_request_signed_in_its_query_string_is_not_refused_for_its_signature():
    # Given a DELETE presigned with SigV4 (AuthMode=iam: API Gateway checks the X-Amz-* parameters)
    route = next(r for r in ROUTES if route_id(r) == "GET /accounts/{account_id}/usage")
    signed = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261125&X-Amz-Signature=ab12"
    # When it is answered, Then its signature parameters are not taken for the route's own
    status, _, _ = answer(event_for(route, signed))
    assert status != 400
    # And an unknown parameter beside them is still refused
    status, body, _ = answer(event_for(route, f"{signed}&dry_run=true"))
    assert status == 400
    assert '"dry_run"' in body["error"]["message"]


@pytest.mark.parametrize(
    ("value", "forced"),
    [
        *[(value, True) for value in ("true", "TRUE", "1", "yes", "on")],
        *[(value, False) for value in ("false", "0", "no", "off")],
    ],
)
def test_a_boolean_parameter_takes_the_spellings_the_user_guide_lists(value, forced):
    # Given DELETE of an override with ?force=<value> (user-guide.md, Routes)
    route = next(r for r in ROUTES if route_id(r) == "DELETE /accounts/{account_id}/limits/{kind}")
    # When it is answered
    status, _, calls = answer(event_for(route, f"force={value}"))
    # Then it is taken as the boolean it spells
    assert status == 204
    assert calls == [
        ("remove_limit", ("acct-demo", {"kind": "projects", **({"force": True} if forced else {})}))
    ]


@pytest.mark.parametrize("value", ["maybe", "", "2", "truee"])
def test_a_boolean_parameter_of_any_other_value_is_refused(value):
    route = next(r for r in ROUTES if route_id(r) == "DELETE /accounts/{account_id}/limits/{kind}")
    status, body, calls = answer(event_for(route, f"force={value}"))
    assert (status, body["error"]["code"], calls) == (400, "ValidationError", [])


def _integer_parameters() -> list[tuple[str, str]]:
    """(route id, name) of every query parameter the description types as an integer."""
    openapi = next(r for r in ROUTES if route_id(r) == "GET /openapi.json")
    _, document, _ = answer(event_for(openapi))
    found = []
    for route in ROUTES:
        operation = document["paths"][route.openapi_path][route.method.lower()]
        for parameter in operation.get("parameters", []):
            schema = parameter["schema"]
            types = {schema.get("type"), *(s.get("type") for s in schema.get("anyOf", []))}
            if parameter["in"] == "query" and "integer" in types:
                found.append((route_id(route), parameter["name"]))
    return found


INTEGER_PARAMETERS = _integer_parameters()


def test_the_integer_parameters_are_found():
    # (so that the test below cannot pass by finding none)
    assert {name for _, name in INTEGER_PARAMETERS} == {"limit", "top", "threshold", "hold_seconds"}


# As sent in the URL: "+5", " 5", "5 ", "1_0" (pydantic's lax int reads them as 5 and 10),
# an Arabic-Indic 3 (a digit to str.isdigit), "5.0", "0x5"
NOT_DECIMAL_DIGITS = ["%2B5", "%205", "5%20", "1_0", "%D9%A3", "5.0", "0x5"]


@pytest.mark.parametrize(("route_name", "name"), INTEGER_PARAMETERS, ids=str)
@pytest.mark.parametrize("value", NOT_DECIMAL_DIGITS)
def test_an_integer_parameter_is_decimal_digits_only(route_name, name, value):
    route = next(r for r in ROUTES if route_id(r) == route_name)
    # Given the route's valid request with the integer parameter written other than in digits
    event = event_for(route, f"{name}={value}")
    # When it is answered
    status, body, calls = answer(event)
    # Then it is a 400 ValidationError, and the service was asked nothing
    code = body.get("error", {}).get("code") if isinstance(body, dict) else None
    assert (status, code, calls) == (400, "ValidationError", []), event["queryStringParameters"]
