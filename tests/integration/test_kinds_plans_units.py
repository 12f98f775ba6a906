"""Kinds, plans, overrides, units, resizes and dry runs (issue 18) at the domain level, against
DynamoDB Local: the limit of an (account, kind) is its override, else its plan's, else 0; every
count is in units; a PATCH moves the counters by the difference; a dry run writes nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import (
    IdempotencyConflict,
    LimitBelowUsage,
    LimitExceeded,
    NotFound,
    StoreUnavailable,
    Throttled,
    ValidationError,
)
from hybrid_counter.keys import account_pk, counter_key, plan_key, resource_key
from hybrid_counter.resources import ResourceService
from localrun.runtime import LocalRuntime
from localrun.stack.aws_clients import domain_clients
from tests.explorer.scheduler import Race
from tests.faults import injected

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def new_plan() -> str:
    return f"plan-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def clients(stack: LocalRuntime) -> Clients:
    """One set of clients for the module (making them is most of a test's set-up here)."""
    return domain_clients(stack.dynamodb_url)


@pytest.fixture
def snapshot(settings, clients) -> Callable[[str], list[dict[str, Any]]]:
    """Every item of an account's partition (consistent), in key order: what a request wrote."""

    def read(account_id: str) -> list[dict[str, Any]]:
        paginator = clients.dynamodb.get_paginator("query")
        found: list[dict[str, Any]] = []
        for page in paginator.paginate(
            TableName=settings.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": account_pk(account_id)}},
            ConsistentRead=True,
        ):
            found.extend(page["Items"])
        return found

    return read


@pytest.fixture
def raw(settings, clients) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def get(key: dict[str, Any]) -> dict[str, Any] | None:
        return clients.dynamodb.get_item(TableName=settings.table_name, Key=key, ConsistentRead=True).get(
            "Item"
        )

    return get


@pytest.fixture
def on_plan(service) -> Callable[..., str]:
    """Put a fresh plan with these limits, and the accounts on it; returns its id."""

    def make(limits: dict[str, int], *accounts: str) -> str:
        plan_id = new_plan()
        service.put_plan(plan_id, limits)
        for account_id in accounts:
            service.assign_plan(account_id, plan_id)
        return plan_id

    return make


def usage_of(service: ResourceService, account: str, kind: str) -> tuple[int, int, int, str]:
    usage = service.usage(account).kinds[kind]
    return usage.limit, usage.best_effort, usage.eventual, usage.limit_source


# ---- kinds, plans and units -----------------------------------------------------------------------
def test_each_kind_is_judged_by_the_accounts_plan_in_units(service, account, on_plan, drain):
    # Given the plan pro = {projects: 3, seats: 10} and an account on it
    on_plan({"projects": 3, "seats": 10}, account)
    # When 3 projects are created, the 4th is refused, naming its kind
    for n in range(3):
        service.create(account, f"p{n}", {}, kind="projects")
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "p3", {}, kind="projects")
    assert (refused.value.kind, refused.value.limit, refused.value.used) == ("projects", 3, 3)
    # Then seats are unaffected
    assert usage_of(service, account, "seats") == (10, 0, 0, "plan")
    # When a 6-seat team is created, a 5-seat team does not fit
    team_a, _ = service.create(account, "team-a", {}, kind="seats", units=6)
    with pytest.raises(LimitExceeded) as no_room:
        service.create(account, "team-b", {}, kind="seats", units=5)
    assert (no_room.value.kind, no_room.value.limit, no_room.value.used, no_room.value.units) == (
        "seats",
        10,
        6,
        5,
    )
    # When the first team shrinks to 4, the 5-seat team fits
    assert service.resize(account, team_a.resource_id, 4, kind="seats").units == 4
    service.create(account, "team-b", {}, kind="seats", units=5)
    # Then both counters hold 9 seat units once the stream has counted, and 3 projects
    drain(account)
    assert usage_of(service, account, "seats") == (10, 9, 9, "plan")
    assert usage_of(service, account, "projects") == (3, 3, 3, "plan")


