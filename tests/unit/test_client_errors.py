"""Each error answer (the API's `{"error": ...}` and API Gateway's `{"message": ...}`) becomes its
exception, with its fields."""

from __future__ import annotations

import json
from typing import cast

import httpx
import pytest

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import build_app
from hybrid_counter.api.errors import STATUS
from hybrid_counter.errors import DomainError
from hybrid_counter.errors import MembershipConflict as DomainMembershipConflict
from hybrid_counter_client import (
    Forbidden,
    HoldExpired,
    HybridCounterError,
    IdempotencyConflict,
    KindBelowUsage,
    LimitBelowUsage,
    LimitExceeded,
    MembershipConflict,
    NotFound,
    RetryPolicy,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnexpectedResponse,
    ValidationError,
)
from hybrid_counter_client.errors import error_from_response
from tests.unit.client_support import RESOURCE, Script, async_client, client, error, ok, run

NO_RETRIES = RetryPolicy(max_attempts=1)


def raised_by(answer: httpx.Response) -> HybridCounterError:
    with pytest.raises(HybridCounterError) as raised:
        client(Script(answer), policy=NO_RETRIES).put("acme", "r-1", "web", kind="projects")
    return raised.value


@pytest.mark.parametrize(
    ("answer", "cls", "fields"),
    [
        pytest.param(
            error(400, "ValidationError", "name: Input should be a valid string"),
            ValidationError,
            {"status": 400, "code": "ValidationError", "message": "name: Input should be a valid string"},
            id="ValidationError",
        ),
        pytest.param(
            error(404, "NotFound", "resource not found"),
            NotFound,
            {"status": 404, "code": "NotFound", "message": "resource not found"},
            id="NotFound",
        ),
        pytest.param(
            error(403, "Forbidden", "this caller may not act on that account"),
            Forbidden,
            {"status": 403, "code": "Forbidden", "message": "this caller may not act on that account"},
            id="Forbidden-the-api",
        ),
        pytest.param(
            error(409, "LimitExceeded", "at its limit", limit=2, used=2, kind="projects"),
            LimitExceeded,
            {
                "status": 409,
                "code": "LimitExceeded",
                "kind": "projects",
                "limit": 2,
                "used": 2,
                "scope": "account",
            },
            id="LimitExceeded",
        ),
        pytest.param(
            error(
                409, "LimitExceeded", "org at its limit", limit=10, used=9, kind="seats", scope="organization"
            ),
            LimitExceeded,
            {"kind": "seats", "limit": 10, "used": 9, "scope": "organization"},
            id="LimitExceeded-by-the-organization",
        ),
        pytest.param(
            error(409, "AccountNotEmpty", "holds resources"),
            MembershipConflict,
            {"status": 409, "code": "AccountNotEmpty", "message": "holds resources"},
            id="MembershipConflict-AccountNotEmpty",
        ),
        pytest.param(
            error(409, "AccountInAnotherOrganization", "belongs to g2"),
            MembershipConflict,
            {"status": 409, "code": "AccountInAnotherOrganization"},
            id="MembershipConflict-AccountInAnotherOrganization",
        ),
        pytest.param(
            error(409, "OrganizationNotEmpty", "has members"),
            MembershipConflict,
            {"status": 409, "code": "OrganizationNotEmpty"},
            id="MembershipConflict-OrganizationNotEmpty",
        ),
        pytest.param(
            error(409, "LimitExceeded", "at its limit", limit=3, used=3),
            LimitExceeded,
            {"kind": None, "limit": 3, "used": 3, "scope": "account"},  # (a stack from before scopes)
            id="LimitExceeded-without-kind",
        ),
        pytest.param(
            error(409, "IdempotencyConflict", "exists with another body"),
            IdempotencyConflict,
            {"status": 409, "code": "IdempotencyConflict", "message": "exists with another body"},
            id="IdempotencyConflict",
        ),
        pytest.param(
            error(409, "HoldExpired", "the hold on r-1 expired"),
            HoldExpired,
            {"status": 409, "code": "HoldExpired", "message": "the hold on r-1 expired"},
            id="HoldExpired",
        ),
        pytest.param(
            error(
                409,
                "LimitBelowUsage",
                "below",
                kind="seats",
                limit=1,
                used=4,
                kinds=[{"kind": "seats", "limit": 1, "used": 4}],
            ),
            LimitBelowUsage,
            {"kind": "seats", "limit": 1, "used": 4, "kinds": (KindBelowUsage("seats", 1, 4),)},
            id="LimitBelowUsage-one-kind",
        ),
        pytest.param(
            error(
                409,
                "LimitBelowUsage",
                "below",
                kinds=[{"kind": "seats", "limit": 1, "used": 4}, {"kind": "projects", "limit": 0, "used": 2}],
            ),
            LimitBelowUsage,
            {
                "kind": None,
                "limit": None,
                "used": None,
                "kinds": (KindBelowUsage("seats", 1, 4), KindBelowUsage("projects", 0, 2)),
            },
            id="LimitBelowUsage-two-kinds",
        ),
        pytest.param(
            error(429, "TooManyRequests", "throttled", headers={"Retry-After": "1"}),
            TooManyRequests,
            {"status": 429, "code": "TooManyRequests", "retry_after": 1.0},
            id="TooManyRequests",
        ),
        pytest.param(
            error(503, "ServiceUnavailable", "try again", headers={"Retry-After": "1"}),
            ServiceUnavailable,
            {"status": 503, "code": "ServiceUnavailable", "retry_after": 1.0, "message": "try again"},
            id="ServiceUnavailable",
        ),
        # API Gateway's own answers: no code, mapped by status.
        pytest.param(
            httpx.Response(401, json={"message": "Unauthorized"}, headers={"www-authenticate": "Bearer"}),
            Unauthorized,
            {"status": 401, "code": "Unauthorized", "message": "Unauthorized"},
            id="Unauthorized-gateway",
        ),
        pytest.param(
            httpx.Response(403, json={"message": "Forbidden"}),
            Forbidden,
            {"status": 403, "code": "Forbidden", "message": "Forbidden"},
            id="Forbidden-gateway-scope",
        ),
        pytest.param(
            httpx.Response(403, json={"message": "The request signature we calculated does not match"}),
            Forbidden,
            {"code": "Forbidden", "message": "The request signature we calculated does not match"},
            id="Forbidden-gateway-sigv4",
        ),
        pytest.param(
            httpx.Response(429, json={"message": "Too Many Requests"}),
            TooManyRequests,
            {"code": "TooManyRequests", "retry_after": None},
            id="TooManyRequests-gateway",
        ),
        pytest.param(
            httpx.Response(404, json={"message": "Not Found"}),
            NotFound,
            {"code": "NotFound", "message": "Not Found"},
            id="NotFound-gateway",
        ),
    ],
)
def test_each_error_answer_is_its_exception_with_its_fields(answer, cls, fields):
    raised = raised_by(answer)
    assert type(raised) is cls
    assert {name: getattr(raised, name) for name in fields} == fields


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        pytest.param(
            httpx.Response(500, json={"message": "Internal Server Error"}), "HTTP500", "Internal Server Error"
        ),
        pytest.param(
            httpx.Response(502, text="<html>bad gateway</html>"), "HTTP502", "<html>bad gateway</html>"
        ),
        pytest.param(httpx.Response(504, content=b""), "HTTP504", "Gateway Timeout"),
        pytest.param(
            error(409, "SomethingNew", "a code this client does not know"),
            "SomethingNew",
            "a code this client does not know",
        ),
    ],
)
def test_other_answers_are_the_base_error_with_what_they_said(answer, code, message):
    raised = raised_by(answer)
    assert type(raised) is HybridCounterError
    assert (raised.status, raised.code, raised.message) == (answer.status_code, code, message)


