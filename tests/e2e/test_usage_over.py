"""Who is near a limit over HTTP (issue 26 §3): crossings made by ordinary creates and deletes
through the API, seen by the deployed stream path, listed by `GET /usage/over` for an operator
and by `hybrid-counter-ops top`; a tenant's token is refused. A kind of this test's own keeps
other tests' crossings out of the per-kind listing."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

import pytest

from tests.e2e.auth import bearer
from tests.e2e.conftest import Target, eventually
from tests.e2e.test_operator_tooling import ops

pytestmark = pytest.mark.e2e


def listed(target: Target, query: str) -> list[tuple[str, int, int]]:
    answer = target.call("GET", f"/usage/over?{query}")
    assert answer.status_code == 200, answer.text
    return [(row["account_id"], row["threshold"], row["used"]) for row in answer.json()["items"]]


def test_an_operator_lists_who_is_over_a_threshold_and_a_tenant_may_not(target: Target) -> None:
    kind = f"k{uuid.uuid4().hex[:10]}"
    first, second = f"over-{uuid.uuid4().hex[:8]}", f"over-{uuid.uuid4().hex[:8]}"
    made: dict[str, list[str]] = {}
    # Given two accounts with 5 of the kind: the first at 80 %, then the second at 100 %
    for account, units in ((first, 4), (second, 5)):
        assert target.call("PUT", f"/accounts/{account}/limits/{kind}", {"limit": 5}).status_code == 200
        made[account] = []
        for n in range(units):
            created = target.call("POST", f"/accounts/{account}/kinds/{kind}/resources", {"name": f"r{n}"})
            assert created.status_code == 201, created.text
            made[account].append(created.json()["resource_id"])
        target.settle()
        eventually(partial(_listed_once, target, kind, account), timeout=60)
    # Then an operator sees both, newest crossing first, each at its highest threshold
    assert listed(target, f"kind={kind}") == [(second, 100, 5), (first, 80, 4)]
    assert listed(target, f"kind={kind}&threshold=100") == [(second, 100, 5)]
    # And paging by one gives the same rows
    page = target.call("GET", f"/usage/over?kind={kind}&limit=1").json()
    rest = target.call("GET", f"/usage/over?kind={kind}&limit=1&next_token={page['next_token']}").json()
    assert [row["account_id"] for row in page["items"] + rest["items"]] == [second, first]
    # When the first falls to 60 % (below 75): it leaves the list
    for resource_id in made[first][:2]:
        deleted = target.call("DELETE", f"/accounts/{first}/kinds/{kind}/resources/{resource_id}")
        assert deleted.status_code == 204
    target.settle()
    eventually(lambda: _only(target, kind, [(second, 100, 5)]), timeout=60)
    # And a tenant's token is refused, whatever it asks
    if target.tokens is not None:
        tenant = bearer(target.tokens.tenant_token(first))
        refused = target.call("GET", f"/usage/over?kind={kind}", auth=tenant)
        assert refused.status_code in (401, 403), refused.text
    # And a threshold that is not configured is a 400
    assert target.call("GET", "/usage/over?threshold=90").status_code == 400


def _listed_once(target: Target, kind: str, account: str) -> None:
    assert [row for row in listed(target, f"kind={kind}") if row[0] == account]


def _only(target: Target, kind: str, rows: list[tuple[str, int, int]]) -> None:
    assert listed(target, f"kind={kind}") == rows


def test_the_ops_tool_prints_the_near_limit_list(target: Target, local_runtime: Any) -> None:
    kind = f"k{uuid.uuid4().hex[:10]}"
    account = f"over-{uuid.uuid4().hex[:8]}"
    assert target.call("PUT", f"/accounts/{account}/limits/{kind}", {"limit": 2}).status_code == 200
    for n in range(2):
        assert (
            target.call("POST", f"/accounts/{account}/kinds/{kind}/resources", {"name": f"r{n}"}).status_code
            == 201
        )
    local_runtime.wait_until_idle(60)
    printed = eventually(lambda: _printed(local_runtime, kind), timeout=60)
    assert [(row["account_id"], row["threshold"], row["used"], row["limit"]) for row in printed] == [
        (account, 100, 2, 2)
    ]


def _printed(runtime: Any, kind: str) -> list[dict[str, Any]]:
    rows = ops(runtime, "top", "--kind", kind)["items"]
    assert rows
    return list(rows)