def test_a_plan_that_cannot_be_read_refuses_the_create_as_retryable_and_writes_nothing(
    service, clients, account, on_plan, snapshot
):
    # Given an account on a plan, whose plan this process has not read yet
    on_plan({"projects": 3}, account)
    before = snapshot(account)
    # When every read of the account's plan is throttled (the counter's read and the profile's
    # read for the account's organization, a kind's first create's, go through: the judge's reads
    # fail)
    with (
        injected(
            clients.dynamodb, "GetItem", error="ProvisionedThroughputExceededException", skip=2, times=50
        ) as fault,
        pytest.raises(Throttled),
    ):
        service.create(account, "p", {}, kind="projects")
    # Then the create is a retryable 429 (not a 500), and nothing was written
    assert fault.fired >= 1
    assert snapshot(account) == before
    # And once the plan can be read the same create goes through
    service.create(account, "p", {}, kind="projects")


def test_units_default_to_one_and_a_delete_frees_all_its_units(service, account, drain):
    # Given a limit of 5 volume units
    service.set_limit(account, 5, kind="volume_gb")
    # When a resource is created without units, it holds 1
    small, _ = service.create(account, "small", {}, kind="volume_gb")
    assert small.units == 1
    big, _ = service.create(account, "big", {}, kind="volume_gb", units=4)
    drain(account)
    assert usage_of(service, account, "volume_gb")[1:3] == (5, 5)
    with pytest.raises(LimitExceeded):
        service.create(account, "more", {}, kind="volume_gb")
    # When the 4-unit resource is deleted
    service.delete(account, big.resource_id, kind="volume_gb")
    # Then all 4 units are free at once (both counters), and a 4-unit create fits again
    assert usage_of(service, account, "volume_gb")[1:3] == (1, 1)
    service.create(account, "big-again", {}, kind="volume_gb", units=4)
    drain(account)
    assert usage_of(service, account, "volume_gb")[1:3] == (5, 5)


def test_usage_lists_every_kind_the_plan_lists_overrides_name_or_the_account_used(service, account, on_plan):
    # Given a plan listing projects and seats, an override on volume_gb, and a gpu created under
    # an override since removed
    plan_id = on_plan({"projects": 3, "seats": 10}, account)
    service.set_limit(account, 500, kind="volume_gb")
    service.set_limit(account, 2, kind="gpus")
    service.create(account, "gpu", {}, kind="gpus")
    service.create(account, "p", {}, kind="projects")
    service.remove_limit(account, kind="gpus", force=True)  # below use: the plan's 0
    # When its usage is read
    usage = service.usage(account)
    # Then every such kind is listed, each with its limit and where that limit comes from
    shown = {kind: (u.limit, u.limit_source, u.best_effort) for kind, u in usage.kinds.items()}
    assert shown == {
        "projects": (3, "plan", 1),
        "seats": (10, "plan", 0),
        "volume_gb": (500, "override", 0),
        "gpus": (0, "plan", 1),  # used, no longer included: over its limit, nothing removed
    }
    # And the stack's default kind, which this plan lacks and the account never used or had an
    # override for, is not listed; the top-level fields are still its figures: 0 of 0
    assert service.kind(None) not in usage.kinds
    top = usage.to_json()
    assert (top["limit"], top["used"], top["remaining"]) == (0, 0, 0)
    assert usage.plan_id == plan_id
    as_json = usage.to_json()
    assert as_json["kinds"]["gpus"] == {
        "limit": 0,
        "limit_source": "plan",
        "best_effort": 1,
        "eventual": 0,
        "used": 1,
        "remaining": 0,
        "held": 0,
    }


def test_the_default_kind_is_listed_when_the_plan_has_it_or_an_override_or_use_names_it(
    service, account, on_plan
):
    default = service.kind(None)
    # Given an account on the built-in default plan: its kind is listed, top level and kinds agree
    fresh = service.usage(f"acct-{uuid.uuid4().hex[:12]}")
    assert set(fresh.kinds) == {default}
    assert fresh.to_json()["limit"] == fresh.kinds[default].limit > 0
    # Given an account on a plan without the default kind, with an override for it
    on_plan({"projects": 3}, account)
    assert default not in service.usage(account).kinds
    service.set_limit(account, 4)
    # Then it is listed, as the override, and the top-level fields are the same figures
    usage = service.usage(account)
    assert (usage.kinds[default].limit, usage.kinds[default].limit_source) == (4, "override")
    assert (usage.limit, usage.to_json()["remaining"]) == (4, 4)