def test_a_limit_exceeded_without_its_numbers_is_not_made_up():
    raised = raised_by(error(409, "LimitExceeded", "no numbers"))
    assert type(raised) is HybridCounterError
    assert raised.code == "LimitExceeded"


def test_the_error_body_is_kept_for_fields_this_client_does_not_know():
    raised = raised_by(error(409, "LimitExceeded", "m", limit=1, used=1, kind="seats", units=3))
    assert raised.body["units"] == 3


def test_every_api_code_has_its_class():
    # The codes the API answers (layers/counter/hybrid_counter/errors.py and api/access.py);
    # a membership conflict's code is its instance's (below).
    for domain_error, status in STATUS.items():
        if domain_error is DomainMembershipConflict:
            continue
        code = cast("type[DomainError]", domain_error).code
        answer = error(status, code, "m", limit=1, used=1)
        assert type(error_from_response(answer)).__name__ == code, code


def test_every_membership_conflict_code_the_api_documents_is_a_membership_conflict():
    # Given the codes of the 409s the organizations' routes document
    app = build_app(lambda: None, AccessPolicy())  # type: ignore[arg-type, return-value]
    document = json.loads(app.get_openapi_json_schema())
    documented = {
        name.removesuffix("Detail")
        for name, schema in document["components"]["schemas"].items()
        if name.endswith("Detail") and schema["properties"]["code"].get("enum")
    } - {
        "ValidationError",
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "LimitExceeded",
        "IdempotencyConflict",
        "HoldExpired",
        "LimitBelowUsage",
        "TooManyRequests",
        "ServiceUnavailable",
    }
    # Then they are the client's membership codes, each read as MembershipConflict
    assert documented == MembershipConflict.CODES
    for code in documented:
        raised = error_from_response(error(409, code, "m"))
        assert (type(raised), raised.code) == (MembershipConflict, code)


