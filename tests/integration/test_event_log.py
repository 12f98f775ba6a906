"""The event log (issue 26 §4): `GET /events` lists every event published, newest first, from the
sparse index the take-off of each published event writes (governance/event_log.py). Real events,
driven through the stream path (creates, their stream records, process_stream_batch with the
watcher) and the limit-change path, against DynamoDB Local and moto's EventBridge, read through
the API's resolver with its access check.

The table is shared by every integration test, so each test looks only at its own accounts' rows
(the log holds every test's events of the day).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import build_app
from hybrid_counter.aws import Clients
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects
from hybrid_counter.governance.publisher import OutboxEvent
from hybrid_counter.governance.thresholds import Thresholds, ThresholdWatcher
from hybrid_counter.keys import account_pk
from hybrid_counter.resources import ResourceService
from localrun.stack.aws_clients import client
from tests.faults import ProcessDied, injected
from tests.integration.resolver import resolve

pytestmark = pytest.mark.integration

POLICY = AccessPolicy(mode="jwt", operator_scope="hc/operator")
OPERATOR = {"jwt": {"claims": {"sub": "ops"}, "scopes": ["hc/operator"]}}
TENANT = {"jwt": {"claims": {"sub": "acct-x"}, "scopes": ["hc/tenant"]}}


class Ticking:
    """Real time, but strictly increasing by at least 2 ms a call: two take-offs never share a
    millisecond, so "newest first" is one order the test can state."""

    def __init__(self, offset: float = 0.0) -> None:
        self._last = 0.0
        self._offset = offset
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self._last = max(time.time() + self._offset, self._last + 0.002)
            return self._last


@pytest.fixture(scope="module")
def bus_name(stack) -> str:
    name = f"log-events-{time.time_ns()}"
    client("events", stack.sqs_url).create_event_bus(Name=name)
    return name


@pytest.fixture
def log_clients(clients, stack) -> Clients:
    return replace(clients, events=client("events", stack.sqs_url))


@pytest.fixture
def log_settings(settings, bus_name):
    return replace(
        settings, event_bus_name=bus_name, usage_thresholds=(80, 100), threshold_hysteresis_percent=5
    )


@pytest.fixture
def svc(log_settings, log_clients) -> ResourceService:
    return ResourceService(log_settings, log_clients, effects=Effects(clock=Ticking()))


@pytest.fixture
def pump(svc, log_settings, log_clients, stream, counter) -> Callable[[str], None]:
    watcher = ThresholdWatcher(
        log_settings.table_name,
        Thresholds((80, 100), 5),
        limits=svc.limits,
        changes=svc.changes,
        clients=log_clients,
        obs=svc._obs,
        enabled=True,
        sleep=lambda _: None,
    )

    def run(account: str) -> None:
        records = stream.records_for(account)
        assert process_stream_batch(records, counter, watcher).failed_sequence_numbers == []

    return run


@pytest.fixture
def api(svc) -> Callable[..., tuple[int, Any]]:
    app = build_app(lambda: svc, POLICY)

    def call(query: str = "", authorizer: dict[str, Any] | None = None) -> tuple[int, Any]:
        target = f"/events{'?' + query if query else ''}"
        return resolve(
            app,
            "GET",
            target,
            route_key="GET /events",
            authorizer=OPERATOR if authorizer is None else authorizer,
        )

    return call


def pages(api, query: str) -> Iterator[dict[str, Any]]:
    token = None
    while True:
        status, page = api(query + (f"&next_token={token}" if token else ""))
        assert status == 200, page
        yield page
        token = page["next_token"]
        if token is None:
            return


def logged(api, account: str, query: str = "limit=100") -> list[dict[str, Any]]:
    """The account's rows of the whole log (every page), in the order the log answers."""
    rows = [row for page in pages(api, query) for row in page["items"]]
    times = [row["time"] for row in rows]
    assert times == sorted(times, reverse=True)  # the whole answer is newest first
    return [row for row in rows if row["detail"].get("account_id") == account]


def outbox(svc: ResourceService, account: str) -> list[OutboxEvent]:
    """The account's threshold events still in the outbox."""
    found = svc._clients.dynamodb.query(
        TableName=svc._settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
        ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":e": {"S": "EVENT#"}},
        ConsistentRead=True,
    )["Items"]
    return [OutboxEvent.of(item) for item in found if "event" in item]


def sweep(svc: ResourceService, counter) -> int:
    later = time.time() + svc._settings.pending_grace_seconds + 1
    return (
        Sweeper(
            svc._settings.table_name,
            counter,
            svc._settings.pending_grace_seconds,
            svc._clients,
            clock=lambda: later,
            changes=svc.changes,
        )
        .sweep()
        .events_published
    )