def test_a_kind_the_plan_does_not_list_has_limit_0_unless_overridden(service, account, snapshot, on_plan):
    # Given an account on a plan that lists projects only
    on_plan({"projects": 3}, account)
    before = snapshot(account)
    # When it creates a seat, it is refused with a limit of 0, and nothing is written
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "s", {}, kind="seats")
    assert (refused.value.kind, refused.value.limit) == ("seats", 0)
    assert snapshot(account) == before
    # When an override gives it seats, the create fits
    service.set_limit(account, 1, kind="seats")
    assert service.create(account, "s", {}, kind="seats")[0].kind == "seats"
    # And an account on the default plan (the stack's default kind only) has no projects either
    other = f"acct-{uuid.uuid4().hex[:12]}"
    with pytest.raises(LimitExceeded) as not_in_default:
        service.create(other, "p", {}, kind="projects")
    assert (not_in_default.value.kind, not_in_default.value.limit) == ("projects", 0)
    assert service.create(other, "r", {})[0].kind == service.kind(None)


def test_assigning_a_plan_that_does_not_exist_is_refused_and_changes_nothing(
    service, account, snapshot, raw, on_plan
):
    # Given an account on pro
    plan_id = on_plan({"projects": 3}, account)
    before = snapshot(account)
    missing = new_plan()
    # When it is moved to a plan that does not exist
    with pytest.raises(ValidationError):
        service.assign_plan(account, missing)
    # Then nothing changed: still on pro, no plan item written, not even by a fresh process
    assert snapshot(account) == before
    assert raw(plan_key(missing)) is None
    assert service.usage(account).plan_id == plan_id
    fresh = ResourceService(service._settings, service._clients)
    assert fresh.usage(account).plan_id == plan_id


def test_a_page_of_plans_holds_no_more_than_the_page_size(service):
    # Given two stored plans, and the built-in default (never written)
    for n in (1, 2):
        service.put_plan(new_plan(), {"projects": n})
    # When the plans are listed one at a time
    pages = [service.list_plans(1)]
    while pages[-1].next_token and len(pages) < 10_000:
        pages.append(service.list_plans(1, pages[-1].next_token))
    # Then no page holds more than one, and the default is listed once
    assert [len(page.items) for page in pages if len(page.items) > 1] == []
    assert [plan.plan_id for page in pages for plan in page.items].count("default") == 1


def test_a_written_default_plan_is_listed_once_in_id_order(service, settings, clients):
    # Given the default plan written (with the built-in's own limits, so other tests see no change)
    service.put_plan("default", {"resources": 100})
    try:
        # When the plans are listed one at a time
        pages = [service.list_plans(1)]
        while pages[-1].next_token and len(pages) < 10_000:
            pages.append(service.list_plans(1, pages[-1].next_token))
        ids = [plan.plan_id for page in pages for plan in page.items]
        # Then the default is listed once, in its place, and every page holds one plan at most
        assert ids.count("default") == 1
        assert ids == sorted(ids)
        assert max(len(page.items) for page in pages) == 1
    finally:
        clients.dynamodb.delete_item(TableName=settings.table_name, Key=plan_key("default"))


def test_a_put_of_an_existing_id_with_other_units_is_an_idempotency_conflict(service, account, drain):
    # Given a resource of 2 units created by PUT
    service.set_limit(account, 10, kind="volume_gb")
    first, created = service.create(account, "disk", {}, "d1", kind="volume_gb", units=2)
    assert (created, first.units) == (True, 2)
    # When the same id is PUT with 3 units, it is refused; with 2, it is the same resource
    with pytest.raises(IdempotencyConflict):
        service.create(account, "disk", {}, "d1", kind="volume_gb", units=3)
    again, created_again = service.create(account, "disk", {}, "d1", kind="volume_gb", units=2)
    # Then it is counted once, 2 units
    assert (again, created_again) == (first, False)
    drain(account)
    assert usage_of(service, account, "volume_gb")[1:3] == (2, 2)