def test_a_confirm_after_the_deadline_raises_hold_expired_and_is_not_retried():
    script = Script(error(409, "HoldExpired", "the hold on r-1 expired"), then=ok(RESOURCE))
    with pytest.raises(HoldExpired) as raised:
        client(script).confirm("acme", "r-1", kind="projects")
    assert (raised.value.status, raised.value.code) == (409, "HoldExpired")
    assert isinstance(raised.value, HybridCounterError)
    assert not isinstance(raised.value, MembershipConflict)
    assert [(r.method, r.url.path) for r in script.requests] == [
        ("POST", "/accounts/acme/kinds/projects/resources/r-1/confirm")
    ]


def test_retry_after_as_an_http_date_is_read():
    answer = httpx.Response(
        503, json={"message": "x"}, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    assert error_from_response(answer).retry_after == 0.0  # long past: no wait
    garbled = httpx.Response(503, json={"message": "x"}, headers={"Retry-After": "soon"})
    assert error_from_response(garbled).retry_after is None


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"account_id": "acme"}, id="fields-missing"),
        pytest.param(
            {
                **{"account_id": "acme", "kind": "k", "resource_id": "r"},
                "name": "n",
                "units": "2",
                "created_at": "t",
            },
            id="units-a-string",
        ),
        pytest.param(["not", "an", "object"], id="a-list"),
    ],
)
def test_a_success_whose_body_is_not_the_apis_is_unexpected_response(body):
    with pytest.raises(UnexpectedResponse) as raised:
        client(Script(httpx.Response(200, json=body))).get("acme", "r-1")
    assert raised.value.status == 200


def test_a_success_that_is_not_json_is_unexpected_response():
    with pytest.raises(UnexpectedResponse):
        client(Script(httpx.Response(200, text="<html>a captive portal</html>"))).usage("acme")


@pytest.mark.parametrize(
    ("kind", "path", "hint"),
    [
        pytest.param(
            None,
            "/accounts/acme/resources/r-1",
            "looked for it among the stack's default kind, as no kind= was given; "
            "pass kind= for a resource of another kind",
            id="no-kind",
        ),
        pytest.param(
            "seats",
            "/accounts/acme/kinds/seats/resources/r-1",
            "looked for it among kind 'seats'; pass the resource's own kind as kind=",
            id="a-kind",
        ),
    ],
)
def test_a_resource_not_found_by_id_says_which_kind_it_was_looked_for_in(kind, path, hint):
    # Given a resource the API does not find where the call looks
    gone = error(404, "NotFound", "resource r-1 not found")
    sync_script, async_script = Script(gone), Script(gone)
    # When it is deleted by id, from the sync and the async client
    with pytest.raises(NotFound) as raised:
        client(sync_script, policy=NO_RETRIES).delete("acme", "r-1", kind=kind)
    with pytest.raises(NotFound) as raised_async:
        run(async_client(async_script, policy=NO_RETRIES).delete("acme", "r-1", kind=kind))
    # Then the error names the kind it looked in and that kind= exists; the API's message is kept
    for failure, script in ((raised.value, sync_script), (raised_async.value, async_script)):
        assert [(r.method, r.url.path) for r in script.requests] == [("DELETE", path)]
        assert (failure.message, failure.hint) == ("resource r-1 not found", hint)
        assert str(failure) == f"404 NotFound: resource r-1 not found ({hint})"


def test_each_by_id_resource_call_hints_at_the_kind_and_others_do_not():
    gone = error(404, "NotFound", "not found")
    calls = {
        "get": lambda api: api.get("acme", "r-1"),
        "confirm": lambda api: api.confirm("acme", "r-1"),
        "resize": lambda api: api.resize("acme", "r-1", 3, kind="seats"),
        "would_resize": lambda api: api.would_resize("acme", "r-1", 3, kind="seats"),
        "get_plan": lambda api: api.get_plan("pro"),
    }
    hints = {}
    for name, call in calls.items():
        with pytest.raises(NotFound) as raised:
            call(client(Script(gone), policy=NO_RETRIES))
        hints[name] = raised.value.hint
    assert hints["get"] == hints["confirm"]
    assert hints["get"] is not None
    assert "no kind= was given" in hints["get"]
    assert (
        hints["resize"]
        == hints["would_resize"]
        == "looked for it among kind 'seats'; pass the resource's own kind as kind="
    )
    assert hints["get_plan"] is None  # a plan has no kind: its 404 is the API's alone
