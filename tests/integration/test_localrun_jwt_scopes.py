"""The local JWT authorizer grants a route's scope only to a token that has exactly that scope.

Every operator power hangs on this check: a token whose scope merely resembles
`hybrid-counter/operator` (longer, shorter, inside another, in another case) must get 403, in
whichever claim and form it comes; the exact scope must pass, alone or among others. API Gateway:
"If you configure scopes for a route, the token must include at least one of the route's
scopes", read from the token's `scope` or `scp` claim (developer guide, "Control access to HTTP
APIs with JWT authorizers"); OAuth scopes are case-sensitive strings (RFC 6749, 3.3).

First the authorizer on its own (JwtVerifier, with a real local issuer's keys), then a few cases
through the gateway over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from localrun.gateway.jwt_authorizer import JwtAuthorizer, JwtVerifier, TokenRejected
from tests.integration.local_gateway import (
    AUDIENCE,
    OPERATOR_SCOPE,
    LocalGateway,
    bearer,
    local_gateway,
    request,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OPERATOR_ROUTE = (OPERATOR_SCOPE,)
NEAR_MISSES = [
    "hybrid-counter/operatorx",  # a suffix added
    "xhybrid-counter/operator",  # a prefix added
    "hybrid-counter/operator/extra",  # extended
    "hybrid-counter/operators",
    "hybrid-counter/Operator",  # case variants
    "HYBRID-COUNTER/OPERATOR",
    "hybrid-counter",  # a part of it
    "hybrid-counter/",
    "operator",
    "hybrid-counter/operato",
]


def shapes(scope: str) -> list[tuple[str, dict[str, Any]]]:
    """``scope`` in each form a token can carry it: alone or among others, string or list, scope or scp."""
    return [
        ("scope string", {"scope": scope}),
        ("scope string among others", {"scope": f"read {scope} write"}),
        ("scope list", {"scope": [scope]}),
        ("scope list among others", {"scope": ["read", scope, "write"]}),
        ("scp list", {"scp": [scope]}),
        ("scp list among others", {"scp": ["read", scope]}),
        ("scp string among others", {"scp": f"read {scope}"}),
    ]


REFUSED = [
    pytest.param(claims, id=f"{miss} as {shape}") for miss in NEAR_MISSES for shape, claims in shapes(miss)
] + [
    pytest.param({}, id="no scope claim"),
    pytest.param({"scope": None}, id="scope null"),
    pytest.param({"scope": ""}, id="scope empty"),
    pytest.param({"scope": "   "}, id="scope blank"),
    pytest.param({"scope": []}, id="scope empty list"),
    pytest.param({"scp": []}, id="scp empty list"),
    pytest.param({"scope": "read write"}, id="other scopes only"),
    pytest.param(
        {"scope": "hybrid-counter/operatorhybrid-counter/operator"}, id="the scope twice without a space"
    ),
    pytest.param({"scope": ["hybrid-counter/operator extra"]}, id="one list item that contains it"),
    pytest.param({"scope": {OPERATOR_SCOPE: True}}, id="an object keyed by it"),
    pytest.param({"scope": [[OPERATOR_SCOPE]]}, id="a nested list"),
    pytest.param(
        {"scope": "hybrid-counter/operatorx", "scp": ["HYBRID-COUNTER/OPERATOR"]}, id="near misses in both"
    ),
]

ACCEPTED = [pytest.param(claims, id=shape) for shape, claims in shapes(OPERATOR_SCOPE)] + [
    pytest.param({"scope": f"{OPERATOR_SCOPE} {OPERATOR_SCOPE}"}, id="scope given twice"),
    pytest.param({"scope": "read", "scp": [OPERATOR_SCOPE]}, id="in scp, other scopes in scope"),
    pytest.param(
        {"scope": "hybrid-counter/operatorx", "scp": [OPERATOR_SCOPE]}, id="exact in scp, near miss in scope"
    ),
    pytest.param({"scope": ["hybrid-counter/Operator", OPERATOR_SCOPE]}, id="exact beside a case variant"),
]


@pytest.fixture(scope="module")
def served() -> Iterator[LocalGateway]:
    with local_gateway() as running:
        yield running


@pytest.fixture(scope="module")
def verifier(served: LocalGateway) -> JwtVerifier:
    return JwtVerifier(JwtAuthorizer("TokenAuthorizer", served.issuer.url, (AUDIENCE,)))


# -- the authorizer on its own ----------------------------------------------------------------------


@pytest.mark.parametrize("claims", REFUSED)
def test_the_authorizer_refuses_a_scope_that_only_resembles_the_routes(
    served: LocalGateway, verifier: JwtVerifier, claims: dict[str, Any]
) -> None:
    # Given an otherwise valid token whose scopes do not include the route's exactly
    token = served.token(**claims) if claims else served.token()

    # When it asks for a route that needs hybrid-counter/operator
    with pytest.raises(TokenRejected) as refused:
        verifier.verify(f"Bearer {token}", OPERATOR_ROUTE)

    # Then it is refused as lacking the scope (API Gateway's 403), not as an invalid token (401)
    assert (refused.value.status, refused.value.description) == (
        403,
        "the token does not have a required scope",
    )


@pytest.mark.parametrize("claims", ACCEPTED)
def test_the_authorizer_grants_the_exact_scope_in_any_claim_and_form(
    served: LocalGateway, verifier: JwtVerifier, claims: dict[str, Any]
) -> None:
    # Given a token that has the route's scope exactly, in some claim and form
    token = served.token(**claims)

    # When it asks for the route
    context = verifier.verify(f"Bearer {token}", OPERATOR_ROUTE)

    # Then it passes, and the function is told the token's scopes, the route's among them
    assert OPERATOR_SCOPE in context["jwt"]["scopes"]


def test_any_one_of_a_routes_scopes_is_enough_and_near_misses_of_each_are_not(
    served: LocalGateway, verifier: JwtVerifier
) -> None:
    # Given a route that takes either of two scopes
    route = (OPERATOR_SCOPE, "hybrid-counter/auditor")

    # When tokens with one of them, or near misses of both, ask for it
    def status(scope: str) -> int:
        try:
            verifier.verify(f"Bearer {served.token(scope=scope)}", route)
        except TokenRejected as refused:
            return refused.status
        return 200

    # Then exactly the route's scopes pass
    assert status("hybrid-counter/auditor") == 200
    assert status(f"read {OPERATOR_SCOPE}") == 200
    assert status("hybrid-counter/auditors xhybrid-counter/operator hybrid-counter/Auditor") == 403


def test_a_route_without_scopes_lets_any_valid_token_through_and_passes_no_scopes(
    served: LocalGateway, verifier: JwtVerifier
) -> None:
    # Given tokens with no scope, a near miss, and the operator scope
    tokens = [
        served.token(),
        served.token(scope="xhybrid-counter/operator"),
        served.token(scope=OPERATOR_SCOPE),
    ]

    # When each asks for a route that needs no scope
    contexts = [verifier.verify(f"Bearer {token}", ()) for token in tokens]

    # Then all pass, and the function sees scopes null, as API Gateway passes them on such routes
    assert [context["jwt"]["scopes"] for context in contexts] == [None, None, None]


# -- through the gateway ------------------------------------------------------------------------------

THROUGH_HTTP = [
    pytest.param({"scope": OPERATOR_SCOPE}, 200, id="exact scope"),
    pytest.param({"scp": ["read", OPERATOR_SCOPE]}, 200, id="exact scope in an scp list among others"),
    pytest.param({"scope": "read hybrid-counter/operatorx"}, 403, id="suffix"),
    pytest.param({"scp": ["xhybrid-counter/operator"]}, 403, id="prefix in scp"),
    pytest.param({"scope": ["hybrid-counter/operator/extra"]}, 403, id="extension in a scope list"),
    pytest.param({"scope": "HYBRID-COUNTER/OPERATOR"}, 403, id="upper case"),
    pytest.param({"scope": "hybrid-counter"}, 403, id="a part of it"),
    pytest.param({}, 403, id="no scope"),
]


@pytest.mark.parametrize(("claims", "status"), THROUGH_HTTP)
def test_operator_routes_over_http_need_the_exact_scope(
    served: LocalGateway, claims: dict[str, Any], status: int
) -> None:
    # Given a token with these scopes
    served.events.clear()
    token = served.token(**claims) if claims else served.token()

    # When it calls the operator routes through the gateway (a read and a write)
    answers = [
        served.get("/plans", token),
        request(served.port, "PUT", "/plans/pro", bearer(token), b'{"limits": {"projects": 5}}'),
    ]

    # Then they are served only to the exact scope, and a refused token reaches no function
    assert [answer.status for answer in answers] == [status, status], answers[0].body
    if status == 403:
        assert [answer.json() for answer in answers] == [{"message": "Forbidden"}] * 2
        assert served.events == []
    else:
        assert [event["routeKey"] for event in served.events] == ["GET /plans", "PUT /plans/{plan_id}"]
