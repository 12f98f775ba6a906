"""The event log over HTTP (issue 26 §4): a limit change made through the API and the crossing its
creates cause, seen by the deployed stream path, published, and listed by `GET /events` for an
operator, newest first, once each; paging; `since` bounds; a tenant's token is refused. The log
holds every test's events, so this test looks at its own account's rows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e.auth import bearer
from tests.e2e.conftest import Target, eventually

pytestmark = pytest.mark.e2e


def rows_of(target: Target, account: str, query: str = "limit=100") -> list[dict[str, Any]]:
    """The account's rows of every page of the log (the whole answer checked newest first)."""
    rows: list[dict[str, Any]] = []
    token = None
    while True:
        answer = target.call("GET", f"/events?{query}" + (f"&next_token={token}" if token else ""))
        assert answer.status_code == 200, answer.text
        page = answer.json()
        rows += page["items"]
        token = page["next_token"]
        if token is None:
            break
    assert [row["time"] for row in rows] == sorted((row["time"] for row in rows), reverse=True)
    return [row for row in rows if row["detail"].get("account_id") == account]


def test_an_operator_reads_the_events_published_and_a_tenant_may_not(target: Target) -> None:
    kind = f"k{uuid.uuid4().hex[:10]}"
    account = f"log-{uuid.uuid4().hex[:8]}"
    since = (datetime.now(UTC) - timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    # Given a limit of 5 set for the account, then 4 of the kind created (80 %)
    assert target.call("PUT", f"/accounts/{account}/limits/{kind}", {"limit": 5}).status_code == 200
    for n in range(4):
        created = target.call("POST", f"/accounts/{account}/kinds/{kind}/resources", {"name": f"r{n}"})
        assert created.status_code == 201, created.text
    target.settle()
    # Then the log lists the crossing, then the limit change: each once, with its event id
    expected = ["Quota Threshold Reached", "Quota Limit Changed"]
    rows = eventually(lambda: _types(rows_of(target, account), expected), timeout=60)
    reached, changed = rows
    assert reached["event_id"] == reached["detail"]["event_id"]
    assert (reached["detail"]["kind"], reached["detail"]["threshold"], reached["detail"]["used"]) == (
        kind,
        80,
        4,
    )
    assert (changed["detail"]["what"], changed["detail"]["new"]) == ("override", 5)
    # And paging a row at a time from just before them gives the same rows
    assert rows_of(target, account, f"limit=1&since={since}") == rows
    # And a since older than the log keeps is a 400
    old = (datetime.now(UTC) - timedelta(days=30)).isoformat().replace("+00:00", "Z")
    assert target.call("GET", f"/events?since={old}").status_code == 400
    # And a tenant's token is refused
    if target.tokens is not None:
        refused = target.call("GET", "/events", auth=bearer(target.tokens.tenant_token(account)))
        assert refused.status_code in (401, 403), refused.text


def _types(rows: list[dict[str, Any]], expected: list[str]) -> list[dict[str, Any]]:
    assert [row["detail_type"] for row in rows] == expected
    return rows