def test_the_routes_without_a_kind_act_on_the_stacks_default_kind(settings, clients, account, raw):
    # Given a stack whose DefaultKind is servers
    service = ResourceService(replace(settings, default_kind="servers", default_limit=2), clients)
    # When a resource is created, the limit set and usage read without a kind
    resource, _ = service.create(account, "web", {})
    service.set_limit(account, 1)
    # Then all of it is the servers kind's: the resource, its counter item and the override
    assert resource.kind == "servers"
    assert raw(resource_key(account, resource.resource_id, kind="servers")) is not None
    servers = raw(counter_key(account, kind="servers"))
    assert servers is not None
    assert (servers["best_effort"]["N"], servers["limit"]["N"]) == ("1", "1")
    usage = service.usage(account)
    assert (usage.limit, usage.best_effort) == (1, 1)
    assert (usage.kinds["servers"].limit, usage.kinds["servers"].limit_source) == (1, "override")
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "db", {})
    assert refused.value.kind == "servers"


# ---- overrides ----------------------------------------------------------------------------------
def test_an_override_applies_at_once_and_removing_it_returns_to_the_plan(service, account, on_plan):
    # Given 3 projects under a plan of 3
    on_plan({"projects": 3}, account)
    for n in range(3):
        service.create(account, f"p{n}", {}, kind="projects")
    # When an override raises projects to 5, two more fit, and no more
    service.set_limit(account, 5, kind="projects")
    service.create(account, "p3", {}, kind="projects")
    service.create(account, "p4", {}, kind="projects")
    with pytest.raises(LimitExceeded) as at_five:
        service.create(account, "p5", {}, kind="projects")
    assert at_five.value.limit == 5
    # When it is removed (below use, so only when forced), the plan's 3 is the limit again:
    # creates are refused, nothing removed
    with pytest.raises(LimitBelowUsage):
        service.remove_limit(account, kind="projects")
    assert usage_of(service, account, "projects") == (5, 5, 0, "override")
    service.remove_limit(account, kind="projects", force=True)
    with pytest.raises(LimitExceeded) as back_to_plan:
        service.create(account, "p5", {}, kind="projects")
    assert (back_to_plan.value.limit, back_to_plan.value.used) == (3, 5)
    assert usage_of(service, account, "projects") == (3, 5, 0, "plan")


@pytest.mark.parametrize("judged_by", ["override", "plan"])
def test_a_create_racing_an_override_change_is_judged_by_the_new_override(
    service, clients, account, on_plan, snapshot, judged_by
):
    # Given 2 projects used of a limit of 5 (the override's, or the plan's)
    on_plan({"projects": 5}, account)
    if judged_by == "override":
        service.set_limit(account, 5, kind="projects")
    for n in range(2):
        service.create(account, f"p{n}", {}, kind="projects")
    # When a create has read the counter item (room for one more) and written its resource, and
    # the override is lowered to 2 before its admission lands
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        create = race.start("POST", lambda: service.create(account, "late", {}, kind="projects"))
        race.until(create, "PutItem")
        service.set_limit(account, 2, kind="projects")
        race.finish(create)
    # Then its admission is refused by its condition and judged again on the new override
    assert isinstance(create.error, LimitExceeded), create.result
    assert (create.error.limit, create.error.used) == (2, 2)
    assert usage_of(service, account, "projects") == (2, 2, 0, "override")
    assert len([i for i in snapshot(account) if i["sk"]["S"].startswith("RESOURCE#projects#")]) == 2


# ---- plans change within PlanCacheSeconds ---------------------------------------------------------
def test_a_plan_change_takes_effect_within_the_cache_time_and_at_once_where_it_was_made(
    settings, clients, account
):
    # Given two processes on one clock, a cache of 30 s, and an account on a plan of 1 project
    clock = Clock()
    cached = replace(settings, plan_cache_seconds=30)
    changer = ResourceService(cached, clients, effects=Effects(clock=clock))
    other = ResourceService(cached, clients, effects=Effects(clock=clock))
    plan_id = new_plan()
    changer.put_plan(plan_id, {"projects": 1})
    changer.assign_plan(account, plan_id)
    other.create(account, "p0", {}, kind="projects")
    for process in (changer, other):  # each has read the plan, and keeps it
        with pytest.raises(LimitExceeded):
            process.create(account, "p1", {}, kind="projects")
    # When the process that changes the plan raises it to 3
    changer.put_plan(plan_id, {"projects": 3})
    # Then that process judges by it at once (it forgot what it had cached)
    changer.create(account, "p1", {}, kind="projects")
    # And the other keeps the old limit until its cache expires, then takes the new one
    clock.now += 29
    with pytest.raises(LimitExceeded) as still_old:
        other.create(account, "p2", {}, kind="projects")
    assert still_old.value.limit == 1
    assert other.usage(account).kinds["projects"].limit == 1
    clock.now += 2
    other.create(account, "p2", {}, kind="projects")
    assert other.usage(account).kinds["projects"].limit == 3


