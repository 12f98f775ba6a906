"""Who is near a limit (issue 26 §3): `GET /usage/over` lists the (account or organization, kind)
pairs at or over a threshold, from the sparse indexes the stream path's threshold transactions
keep. Real crossings, driven through the stream path (creates and deletes, their stream records,
process_stream_batch with the watcher) against DynamoDB Local and moto's EventBridge, then read
through the API's resolver with its access check.

The table is shared by every integration test, so each test here uses a kind of its own: the
per-kind index partitions are then this test's alone (the listing of every kind is checked for
its order and for holding this test's items, as other tests' crossings are in it too).
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from hybrid_counter.api.access import AccessPolicy
from hybrid_counter.api.app import build_app
from hybrid_counter.aws import Clients
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.governance.thresholds import Thresholds, ThresholdWatcher
from hybrid_counter.governance.usage_over import OVER_INDEX, OVER_KIND_INDEX
from hybrid_counter.keys import counter_key, org_pk
from hybrid_counter.ops import cli
from hybrid_counter.resources import ResourceService
from localrun.stack.aws_clients import client
from tests.integration.resolver import resolve

pytestmark = pytest.mark.integration

POLICY = AccessPolicy(mode="jwt", operator_scope="hc/operator")
OPERATOR = {"jwt": {"claims": {"sub": "ops"}, "scopes": ["hc/operator"]}}


@pytest.fixture(scope="module")
def bus_name(stack) -> str:
    name = f"over-events-{uuid.uuid4().hex[:8]}"
    client("events", stack.sqs_url).create_event_bus(Name=name)
    return name


@pytest.fixture
def over_clients(clients, stack) -> Clients:
    return replace(clients, events=client("events", stack.sqs_url))


@pytest.fixture
def svc(settings, over_clients, bus_name) -> ResourceService:
    return ResourceService(
        replace(
            settings, event_bus_name=bus_name, usage_thresholds=(80, 100), threshold_hysteresis_percent=5
        ),
        over_clients,
    )


@pytest.fixture
def kind() -> str:
    return f"k{uuid.uuid4().hex[:10]}"


@pytest.fixture
def pump(svc, over_clients, stream, counter) -> Callable[[str], None]:
    """Deliver a partition's pending records to the stream path (counting and thresholds), with
    a clock one second further on each time, so crossings have distinct times."""
    ticks = itertools.count(1_800_000_000)
    watcher = ThresholdWatcher(
        svc._settings.table_name,
        Thresholds((80, 100), 5),
        limits=svc.limits,
        changes=svc.changes,
        clients=over_clients,
        obs=svc._obs,
        enabled=True,
        clock=lambda: float(next(ticks)),
        sleep=lambda _: None,
    )

    def run(pk: str) -> None:
        records = stream.records_of(pk)
        assert process_stream_batch(records, counter, watcher).failed_sequence_numbers == []

    return run


@pytest.fixture
def api(svc) -> Callable[..., tuple[int, Any]]:
    app = build_app(lambda: svc, POLICY)

    def call(query: str = "", authorizer: dict[str, Any] | None = None) -> tuple[int, Any]:
        target = f"/usage/over{'?' + query if query else ''}"
        return resolve(
            app,
            "GET",
            target,
            route_key="GET /usage/over",
            authorizer=OPERATOR if authorizer is None else authorizer,
        )

    return call


def use(svc: ResourceService, account: str, kind: str, units: int) -> list[str]:
    return [svc.create(account, "r", {}, kind=kind)[0].resource_id for _ in range(units)]


def owners(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(row.get("account_id") or row["org_id"], row["threshold"]) for row in rows]


def pages(api, query: str) -> Iterator[dict[str, Any]]:
    token = None
    while True:
        status, page = api(query + (f"&next_token={token}" if token else ""))
        assert status == 200, page
        yield page
        token = page["next_token"]
        if token is None:
            return


def test_crossings_list_newest_first_and_a_cleared_item_falls_out(
    svc, new_account, kind, pump, api, clients, settings
):
    # Given three accounts with 10 of the kind: the first at 80 %, then the second at 100 %,
    # then the third at 80 %, each crossing seen by the stream path in that order
    first, second, third = new_account(), new_account(), new_account()
    held = {}
    for account, units in ((first, 8), (second, 10), (third, 8)):
        svc.set_limit(account, 10, kind=kind)
        held[account] = use(svc, account, kind, units)
        pump(f"ACCOUNT#{account}")
    # When an operator lists who is at or over 80 % of the kind
    status, page = api(f"threshold=80&kind={kind}")
    # Then all three, newest crossing first, each with its highest threshold and the crossing's figures
    assert status == 200
    assert owners(page["items"]) == [(third, 80), (second, 100), (first, 80)]
    assert page["next_token"] is None
    row = page["items"][1]
    assert {k: row[k] for k in ("scope", "kind", "used", "limit")} == {
        "scope": "account",
        "kind": kind,
        "used": 10,
        "limit": 10,
    }
    assert page["items"][0]["since"] > row["since"] > page["items"][2]["since"]
    # And at or over 100 %: the second only; the default threshold is the lowest (80)
    assert owners(api(f"threshold=100&kind={kind}")[1]["items"]) == [(second, 100)]
    assert owners(api(f"kind={kind}")[1]["items"]) == owners(page["items"])
    # When the first falls to 70 % (below 80 less the hysteresis, 75): its 80 is cleared
    svc.delete(first, held[first][0], kind=kind)
    pump(f"ACCOUNT#{first}")
    # Then it is out of the listing, and its counter item out of the index (no index attribute)
    assert owners(api(f"kind={kind}")[1]["items"]) == [(third, 80), (second, 100)]
    item = clients.dynamodb.get_item(
        TableName=settings.table_name, Key=counter_key(first, kind=kind), ConsistentRead=True
    )["Item"]
    assert item["alert_reached"]["N"] == "0"
    assert not {name for name in item if name.startswith("over_")}
    # And the second, back to 90 % (below 95): at 80 since that clear, with its figures then
    svc.delete(second, held[second][0], kind=kind)
    pump(f"ACCOUNT#{second}")
    rows = api(f"kind={kind}")[1]["items"]
    assert owners(rows) == [(second, 80), (third, 80)]
    assert (rows[0]["used"], rows[0]["limit"]) == (9, 10)


def test_pages_follow_each_other_without_gaps_or_repeats(svc, new_account, kind, pump, api):
    # Given five accounts over 80 % of the kind and one at 100 %
    accounts = [new_account() for _ in range(6)]
    for n, account in enumerate(accounts):
        svc.set_limit(account, 5, kind=kind)
        use(svc, account, kind, 5 if n == 2 else 4)
        pump(f"ACCOUNT#{account}")
    # When they are read two at a time
    got = list(pages(api, f"kind={kind}&limit=2"))
    # Then three pages of two, newest first, each account once, the last without a token
    assert [len(page["items"]) for page in got] == [2, 2, 2]
    listed = [row["account_id"] for page in got for row in page["items"]]
    assert listed == list(reversed(accounts))
    # And at or over 100 %: the one, in a page of its own
    assert owners(api(f"kind={kind}&threshold=100&limit=2")[1]["items"]) == [(accounts[2], 100)]
    # And a token's place reads on in any listing (at or over 100 %: the one crossed before the
    # first page's last row), and a token not made here is refused
    token = got[0]["next_token"]
    assert owners(api(f"kind={kind}&threshold=100&next_token={token}")[1]["items"]) == [(accounts[2], 100)]
    status, refused = api(f"kind={kind}&next_token=eyJ4Ijp7fX0=")
    assert (status, refused["error"]["code"]) == (400, "ValidationError")


def test_an_organization_over_its_limit_is_listed_with_its_scope(svc, new_account, kind, pump, api):
    # Given an organization of 10 of the kind, whose member (allowed 100 itself) uses 9
    plan_id, org_id = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    member = new_account()
    svc.put_plan(plan_id, {kind: 10})
    svc.put_org(org_id, plan_id)
    svc.add_member(org_id, member)
    svc.set_limit(member, 100, kind=kind)
    use(svc, member, kind, 9)
    # When the stream path sees the account's and the organization's counter items
    pump(f"ACCOUNT#{member}")
    pump(org_pk(org_id))
    # Then the organization is listed, not its member (9 % of 100), with the figures of its
    # crossing: the stream path replays the item's writes in order, and 8 of 10 crossed 80 %
    status, page = api(f"kind={kind}")
    assert status == 200
    assert page["items"] == [
        {
            "org_id": org_id,
            "scope": "organization",
            "kind": kind,
            "threshold": 80,
            "used": 8,
            "limit": 10,
            "since": page["items"][0]["since"],
        }
    ]


def test_the_listing_of_every_kind_is_newest_first_and_holds_each_kind(svc, new_account, pump, api):
    # Given three accounts over a threshold, of three different kinds (three rows at least: two
    # pages of two, whatever else the shared table holds)
    over = [(new_account(), f"k{uuid.uuid4().hex[:10]}") for _ in range(3)]
    for account, kind in over:
        svc.set_limit(account, 5, kind=kind)
        use(svc, account, kind, 5)
        pump(f"ACCOUNT#{account}")
    (one, kind_one), (two, kind_two), (three, kind_three) = over
    # When every kind at or over 80 % is listed, two rows a page (other tests' items too: the
    # table is shared), the pages' tokens carrying a place in each of the eight partitions
    got = list(pages(api, "threshold=80&limit=2"))
    rows = [row for page in got for row in page["items"]]
    # Then both are there, the later crossing first, and the whole list is newest first, once each
    mine = [(row["account_id"], row["kind"]) for row in rows if row.get("account_id") in (one, two, three)]
    assert mine == [(three, kind_three), (two, kind_two), (one, kind_one)]
    assert len(got) >= 2
    since = [row["since"] for row in rows]
    assert since == sorted(since, reverse=True)
    assert len({(row.get("account_id") or row["org_id"], row["kind"]) for row in rows}) == len(rows)
    # And one page of them all gives the same list
    whole = api(f"threshold=80&limit={min(100, len(rows) + 1)}")[1]
    if len(rows) < 100:
        assert (whole["items"], whole["next_token"]) == (rows, None)


def test_only_an_operator_may_list_and_a_threshold_must_be_a_configured_one(api, kind):
    tenant = {"jwt": {"claims": {"account_id": "acme", "sub": "t"}, "scopes": None}}
    status, body = api(f"kind={kind}", authorizer=tenant)
    assert (status, body["error"]["code"]) == (403, "Forbidden")
    for bad in ("90", "0", "abc"):
        status, body = api(f"threshold={bad}")
        assert (status, body["error"]["code"]) == (400, "ValidationError"), bad
    status, body = api("threshold=90")
    assert "80, 100" in body["error"]["message"]
    status, body = api("kind=history")
    assert status == 400


def test_the_indexes_exist_on_the_local_table_with_their_projection(clients, settings):
    table = clients.dynamodb.describe_table(TableName=settings.table_name)["Table"]
    indexes = {index["IndexName"]: index for index in table["GlobalSecondaryIndexes"]}
    assert [k["AttributeName"] for k in indexes[OVER_KIND_INDEX]["KeySchema"]] == ["over_kind", "over_since"]
    assert [k["AttributeName"] for k in indexes[OVER_INDEX]["KeySchema"]] == ["over_all", "over_since"]
    assert set(indexes[OVER_INDEX]["Projection"]["NonKeyAttributes"]) == {
        "over_kind",
        "over_used",
        "over_limit",
    }


def test_the_ops_tool_prints_the_same_list(
    svc, new_account, kind, pump, api, stack, settings, capsys, monkeypatch
):
    # Given two accounts over 80 % of the kind
    first, second = new_account(), new_account()
    for account in (first, second):
        svc.set_limit(account, 5, kind=kind)
        use(svc, account, kind, 4)
        pump(f"ACCOUNT#{account}")
    # When an operator runs `hybrid-counter-ops top` on the table (its own IAM, no API)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", stack.dynamodb_url)
    where = ["--table", settings.table_name]
    capsys.readouterr()  # what the service printed so far (its metrics)
    assert cli.main([*where, "top", "--kind", kind, "--limit", "1"]) == 0
    first_page = json.loads(capsys.readouterr().out)
    assert cli.main([*where, "top", "--kind", kind, "--next-token", first_page["next_token"]]) == 0
    second_page = json.loads(capsys.readouterr().out)
    # Then it prints what the route answers, a page at a time
    assert first_page["items"] + second_page["items"] == api(f"kind={kind}")[1]["items"]
    assert owners(first_page["items"] + second_page["items"]) == [(second, 80), (first, 80)]
    assert second_page["next_token"] is None
    # And refuses a threshold that is not configured, saying which are
    with pytest.raises(SystemExit) as refused:
        cli.main([*where, "top", "--threshold", "90"])
    assert "80, 100" in str(refused.value)
