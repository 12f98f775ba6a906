"""The walk-through and the HTTP contract, over HTTP against the chosen target."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Target, eventually

pytestmark = pytest.mark.e2e


def new_account() -> str:
    return f"e2e-{uuid.uuid4().hex[:12]}"


def usage(target: Target, account: str) -> dict:
    response = target.call("GET", f"/accounts/{account}/usage")
    assert response.status_code == 200
    return response.json()


def all_resources(target: Target, account: str) -> list[dict]:
    items, token = [], None
    while True:
        query = f"?limit=100&next_token={token}" if token else "?limit=100"
        page = target.call("GET", f"/accounts/{account}/resources{query}").json()
        items.extend(page["items"])
        token = page["next_token"]
        if not token:
            return items


def test_walkthrough(target):
    account = new_account()
    response = target.call("PUT", f"/accounts/{account}/limit", {"limit": 3})
    assert (response.status_code, response.json()) == (200, {"account_id": account, "limit": 3})

    created = []
    for n in range(3):
        response = target.call("POST", f"/accounts/{account}/resources", {"name": f"svc-{n}"})
        assert response.status_code == 201
        created.append(response.json()["resource_id"])

    fourth = target.call("POST", f"/accounts/{account}/resources", {"name": "svc-3"})
    assert fourth.status_code == 409
    assert fourth.json()["error"]["code"] == "LimitExceeded"
    assert (fourth.json()["error"]["limit"], fourth.json()["error"]["used"]) == (3, 3)

    assert usage(target, account)["best_effort"] == 3

    def eventual_is(n):
        def check():
            assert usage(target, account)["eventual"] == n

        return check

    eventually(eventual_is(3), timeout=15)

    assert target.call("DELETE", f"/accounts/{account}/resources/{created[0]}").status_code == 204
    again = target.call("DELETE", f"/accounts/{account}/resources/{created[0]}")
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "NotFound"
    assert target.call("GET", f"/accounts/{account}/resources/{created[0]}").status_code == 404

    eventually(eventual_is(2), timeout=15)
    final = usage(target, account)
    assert (final["best_effort"], final["eventual"], final["used"], final["remaining"]) == (2, 2, 2, 1)

    assert target.call("POST", f"/accounts/{account}/resources", {"name": "svc-again"}).status_code == 201


def test_put_is_idempotent(target):
    account = new_account()
    first = target.call("PUT", f"/accounts/{account}/resources/web-1", {"name": "web", "size": 2})
    second = target.call("PUT", f"/accounts/{account}/resources/web-1", {"name": "web", "size": 2})
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json() == second.json()
    assert first.json()["size"] == 2
    target.settle()
    eventually(lambda: _assert_counts(target, account, 1, 1), timeout=15)


def _assert_counts(target, account, best_effort, eventual):
    current = usage(target, account)
    assert (current["best_effort"], current["eventual"]) == (best_effort, eventual)


def test_40_concurrent_creates_against_limit_10_admit_exactly_10(target):
    account = new_account()
    target.call("PUT", f"/accounts/{account}/limit", {"limit": 10})

    def create(n):
        return target.call("POST", f"/accounts/{account}/resources", {"name": f"burst-{n}"}).status_code

    with ThreadPoolExecutor(max_workers=40) as pool:
        statuses = list(pool.map(create, range(40)))
    assert statuses.count(201) == 10
    assert statuses.count(409) == 30
    target.settle()

    def drained():
        live = len(all_resources(target, account))
        current = usage(target, account)
        assert live == 10
        assert current["eventual"] == live
        assert current["best_effort"] <= live

    eventually(drained, timeout=30)


BAD_REQUESTS = [
    ("PUT", "/limit", '{"limit": -1}'),
    ("PUT", "/limit", '{"limit": "ten"}'),
    ("PUT", "/limit", "{oops"),
    ("POST", "/resources", '{"name": 42}'),
    ("POST", "/resources", "not json at all"),
    ("POST", "/resources", '{"name": "x", "pad": "' + "y" * 20000 + '"}'),
    ("PUT", "/resources/bad%20id", '{"name": "x"}'),
    ("PUT", "/resources/ok-id", '{"nom": "x"}'),
    # Bodies JSON parsers choke on (api/body.py); each is under 16 KiB but the last.
    pytest.param(
        "POST", "/resources", '{"name": "x", "a": ' + "[" * 5000 + "]" * 5000 + "}", id="deep-array"
    ),
    pytest.param("PUT", "/limit", '{"limit": ' + '{"a":' * 2600 + "1" + "}" * 2600 + "}", id="deep-object"),
    pytest.param("PUT", "/limit", '{"limit": ' + "9" * 5000 + "}", id="5000-digit-limit"),
    pytest.param("POST", "/resources", '{"name": "x", "n": -' + "9" * 5000 + "}", id="5000-digit-field"),
    pytest.param("PUT", "/limit", '{"limit": NaN}', id="nan-limit"),
    pytest.param("POST", "/resources", '{"name": "x", "m": {"a": [1, {"b": NaN}]}}', id="nan-nested"),
    pytest.param("PUT", "/resources/ok-id", '{"name": "x", "m": [Infinity]}', id="infinity"),
    pytest.param("POST", "/resources", '{"name": "x", "m": -Infinity}', id="minus-infinity"),
    pytest.param("POST", "/resources", '{"name": "x", "m": 1e400}', id="1e400"),
    pytest.param("POST", "/resources", '{"name": "x", "name": "y"}', id="duplicate-name"),
    pytest.param("POST", "/resources", '{"name": "x", "m": "\\ud800"}', id="unpaired-surrogate"),
    pytest.param("POST", "/resources", b'{"name": "\xff"}', id="not-utf8"),  # arrives base64-encoded
    pytest.param("POST", "/resources", "[" * (9 * 1024 * 1024), id="9MB-of-brackets"),
]


@pytest.mark.parametrize(("method", "suffix", "raw"), BAD_REQUESTS)
def test_bad_input_gets_a_4xx_with_the_error_body_and_writes_nothing(target, method, suffix, raw):
    account = new_account()
    response = target.call(method, f"/accounts/{account}{suffix}", raw=raw)
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert error["code"] == "ValidationError"
    assert error["message"]
    assert all_resources(target, account) == []
    current = usage(target, account)
    assert (current["best_effort"], current["eventual"], current["limit"]) == (0, 0, 100)


def test_bad_account_id_in_the_path(target):
    bad = "x" * 80
    # A tenant token naming it is refused before anything is read (it names no account)
    response = target.call("GET", f"/accounts/{bad}/usage")
    assert (response.status_code, response.json()["error"]["code"]) == (403, "Forbidden")
    assert "is not an account id" in response.json()["error"]["message"]
    # An operator, who may act on any account, gets the validation error
    response = target.call("PUT", f"/accounts/{bad}/limit", {"limit": 1})
    assert (response.status_code, response.json()["error"]["code"]) == (400, "ValidationError")