def test_lowering_a_plan_below_an_accounts_use_keeps_everything_and_admits_nothing_until_use_falls(
    service, account, on_plan
):
    # Given an account using 4 of its plan's 5 projects, and another with an override of 5
    plan_id = on_plan({"projects": 5})
    service.assign_plan(account, plan_id)
    made = [service.create(account, f"p{n}", {}, kind="projects")[0] for n in range(4)]
    other = f"acct-{uuid.uuid4().hex[:12]}"
    service.assign_plan(other, plan_id)
    service.set_limit(other, 5, kind="projects")
    service.create(other, "q", {}, kind="projects")
    # When the plan is lowered to 2: accepted (no LimitBelowUsage, no force), one write
    service.put_plan(plan_id, {"projects": 2})
    # Then nothing is removed, usage shows use over the limit and no room
    projects = service.usage(account).kinds["projects"]
    assert (projects.limit, projects.used, projects.remaining) == (2, 4, 0)
    # And no create is admitted while use + units > limit
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "p4", {}, kind="projects")
    assert (refused.value.limit, refused.value.used) == (2, 4)
    # And deletes work; after two, use is 2: still no room; after a third, one create fits again
    for resource in made[:2]:
        service.delete(account, resource.resource_id, kind="projects")
    with pytest.raises(LimitExceeded):
        service.create(account, "p4", {}, kind="projects")
    service.delete(account, made[2].resource_id, kind="projects")
    assert service.create(account, "p4", {}, kind="projects")[0].kind == "projects"
    # And an account with an override keeps its own limit
    assert service.usage(other).kinds["projects"].limit == 5
    service.create(other, "q2", {}, kind="projects")


def test_moving_an_account_to_another_plan_takes_effect_at_once_in_every_process(settings, clients, account):
    # Given two processes on one clock and an account on a plan of 1 project, at its limit
    clock = Clock()
    cached = replace(settings, plan_cache_seconds=30)
    changer = ResourceService(cached, clients, effects=Effects(clock=clock))
    other = ResourceService(cached, clients, effects=Effects(clock=clock))
    small, large = new_plan(), new_plan()
    changer.put_plan(small, {"projects": 1})
    changer.put_plan(large, {"projects": 2})
    changer.assign_plan(account, small)
    other.create(account, "p0", {}, kind="projects")
    for process in (changer, other):  # each has read the account's plan, and keeps it
        assert process.usage(account).plan_id == small
        assert process.would_create(account, "p1", {}, kind="projects").would_admit is False
    # When the account is moved to the larger plan
    changer.assign_plan(account, large)
    # Then both processes judge by the new plan at once (the move marked the account's counter
    # items: before, the other process judged by its cached plan until the cache expired)
    for process in (changer, other):
        assert process.usage(account).plan_id == large
        assert process.would_create(account, "p1", {}, kind="projects").would_admit is True
    other.create(account, "p1", {}, kind="projects")
    # And moved back down (forced: 2 used), the other process, which cached the larger plan,
    # refuses at once
    changer.assign_plan(account, small, force=True)
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "p2", {}, kind="projects")
    assert (refused.value.limit, refused.value.used) == (1, 2)
    assert other.usage(account).plan_id == small
    # And once the cache expired, nothing changes
    clock.now += 31
    assert other.would_create(account, "p2", {}, kind="projects").would_admit is False


