"""Kinds, plans, overrides, units, resizes and dry runs (issue 18) over HTTP.

Locally the embedded runtime runs with PlanCacheSeconds=2 (tests/e2e/conftest.py), so a plan
change is seen within seconds, and the checks of what a request wrote read its table. Against a
deployed target (url, stack) they run with its PlanCacheSeconds (HC_PLAN_CACHE_SECONDS, 60 by
default) and DefaultKind (HC_DEFAULT_KIND, resources), without the checks that read the table.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import requests

from hybrid_counter.plans import PlanStore
from localrun.stack.aws_clients import domain_clients
from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e


@dataclass
class Stack:
    target: Target
    cache_seconds: float  # PlanCacheSeconds
    default_kind: str  # DefaultKind
    table: str | None = None  # locally: the table, to see what each request wrote
    dynamodb: Any = None

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        return self.target.call(method, path, body)

    def items(self, pk: str) -> list[dict[str, Any]] | None:
        """Every item of a partition (consistent), in key order; None on a remote target."""
        if self.dynamodb is None:
            return None
        pages = self.dynamodb.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )
        return [item for page in pages for item in page["Items"]]

    def account_items(self, account: str) -> list[dict[str, Any]] | None:
        """The account's items as the API path wrote them: without what the stream path writes
        as it counts (eventual and its shares, the range versions, counter_processed, heals), so
        a comparison need not wait for the stream to go quiet."""
        found = self.items(f"ACCOUNT#{account}")
        if found is None:
            return None
        return [
            {name: value for name, value in item.items() if not STREAM_WRITTEN.match(name)} for item in found
        ]


STREAM_WRITTEN = re.compile(r"^(eventual|counter_processed|heals|[ev][0-9a-f])$")


@pytest.fixture(scope="module")
def stack(target: Target) -> Stack:
    if target.runtime is None:
        return Stack(
            target,
            float(os.environ.get("HC_PLAN_CACHE_SECONDS", "60")),
            os.environ.get("HC_DEFAULT_KIND", "resources"),
        )
    runtime = target.runtime
    environment = runtime.function_environment("ApiFunction")
    return Stack(
        target,
        float(environment["PLAN_CACHE_SECONDS"]),
        environment["DEFAULT_KIND"],
        runtime.table_name,
        boto3.client("dynamodb", endpoint_url=runtime.dynamodb_url, region_name="us-east-1"),
    )


def new_account() -> str:
    return f"e2e-{uuid.uuid4().hex[:12]}"


def new_plan() -> str:
    return f"pro-{uuid.uuid4().hex[:12]}"


def kind_path(account: str, kind: str, rid: str | None = None) -> str:
    return f"/accounts/{account}/kinds/{kind}/resources" + (f"/{rid}" if rid else "")


def usage(stack: Stack, account: str) -> dict[str, Any]:
    response = stack.call("GET", f"/accounts/{account}/usage")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def error_of(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


def create(stack: Stack, account: str, kind: str, name: str, units: int | None = None) -> requests.Response:
    body: dict[str, Any] = {"name": name} if units is None else {"name": name, "units": units}
    return stack.call("POST", kind_path(account, kind), body)


def put_plan(stack: Stack, plan_id: str, limits: dict[str, int]) -> None:
    response = stack.call("PUT", f"/plans/{plan_id}", {"limits": limits})
    assert (response.status_code, response.json()) == (200, {"plan_id": plan_id, "limits": limits})


def assign(stack: Stack, account: str, plan_id: str) -> None:
    response = stack.call("PUT", f"/accounts/{account}/plan", {"plan_id": plan_id})
    assert (response.status_code, response.json()) == (200, {"account_id": account, "plan_id": plan_id})


def test_plans_overrides_units_and_resizes(stack):
    # Given the plan pro = {projects: 3, seats: 10} and two accounts on it
    pro, first, second = new_plan(), new_account(), new_account()
    put_plan(stack, pro, {"projects": 3, "seats": 10})
    for account in (first, second):
        assign(stack, account, pro)
    # When the first account creates 3 projects, the 4th is refused, naming the kind
    for n in range(3):
        made = create(stack, first, "projects", f"p{n}")
        assert (made.status_code, made.json()["kind"], made.json()["units"]) == (201, "projects", 1)
    refused = error_of(create(stack, first, "projects", "p3"), 409, "LimitExceeded")
    assert (refused["kind"], refused["limit"], refused["used"]) == ("projects", 3, 3)
    # Then its seats are unaffected
    seats = usage(stack, first)["kinds"]["seats"]
    assert (seats["limit"], seats["used"], seats["limit_source"]) == (10, 0, "plan")
    # When a 6-seat team is created, a 5-seat team is refused
    team = create(stack, first, "seats", "team-a", units=6)
    assert (team.status_code, team.json()["units"]) == (201, 6)
    no_room = error_of(create(stack, first, "seats", "team-b", units=5), 409, "LimitExceeded")
    assert (no_room["kind"], no_room["limit"], no_room["used"]) == ("seats", 10, 6)
    # When the first team is resized to 4, the 5-seat team fits
    resized = stack.call("PATCH", kind_path(first, "seats", team.json()["resource_id"]), {"units": 4})
    assert (resized.status_code, resized.json()["units"]) == (200, 4)
    assert create(stack, first, "seats", "team-b", units=5).status_code == 201
    # When a 2-seat team is tried as a dry run, it would not be admitted, and nothing is written
    stack.target.settle()  # the stream path's threshold writes done first
    before = stack.account_items(first)
    dry = stack.call("POST", kind_path(first, "seats") + "?dry_run=true", {"name": "team-c", "units": 2})
    assert (dry.status_code, dry.json()) == (
        200,
        {
            "would_admit": False,
            "kind": "seats",
            "units": 2,
            "limit": 10,
            "used": 9,
            "remaining": 1,
            "scope": "account",
        },
    )
    assert stack.account_items(first) == before
    # When an override gives the first account 5 projects, two more fit, and no more
    override = stack.call("PUT", f"/accounts/{first}/limits/projects", {"limit": 5})
    assert (override.status_code, override.json()) == (
        200,
        {"account_id": first, "kind": "projects", "limit": 5},
    )
    assert [create(stack, first, "projects", f"p{n}").status_code for n in (3, 4, 5)] == [201, 201, 409]
    assert usage(stack, first)["kinds"]["projects"]["limit_source"] == "override"
    # When the override is removed (below use: refused unless forced), the plan's 3 holds again:
    # creates are refused, nothing removed
    refused = error_of(stack.call("DELETE", f"/accounts/{first}/limits/projects"), 409, "LimitBelowUsage")
    assert (refused["limit"], refused["used"]) == (3, 5)
    assert stack.call("DELETE", f"/accounts/{first}/limits/projects?force=true").status_code == 204
    back = error_of(create(stack, first, "projects", "p5"), 409, "LimitExceeded")
    assert (back["limit"], back["used"]) == (3, 5)
    projects = usage(stack, first)["kinds"]["projects"]
    assert (projects["limit"], projects["used"], projects["limit_source"]) == (3, 5, "plan")
    # Given the second account at its 3 projects too
    assert [create(stack, second, "projects", f"p{n}").status_code for n in range(4)] == [201, 201, 201, 409]
    # When pro is changed to 10 projects (the stream path done with the creates first: its
    # threshold judgements write the counter items)
    stack.target.settle()
    before = [stack.items("PLANS"), stack.account_items(first), stack.account_items(second)]
    put_plan(stack, pro, {"projects": 10, "seats": 10})
    changed_at = time.monotonic()
    # Then that is one write, the plan's item: neither account's items changed, not even by the
    # stream path afterwards
    stack.target.settle()
    plans, *accounts = [stack.items("PLANS"), stack.account_items(first), stack.account_items(second)]
    assert accounts == before[1:]
    if plans is not None and before[0] is not None:
        assert [(i["pk"]["S"], i["sk"]["S"]) for i in plans if i not in before[0]] == [("PLANS", pro)]
        assert len(plans) == len(before[0])
    # And within PlanCacheSeconds more creates fit, for every account on pro
    for account in (first, second):
        sent_at = admitted_by(stack, account, "projects", deadline=changed_at + stack.cache_seconds + 5)
        assert sent_at - changed_at <= stack.cache_seconds + 0.5
    assert usage(stack, first)["kinds"]["projects"]["limit"] == 10
    if stack.target.runtime is None:
        return
    # When another process changes pro (another instance of the function: here a write to the
    # table, so no instance serving these requests forgets what it cached), to 4 projects
    PlanStore(
        stack.table or "",
        domain_clients(stack.target.runtime.dynamodb_url),
        default_kind=stack.default_kind,
        default_limit=100,
        clock=time.time,
    ).put(pro, {"projects": 4, "seats": 10})
    time.sleep(stack.cache_seconds + 0.3)
    # Then once PlanCacheSeconds have passed, every request judges by it, for every account
    for account in (first, second):
        for _ in range(3):
            dry = stack.call("POST", kind_path(account, "projects") + "?dry_run=true", {"name": "x"})
            assert (dry.json()["would_admit"], dry.json()["limit"]) == (False, 4)


def admitted_by(stack: Stack, account: str, kind: str, deadline: float) -> float:
    """Create until one is admitted (a refused create writes nothing); when that one was sent."""
    while True:
        sent_at = time.monotonic()
        response = create(stack, account, kind, "after-the-change")
        if response.status_code == 201:
            return sent_at
        error_of(response, 409, "LimitExceeded")
        assert sent_at < deadline, f"still refused {sent_at - deadline + stack.cache_seconds + 5:.1f} s on"
        time.sleep(0.1)


def test_concurrent_3_unit_creates_against_20_admit_exactly_6(stack):
    # Given an account on a plan of 20 seat units (40 creates of 1 against 10 over HTTP:
    # test_http_contract.py)
    account, plan_id = new_account(), new_plan()
    put_plan(stack, plan_id, {"seats": 20})
    assign(stack, account, plan_id)

    def seat_team(n: int) -> requests.Response:
        return create(stack, account, "seats", f"team-{n}", units=3)

    # When 10 creates of 3 seats race
    with ThreadPoolExecutor(max_workers=10) as pool:
        teams = list(pool.map(seat_team, range(10)))
    # Then exactly 6 are admitted (18 of 20 units); each refusal names the kind and the units used
    assert sorted(r.status_code for r in teams) == [201] * 6 + [409] * 4
    refusals = {
        (r.json()["error"]["kind"], r.json()["error"]["limit"]) for r in teams if r.status_code == 409
    }
    assert refusals == {("seats", 20)}
    assert usage(stack, account)["kinds"]["seats"]["best_effort"] == 18
    stack.target.settle()
    if stack.target.runtime is not None:  # locally the stream path has caught up exactly
        assert usage(stack, account)["kinds"]["seats"]["eventual"] == 18


def test_usage_lists_every_kind_the_plan_lists_overrides_name_or_the_account_used(stack):
    # Given an account on a plan of projects and seats, with an override on volume_gb, and a
    # gpu created under an override since removed
    account, plan_id = new_account(), new_plan()
    put_plan(stack, plan_id, {"projects": 3, "seats": 10})
    assign(stack, account, plan_id)
    stack.call("PUT", f"/accounts/{account}/limits/volume_gb", {"limit": 500})
    stack.call("PUT", f"/accounts/{account}/limits/gpus", {"limit": 2})
    assert create(stack, account, "gpus", "gpu").status_code == 201
    assert stack.call("DELETE", f"/accounts/{account}/limits/gpus?force=true").status_code == 204
    # When its usage is read, by its own token and by an operator
    own = usage(stack, account)
    operators = stack.call("GET", f"/accounts/{account}/limits")
    # Then every such kind is there, with its limit and where it comes from
    shown = {kind: (u["limit"], u["limit_source"], u["best_effort"]) for kind, u in own["kinds"].items()}
    assert shown == {
        "projects": (3, "plan", 0),
        "seats": (10, "plan", 0),
        "volume_gb": (500, "override", 0),
        "gpus": (0, "plan", 1),
    }
    # And the default kind, which the plan lacks and nothing named, is not listed; the top-level
    # fields (the routes without a kind) are still its figures: none of it
    assert stack.default_kind not in own["kinds"]
    assert (own["limit"], own["used"], own["remaining"]) == (0, 0, 0)
    assert own["plan_id"] == plan_id
    assert (operators.status_code, operators.json()["kinds"].keys()) == (200, own["kinds"].keys())


def test_a_kind_the_plan_does_not_list_is_refused_unless_overridden(stack):
    # Given an account on a plan of projects only
    account, plan_id = new_account(), new_plan()
    put_plan(stack, plan_id, {"projects": 3})
    assign(stack, account, plan_id)
    stack.target.settle()  # the stream path's threshold writes done first
    before = stack.account_items(account)
    # When it creates a seat, it is refused with a limit of 0, and nothing is written
    refused = error_of(create(stack, account, "seats", "s"), 409, "LimitExceeded")
    assert (refused["kind"], refused["limit"], refused["used"]) == ("seats", 0, 0)
    assert stack.account_items(account) == before
    # When an override gives it one seat, the create fits
    assert stack.call("PUT", f"/accounts/{account}/limits/seats", {"limit": 1}).status_code == 200
    assert create(stack, account, "seats", "s").status_code == 201


def test_moving_an_account_to_a_plan_that_does_not_exist_is_a_400_and_changes_nothing(stack):
    # Given an account on pro
    account, plan_id, missing = new_account(), new_plan(), new_plan()
    put_plan(stack, plan_id, {"projects": 3})
    assign(stack, account, plan_id)
    stack.target.settle()  # the stream path's threshold writes done first
    before = stack.account_items(account)
    # When it is moved to a plan that does not exist
    response = stack.call("PUT", f"/accounts/{account}/plan", {"plan_id": missing})
    # Then that is a 400, and it is still on pro; no plan was made up
    assert missing in error_of(response, 400, "ValidationError")["message"]
    assert stack.account_items(account) == before
    assert usage(stack, account)["plan_id"] == plan_id
    assert stack.call("GET", f"/plans/{missing}").status_code == 404


def plan_pages(stack: Stack, page_size: int) -> list[list[dict[str, Any]]]:
    pages: list[list[dict[str, Any]]] = []
    token = None
    while len(pages) < 1000:
        query = f"?limit={page_size}" + (f"&next_token={token}" if token else "")
        page = stack.call("GET", f"/plans{query}")
        assert page.status_code == 200, page.text
        pages.append(page.json()["items"])
        token = page.json()["next_token"]
        if not token:
            return pages
    raise AssertionError("more than 1000 pages of plans")


def test_plans_are_listed_in_pages_and_a_missing_plan_is_a_404(stack):
    # Given three plans
    mine = {new_plan(): {"projects": n} for n in (1, 2, 3)}
    for plan_id, limits in mine.items():
        put_plan(stack, plan_id, limits)
    # When the plans are listed two at a time, following next_token
    pages = plan_pages(stack, 2)
    # Then every plan is there once, with its limits, over more than one page
    ids = [plan["plan_id"] for page in pages for plan in page]
    assert len(ids) == len(set(ids))
    assert {
        plan["plan_id"]: plan["limits"] for page in pages for plan in page if plan["plan_id"] in mine
    } == mine
    assert "default" in ids
    assert len(pages) >= 2
    # And a plan is read by its id; one that does not exist is a 404
    one = next(iter(mine))
    assert stack.call("GET", f"/plans/{one}").json() == {"plan_id": one, "limits": mine[one]}
    error_of(stack.call("GET", f"/plans/{new_plan()}"), 404, "NotFound")


def test_a_page_of_plans_holds_no_more_than_the_limit_asked(stack):
    # Given at least two stored plans (and the built-in default, never written)
    for n in (1, 2):
        put_plan(stack, new_plan(), {"projects": n})
    # When the plans are listed one at a time
    pages = plan_pages(stack, 1)
    # Then no page holds more than one
    assert [len(page) for page in pages if len(page) > 1] == []


def test_the_routes_without_a_kind_act_on_the_default_kind(stack):
    # Given an account limited to 2 by the route without a kind
    account = new_account()
    response = stack.call("PUT", f"/accounts/{account}/limit", {"limit": 2})
    assert (response.status_code, response.json()) == (200, {"account_id": account, "limit": 2})
    # When it creates by the route without a kind
    made = stack.call("POST", f"/accounts/{account}/resources", {"name": "web"})
    # Then the resource, the limit and usage's top-level fields are the default kind's
    assert (made.status_code, made.json()["kind"]) == (201, stack.default_kind)
    rid = made.json()["resource_id"]
    assert stack.call("GET", kind_path(account, stack.default_kind, rid)).json() == made.json()
    current = usage(stack, account)
    top = {k: current[k] for k in ("limit", "best_effort", "used", "remaining")}
    assert top == {"limit": 2, "best_effort": 1, "used": 1, "remaining": 1}
    default = current["kinds"][stack.default_kind]
    assert {k: default[k] for k in top} == top
    assert default["limit_source"] == "override"
    assert stack.call("POST", f"/accounts/{account}/resources", {"name": "db"}).status_code == 201
    refused = error_of(
        stack.call("POST", f"/accounts/{account}/resources", {"name": "x"}), 409, "LimitExceeded"
    )
    assert refused["kind"] == stack.default_kind
    # And its delete route frees the default kind's unit
    assert stack.call("DELETE", f"/accounts/{account}/resources/{rid}").status_code == 204
    assert usage(stack, account)["kinds"][stack.default_kind]["best_effort"] == 1


BAD_KINDS = ["-seats", "se%20ats", "s" * 65, "s%C3%A9ats", "seats!"]
BAD_UNITS = [0, -1, 1.5, "2", True, None, 1_000_000_001]


def test_malformed_kinds_and_units_are_a_400_and_write_nothing(stack):
    # Given an account with room for anything, and a resource of 2 units
    account = new_account()
    for kind in ("seats", stack.default_kind):
        stack.call("PUT", f"/accounts/{account}/limits/{kind}", {"limit": 100})
    made = create(stack, account, "seats", "team", units=2)
    assert made.status_code == 201
    rid = made.json()["resource_id"]
    stack.target.settle()  # the stream path's threshold writes done first
    before = stack.account_items(account)
    # When a kind is malformed, or units are not an integer of at least 1
    answers = [stack.call("POST", kind_path(account, kind), {"name": "x"}) for kind in BAD_KINDS]
    answers += [stack.call("PUT", f"/accounts/{account}/limits/{kind}", {"limit": 1}) for kind in BAD_KINDS]
    for units in BAD_UNITS:
        answers.append(stack.call("POST", kind_path(account, "seats"), {"name": "x", "units": units}))
        answers.append(stack.call("POST", f"/accounts/{account}/resources", {"name": "x", "units": units}))
        answers.append(stack.call("PATCH", kind_path(account, "seats", rid), {"units": units}))
    answers.append(stack.call("PATCH", kind_path(account, "seats", rid), {}))
    answers.append(stack.call("PATCH", kind_path(account, "seats", rid), {"units": 3, "name": "y"}))
    # Then each is a 400 ValidationError, and nothing was written
    assert [(r.status_code, r.json()["error"]["code"]) for r in answers] == [(400, "ValidationError")] * len(
        answers
    )
    assert stack.account_items(account) == before
    assert usage(stack, account)["kinds"]["seats"]["best_effort"] == 2


def test_patch_over_http(stack):
    # Given 9 of 10 seat units used, by teams of 4 and 5
    account = new_account()
    stack.call("PUT", f"/accounts/{account}/limits/seats", {"limit": 10})
    team = create(stack, account, "seats", "a", units=4).json()["resource_id"]
    assert create(stack, account, "seats", "b", units=5).status_code == 201
    stack.target.settle()  # the stream path's threshold writes done first
    before = stack.account_items(account)
    # When the first grows to 6, or an absent resource is resized
    grow = stack.call("PATCH", kind_path(account, "seats", team), {"units": 6})
    absent = stack.call("PATCH", kind_path(account, "seats", "no-such-team"), {"units": 1})
    # Then the growth is refused for the kind, the absent one is a 404, and nothing changed
    refused = error_of(grow, 409, "LimitExceeded")
    assert (refused["kind"], refused["limit"], refused["used"]) == ("seats", 10, 9)
    error_of(absent, 404, "NotFound")
    assert stack.account_items(account) == before
    # When it shrinks to 1, and the same PATCH is retried
    first = stack.call("PATCH", kind_path(account, "seats", team), {"units": 1})
    stack.target.settle()  # the stream path's threshold writes (9 of 10 down to 6) done first
    after_first = stack.account_items(account)
    retried = stack.call("PATCH", kind_path(account, "seats", team), {"units": 1})
    # Then both answer the resource at 1 unit, the retry wrote nothing, and 3 units were freed
    assert (first.status_code, retried.status_code) == (200, 200)
    assert first.json() == retried.json()
    assert retried.json()["units"] == 1
    assert stack.account_items(account) == after_first
    assert stack.call("GET", kind_path(account, "seats", team)).json()["units"] == 1
    assert create(stack, account, "seats", "c", units=4).status_code == 201


def test_dry_runs_write_nothing(stack):
    # Given 3 of 5 seat units used by a resource created by PUT
    account = new_account()
    stack.call("PUT", f"/accounts/{account}/limits/seats", {"limit": 5})
    body = {"name": "team", "lead": "ada", "units": 3}
    assert stack.call("PUT", kind_path(account, "seats", "t1"), body).status_code == 201
    stack.target.settle()  # the stream path's threshold writes done first
    before = stack.account_items(account)
    # When a POST, a PUT of the same id and body, a PUT of it with other units, and PATCHes are
    # tried as dry runs
    post = stack.call("POST", kind_path(account, "seats") + "?dry_run=true", {"name": "x", "units": 2})
    same = stack.call("PUT", kind_path(account, "seats", "t1") + "?dry_run=true", body)
    other = stack.call("PUT", kind_path(account, "seats", "t1") + "?dry_run=true", {**body, "units": 4})
    grow = stack.call("PATCH", kind_path(account, "seats", "t1") + "?dry_run=true", {"units": 6})
    absent = stack.call("PATCH", kind_path(account, "seats", "t9") + "?dry_run=true", {"units": 1})
    # Then each answers what its admission would decide, and nothing was written
    assert (post.status_code, post.json()["would_admit"], post.json()["units"]) == (200, True, 2)
    assert (same.status_code, same.json()["would_admit"], same.json()["units"]) == (200, True, 0)
    error_of(other, 409, "IdempotencyConflict")
    assert (grow.status_code, grow.json()["would_admit"], grow.json()["units"]) == (200, False, 3)
    error_of(absent, 404, "NotFound")
    assert stack.account_items(account) == before
    # And the real PUT with other units is refused the same way; with none, units are 1
    error_of(
        stack.call("PUT", kind_path(account, "seats", "t1"), {**body, "units": 4}), 409, "IdempotencyConflict"
    )
    one = stack.call("PUT", kind_path(account, "seats", "t2"), {"name": "solo"})
    assert (one.status_code, one.json()["units"]) == (201, 1)
    assert usage(stack, account)["kinds"]["seats"]["best_effort"] == 4