def test_a_limit_change_and_a_crossing_show_newest_first_once_each(svc, account, pump, api):
    # Given a limit change (published as it is made) and then a crossing (4 of 5: 80 %)
    svc.set_limit(account, 5, by="ops")
    for _ in range(4):
        svc.create(account, "r", {})
    pump(account)
    # Then the log lists both, the crossing first, each with its event id
    rows = logged(api, account)
    assert [row["detail_type"] for row in rows] == ["Quota Threshold Reached", "Quota Limit Changed"]
    reached, changed = rows
    assert reached["event_id"] == reached["detail"]["event_id"]
    assert reached["event_id"].startswith(f"{account}/")
    assert reached["event_id"].endswith("/80/reached")
    assert reached["detail"]["threshold"] == 80
    assert reached["detail"]["used"] == 4
    assert changed["event_id"] == changed["detail"]["event_id"]
    assert changed["detail"]["new"] == 5
    assert reached["time"] > changed["time"]
    # And the crossing's item (the event alone) now expires EventLogDays after its publication
    item = svc._clients.dynamodb.query(
        TableName=svc._settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
        ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":e": {"S": "EVENT#"}},
        ConsistentRead=True,
    )["Items"][0]
    published = datetime.fromisoformat(reached["time"].replace("Z", "+00:00")).timestamp()
    assert int(item["expires_at"]["N"]) == int(published) + 7 * 86_400
    assert "event" not in item
    assert "pending_shard" not in item
    # When the crossing is published again (a consumer dedupes on its id; the log must not need to)
    again = OutboxEvent(reached["detail_type"], reached["detail"], {"pk": item["pk"], "sk": item["sk"]})
    assert svc.changes.publish([again]) == 1  # EventBridge took it a second time
    # Then the log still has it once, unchanged
    assert logged(api, account) == rows


def test_an_event_is_logged_only_once_published_and_once_whatever_was_lost(svc, account, pump, api, counter):
    svc.set_limit(account, 5, by="ops")
    for _ in range(4):
        svc.create(account, "r", {})
    # Given the crossing's PutEvents failed: the event waits in the outbox
    with injected(svc._clients.events, "PutEvents", error="InternalException", times=100):
        pump(account)
    (waiting,) = outbox(svc, account)
    # Then it is not in the log (only the limit change, published as it was made)
    assert [row["detail_type"] for row in logged(api, account)] == ["Quota Limit Changed"]
    # When it is published but the process dies before its take-off
    with injected(svc._clients.dynamodb, "UpdateItem", when="crash"), pytest.raises(ProcessDied):
        svc.changes.publish([waiting])
    # Then it is still not in the log: the log is the take-off, not the PutEvents
    assert [row["detail_type"] for row in logged(api, account)] == ["Quota Limit Changed"]
    assert outbox(svc, account) == [waiting]
    # When the sweeper publishes it again (a second PutEvents of the same event id)
    assert sweep(svc, counter) >= 1
    # Then it is in the log once, newest, and off the outbox
    rows = logged(api, account)
    assert [(row["detail_type"], row["event_id"]) for row in rows] == [
        ("Quota Threshold Reached", waiting.event_id),
        ("Quota Limit Changed", rows[1]["event_id"]),
    ]
    assert outbox(svc, account) == []
    # And a sweep after it finds nothing of it to publish or log
    sweep(svc, counter)
    assert logged(api, account) == rows


def test_pages_and_since_bound_what_is_read(svc, account, api):
    # Given three limit changes, a moment apart
    start = datetime.fromtimestamp(time.time() - 1, UTC)
    for limit in (5, 6, 7):
        svc.set_limit(account, limit, by="ops")
    # When the log is read a row a page from just before them
    since = start.isoformat().replace("+00:00", "Z")
    mine = logged(api, account, f"limit=1&since={since}")
    # Then every page had one row, and the three are there newest first, each once
    assert [row["detail"]["new"] for row in mine] == [7, 6, 5]
    assert len({row["event_id"] for row in mine}) == 3
    # And since after the second change leaves only the third
    after = mine[1]["time"]
    later = (datetime.fromisoformat(after.replace("Z", "+00:00")) + timedelta(milliseconds=1)).isoformat()
    assert [
        row["detail"]["new"] for row in logged(api, account, f"limit=100&since={later.replace('+', '%2B')}")
    ] == [7]
    # And a token whose place is older than since (a since moved on between pages) lists nothing
    status, first = api(f"limit=1&since={since}")
    assert status == 200
    past_it = datetime.fromisoformat(first["items"][0]["time"].replace("Z", "+00:00")) + timedelta(
        milliseconds=1
    )
    query = f"limit=1&since={past_it.isoformat().replace('+00:00', 'Z')}&next_token={first['next_token']}"
    assert api(query) == (200, {"items": [], "next_token": None})
    # And a since older than the log keeps (EventLogDays, 7) is refused, saying so
    old = (datetime.now(UTC) - timedelta(days=8)).isoformat().replace("+00:00", "Z")
    status, body = api(f"since={old}")
    assert status == 400
    assert "7 days" in body["error"]["message"]
    status, body = api("since=yesterday")
    assert status == 400
    assert body["error"]["code"] == "ValidationError"
    assert api("limit=0")[0] == 400
    assert api("limit=101")[0] == 400
    assert api("next_token=bm90LWEtcGxhY2U")[0] == 400  # base64 of "not-a-place"


def test_the_log_reads_back_over_days(svc, log_settings, log_clients, account, api):
    # Given a change published yesterday (a process whose clock is a day behind) and one today
    yesterday = ResourceService(log_settings, log_clients, effects=Effects(clock=Ticking(offset=-86_400)))
    yesterday.set_limit(account, 5, by="ops")
    svc.set_limit(account, 6, by="ops")
    # Then the default (the last 24 hours) has today's only; two days back has both, newest first
    assert [row["detail"]["new"] for row in logged(api, account)] == [6]
    two_days = (datetime.now(UTC) - timedelta(days=2)).isoformat().replace("+00:00", "Z")
    assert [row["detail"]["new"] for row in logged(api, account, f"limit=1&since={two_days}")] == [6, 5]


def test_a_tenant_is_refused(svc, account, api):
    svc.set_limit(account, 5, by="ops")
    status, body = api(authorizer=TENANT)
    assert status == 403, body
    assert api()[0] == 200  # the same request, an operator's