# ---- resizes -----------------------------------------------------------------------------------
def unindexed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items without their PendingIndex keys."""
    return [{k: v for k, v in item.items() if k not in ("pending_shard", "pending_since")} for item in items]


def test_a_resize_that_grows_past_the_limit_is_refused_and_changes_nothing(service, account, snapshot):
    # Given 9 of 10 seat units used, by teams of 4 and 5
    service.set_limit(account, 10, kind="seats")
    team, _ = service.create(account, "a", {}, kind="seats", units=4)
    service.create(account, "b", {}, kind="seats", units=5)
    before = snapshot(account)
    # When the first team grows to 6
    with pytest.raises(LimitExceeded) as refused:
        service.resize(account, team.resource_id, 6, kind="seats")
    # Then it is refused for the 2 units it asked, naming the kind, and nothing changed
    assert (refused.value.kind, refused.value.limit, refused.value.used, refused.value.units) == (
        "seats",
        10,
        9,
        2,
    )
    # (but the PendingIndex: the claim put the team's item there, and its end keeps it there
    # while the stream path has not counted it yet; that count takes it out)
    assert unindexed(snapshot(account)) == unindexed(before)
    assert not any(
        item.get("counter_processed", {}).get("BOOL") for item in snapshot(account) if "pending_shard" in item
    )
    # And growing by the one unit left fits
    assert service.resize(account, team.resource_id, 5, kind="seats").units == 5
    assert usage_of(service, account, "seats")[1] == 10


def test_a_resize_whose_request_died_is_settled_by_a_later_patch_after_the_grace_period(
    settings, clients, account, raw, drain
):
    # Given a 4-seat team whose growth to 6 died after its claim: its counter write failed in a
    # way that may have applied (a 500), and nothing finished it (the stream path had no
    # last_resize to act on), so the claim stays
    clock = Clock()
    quick = Effects(clock=clock, waiter=Waiter(attempts=2, delay=0.01))
    service = ResourceService(settings, clients, effects=quick)
    service.set_limit(account, 10, kind="seats")
    team, _ = service.create(account, "a", {}, kind="seats", units=4)
    drain(account)
    with (
        injected(clients.dynamodb_single_attempt, "UpdateItem", error="InternalServerError"),
        pytest.raises(StoreUnavailable),
    ):
        service.resize(account, team.resource_id, 6, kind="seats")
    key = resource_key(account, team.resource_id, kind="seats")
    assert "resize_request" in (raw(key) or {})
    # When, past the grace period, the client patches it again (to 5)
    clock.now += settings.pending_grace_seconds + 1
    resized = service.resize(account, team.resource_id, 5, kind="seats")
    # Then the stale claim was ended at the size the counters hold (4: its write never applied),
    # and the new resize went through from there: the counters hold 5, exactly
    item = raw(key) or {}
    assert "resize_request" not in item
    assert resized.units == 5
    assert int(item["units"]["N"]) == 5
    drain(account)
    _, best_effort, eventual, _ = usage_of(service, account, "seats")
    assert (best_effort, eventual) == (5, 5)


def test_repeating_the_creating_put_after_a_patch_is_the_same_request(service, account):
    # Given a team created by a PUT of 3 seats, then patched to 5
    service.set_limit(account, 10, kind="seats")
    service.create(account, "team", {"tier": "gold"}, "team-1", kind="seats", units=3)
    service.resize(account, "team-1", 5, kind="seats")
    # When the creating PUT is repeated (a client retrying it late), or dry-run
    resource, created = service.create(account, "team", {"tier": "gold"}, "team-1", kind="seats", units=3)
    dry = service.would_create(account, "team", {"tier": "gold"}, "team-1", kind="seats", units=3)
    # Then it is the same request: 200 with the resource as it is now, adding nothing
    assert (created, resource.units) == (False, 5)
    assert (dry.would_admit, dry.units) == (True, 0)
    assert usage_of(service, account, "seats")[1] == 5
    # And a PUT with the team's current size is not the request that created it
    with pytest.raises(IdempotencyConflict):
        service.create(account, "team", {"tier": "gold"}, "team-1", kind="seats", units=5)
    with pytest.raises(IdempotencyConflict):
        service.would_create(account, "team", {"tier": "gold"}, "team-1", kind="seats", units=5)


def test_a_shrink_releases_its_units_at_once(service, account, drain):
    # Given a counted 6-seat team under a limit of 10: a 5-seat team does not fit
    service.set_limit(account, 10, kind="seats")
    team, _ = service.create(account, "a", {}, kind="seats", units=6)
    drain(account)
    with pytest.raises(LimitExceeded):
        service.create(account, "b", {}, kind="seats", units=5)
    # When it shrinks to 2
    resized = service.resize(account, team.resource_id, 2, kind="seats")
    # Then both counters drop by 4 at once, and the 5-seat team fits
    assert resized.units == 2
    assert service.get(account, team.resource_id, kind="seats").units == 2
    assert usage_of(service, account, "seats")[1:3] == (2, 2)
    service.create(account, "b", {}, kind="seats", units=5)
    drain(account)
    assert usage_of(service, account, "seats")[1:3] == (7, 7)


@pytest.mark.parametrize(("units", "target"), [(2, 5), (4, 1)])
def test_a_resize_before_the_stream_counted_the_resource_leaves_eventual_to_the_stream(
    service, account, drain, units, target
):
    # Given a resource the stream path has not counted yet
    service.set_limit(account, 10, kind="volume_gb")
    resource, _ = service.create(account, "v", {}, kind="volume_gb", units=units)
    assert usage_of(service, account, "volume_gb")[1:3] == (units, 0)
    # When it is resized
    service.resize(account, resource.resource_id, target, kind="volume_gb")
    # Then best_effort moves at once, eventual not at all; the stream counts the units it holds
    assert usage_of(service, account, "volume_gb")[1:3] == (target, 0)
    drain(account)
    assert usage_of(service, account, "volume_gb")[1:3] == (target, target)


def test_a_retried_patch_with_the_same_target_writes_nothing(service, account, snapshot, raw, drain):
    # Given a counted resource resized from 2 to 3 units
    service.set_limit(account, 10, kind="seats")
    team, _ = service.create(account, "a", {}, kind="seats", units=2)
    drain(account)
    service.resize(account, team.resource_id, 3, kind="seats")
    counter_before = raw(counter_key(account, kind="seats"))
    before = snapshot(account)
    # When the same PATCH is retried
    again = service.resize(account, team.resource_id, 3, kind="seats")
    # Then it answers the resource at 3 units, and the counter item (and every item) is unchanged
    assert again.units == 3
    assert raw(counter_key(account, kind="seats")) == counter_before
    assert snapshot(account) == before
    assert usage_of(service, account, "seats")[1:3] == (3, 3)


def test_a_patch_of_an_absent_resource_is_not_found(service, account, snapshot):
    # Given a resource created and deleted, an id never used, and a live seat
    service.set_limit(account, 10, kind="seats")
    gone, _ = service.create(account, "a", {}, kind="seats", units=2)
    service.delete(account, gone.resource_id, kind="seats")
    live, _ = service.create(account, "b", {}, kind="seats")
    before = snapshot(account)
    # When the first two are resized, or the seat's id under another kind (another resource)
    for rid, kind in ((gone.resource_id, "seats"), ("never-was", "seats"), (live.resource_id, "projects")):
        # Then each is NotFound, as a dry run too
        with pytest.raises(NotFound):
            service.resize(account, rid, 3, kind=kind)
        with pytest.raises(NotFound):
            service.would_resize(account, rid, 3, kind=kind)
    # And nothing was written
    assert snapshot(account) == before


# Which request moves first, and by how many of its calls (a PATCH makes 5, a DELETE 3), before
# the two take turns call by call.
SCHEDULES = [("PATCH", k) for k in range(1, 6)] + [("DELETE", k) for k in range(1, 4)]


def test_patches_concurrent_with_deletes_end_in_a_state_some_order_explains(
    settings, clients, service, account, drain, raw
):
    # Given a counted resource per schedule, of 2 units to grow to 4 or of 4 to shrink to 1
    service.set_limit(account, 100, kind="volume_gb")
    sizes = {f"{first}-{k}": (2, 4) if n % 2 else (4, 1) for n, (first, k) in enumerate(SCHEDULES)}
    for rid, (units, _) in sizes.items():
        service.create(account, rid, {}, rid, kind="volume_gb", units=units)
    drain(account)
    held = sum(units for units, _ in sizes.values())
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        waits = Waiter(attempts=6, delay=0, sleep=lambda _: race.scheduler.sleep_point())
        api = ResourceService(settings, clients, effects=Effects(waiter=waits))
        for rid, (units, target) in sizes.items():
            first, k = rid.split("-")[0], int(rid.split("-")[1])
            # When a PATCH and a DELETE of it interleave, the first moving k calls ahead, then
            # the two taking turns call by call
            ops = {
                "PATCH": race.start("PATCH", partial(api.resize, account, rid, target, kind="volume_gb")),
                "DELETE": race.start("DELETE", partial(api.delete, account, rid, kind="volume_gb")),
            }
            race.step(ops[first], times=k)
            while not all(op.done for op in ops.values()):
                for name in sorted(ops, key=lambda name: name == first):
                    race.step(ops[name])
            # Then the answers are those of some order, and what is left is what it leaves
            pair = answer(ops["PATCH"]), answer(ops["DELETE"])
            explained = {
                ("ok", "ok"): None,  # PATCH, then DELETE
                ("404", "ok"): None,  # DELETE, then PATCH
                ("503", "ok"): None,  # DELETE; the PATCH did nothing
                ("ok", "503"): target,  # PATCH; the DELETE did nothing
                ("503", "503"): units,  # neither did anything
            }
            assert pair in explained, f"{rid}: {pair} are no order's answers"
            item = raw(resource_key(account, rid, kind="volume_gb"))
            left = (
                None
                if item is None
                else (item["state"]["S"], int(item["units"]["N"]), "resize_request" in item)
            )
            assert left == (None if explained[pair] is None else ("live", explained[pair], False)), (
                rid,
                pair,
            )
            held += (explained[pair] or 0) - units
            assert usage_of(service, account, "volume_gb")[1:3] == (held, held), (rid, pair)
    # And the stream path, once it has seen it all, agrees
    drain(account)
    assert usage_of(service, account, "volume_gb")[1:3] == (held, held)


def answer(op: Any) -> str:
    if op.error is None:
        return "ok"
    if isinstance(op.error, NotFound):
        return "404"
    if isinstance(op.error, StoreUnavailable):
        return "503"
    raise op.error


# ---- dry runs ------------------------------------------------------------------------------------
def test_dry_runs_answer_as_the_admission_would_and_write_nothing(service, account, snapshot, on_plan):
    # Given 3 of 5 seat units used by a resource created by PUT
    on_plan({"seats": 5}, account)
    service.create(account, "team", {"lead": "ada"}, "t1", kind="seats", units=3)
    before = snapshot(account)
    # When creates, PUTs and PATCHes are tried as dry runs
    fits = service.would_create(account, "x", {}, kind="seats", units=2)
    too_big = service.would_create(account, "x", {}, kind="seats", units=3)
    new_id = service.would_create(account, "x", {}, "t2", kind="seats", units=2)
    same_body = service.would_create(account, "team", {"lead": "ada"}, "t1", kind="seats", units=3)
    with pytest.raises(IdempotencyConflict):
        service.would_create(account, "team", {"lead": "ada"}, "t1", kind="seats", units=4)
    with pytest.raises(IdempotencyConflict):
        service.would_create(account, "team", {"lead": "bob"}, "t1", kind="seats", units=3)
    grow = service.would_resize(account, "t1", 5, kind="seats")
    grow_too_much = service.would_resize(account, "t1", 6, kind="seats")
    shrink = service.would_resize(account, "t1", 1, kind="seats")
    # Then each says what its admission would decide, with the units it would add
    answers = [
        (a.would_admit, a.units, a.limit, a.used)
        for a in (fits, too_big, new_id, same_body, grow, grow_too_much, shrink)
    ]
    assert answers == [
        (True, 2, 5, 3),
        (False, 3, 5, 3),
        (True, 2, 5, 3),
        (True, 0, 5, 3),  # the PUT repeats the create: it exists, adding nothing
        (True, 2, 5, 3),
        (False, 3, 5, 3),
        (True, -2, 5, 3),
    ]
    assert fits.to_json() == {
        "would_admit": True,
        "kind": "seats",
        "units": 2,
        "limit": 5,
        "used": 3,
        "remaining": 2,
    }
    # And nothing was written
    assert snapshot(account) == before
