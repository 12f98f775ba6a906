"""A plan move is judged by at once in every process (governance/changes.py ``_plan_marks``,
plans/limits.py ``plan_judged``): the move marks each of the account's counter items in its own
transaction, and an admission judged by a plan is conditional on the mark it read. Before, every
process but the mover's judged by the plan it had cached until PlanCacheSeconds passed: a move
down let a process that cached the old plan admit past the new limit for up to a minute, and the
move's LimitBelowUsage check was a read before the write.

Two processes (two services, each its own caches) on one clock; the cache outlives each test."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.effects import Effects
from hybrid_counter.errors import LimitBelowUsage, LimitExceeded
from hybrid_counter.governance.changes import MAX_MARKS
from hybrid_counter.keys import account_pk
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.faults import target_of
from tests.integration.test_kinds_plans_units import Clock, new_plan

pytestmark = pytest.mark.integration


@pytest.fixture
def two(settings: Settings, clients: Clients) -> tuple[ResourceService, ResourceService]:
    """(the operator's process, another that serves creates), caches of 5 minutes."""
    clock = Clock()
    cached = replace(settings, plan_cache_seconds=300)
    return (
        ResourceService(cached, clients, effects=Effects(clock=clock)),
        ResourceService(cached, clients, effects=Effects(clock=clock)),
    )


@contextmanager
def before_the_first(
    clients: Clients, operation: str, matches: Callable[[dict[str, Any]], bool], then: Callable[[], None]
) -> Iterator[list[str]]:
    """Run ``then`` once, just before the first ``operation`` call whose body ``matches`` is sent
    (that call then goes on as it would have)."""
    ran: list[str] = []

    def hook(request: Any, **_: Any) -> None:
        if ran or target_of(request) != operation or not matches(json.loads(request.body or b"{}")):
            return
        ran.append(operation)
        then()

    # (admissions go by the single-attempt client, everything else by the retrying one)
    both = (clients.dynamodb, clients.dynamodb_single_attempt)
    for client in both:
        client.meta.events.register_first("before-send.*.*", hook)
    try:
        yield ran
    finally:
        for client in both:
            client.meta.events.unregister("before-send.*.*", hook)


def an_admission(body: dict[str, Any]) -> bool:
    return "last_admission" in json.dumps(body.get("ExpressionAttributeNames", {}))


def a_move(body: dict[str, Any]) -> bool:
    return "plan_moves" in json.dumps(body)


def test_a_create_judged_by_the_old_plan_and_written_after_the_move_is_judged_again(two, clients, account):
    mover, other = two
    small, large = new_plan(), new_plan()
    mover.put_plan(small, {"projects": 1})
    mover.put_plan(large, {"projects": 3})
    mover.assign_plan(account, large)
    # Given the other process has cached the large plan, and holds 1 of its 3
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved to the plan of 1 between that process's judgement of a create
    # (by the large plan: room) and its admission's write
    with (
        before_the_first(
            clients, "UpdateItem", an_admission, lambda: mover.assign_plan(account, small)
        ) as ran,
        pytest.raises(LimitExceeded) as refused,
    ):
        other.create(account, "p1", {}, kind="projects")
    # Then the write, conditional on the mark it read, is refused and judged again by the new
    # plan: 409 at 1 of 1 (before: admitted, 2 on a plan of 1)
    assert ran == ["UpdateItem"]
    assert (refused.value.limit, refused.value.used) == (1, 1)
    assert mover.usage(account).kinds["projects"].best_effort == 1


def test_a_move_below_use_racing_a_create_is_refused_unforced(two, clients, account):
    mover, other = two
    small, large = new_plan(), new_plan()
    mover.put_plan(small, {"projects": 1})
    mover.put_plan(large, {"projects": 3})
    mover.assign_plan(account, large)
    other.create(account, "p0", {}, kind="projects")
    # Given a move to the plan of 1, judged on the account's use (1: fits)
    # When a create lands between that judgement and the move's write
    with (
        before_the_first(
            clients, "TransactWriteItems", a_move, lambda: other.create(account, "p1", {}, kind="projects")
        ) as ran,
        pytest.raises(LimitBelowUsage) as refused,
    ):
        mover.assign_plan(account, small)
    # Then the move, its check in its own write, is refused and judged again: 2 in use is above 1
    # (before: written unforced with 2 on a plan of 1)
    assert ran == ["TransactWriteItems"]
    assert refused.value.below == [("projects", 1, 2)]
    assert mover.usage(account).plan_id == large


def test_a_kind_of_the_old_plan_never_used_is_judged_by_the_new_plan_at_once(two, account):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3, "seats": 5})
    mover.put_plan(new, {"projects": 3})
    mover.assign_plan(account, old)
    # Given the other process cached the old plan (a project), and no seat was ever taken
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved to a plan without seats
    mover.assign_plan(account, new)
    # Then the other process refuses a seat at once (before: admitted by its cached plan of 5),
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "s0", {}, kind="seats")
    assert (refused.value.limit, refused.value.used) == (0, 0)
    # and the usage lists no seats (an item that holds only the move's mark is not a kind used)
    for process in (mover, other):
        usage = process.usage(account)
        assert (usage.plan_id, sorted(usage.kinds)) == (new, ["projects"])


def test_a_grow_by_a_process_that_cached_the_old_plan_is_judged_by_the_new(two, account):
    mover, other = two
    small, large = new_plan(), new_plan()
    mover.put_plan(small, {"projects": 2})
    mover.put_plan(large, {"projects": 5})
    mover.assign_plan(account, large)
    made, _ = other.create(account, "p0", {}, kind="projects")
    # When the account is moved to the plan of 2 (1 in use)
    mover.assign_plan(account, small)
    # Then the other process refuses a grow to 3 units at once, and admits one to 2
    with pytest.raises(LimitExceeded) as refused:
        other.resize(account, made.resource_id, 3, kind="projects")
    assert (refused.value.limit, refused.value.used) == (2, 1)
    assert other.resize(account, made.resource_id, 2, kind="projects").units == 2


def test_the_moves_marks_are_no_work_for_the_stream_path(
    two, settings, clients, stream: StreamReader, account
):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3, "seats": 5})
    mover.put_plan(new, {"projects": 2, "volumes": 4})
    mover.assign_plan(account, old)
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved (marking the item it had and making items it had not)
    mover.assign_plan(account, new)
    # Then the stream path takes the records of the marks without a failure, and counts nothing
    # more than the one project
    counter = EventualCounter(settings.table_name, "batched", clients, sleep=lambda _: None)
    while records := stream.records_of(account_pk(account)):
        assert process_stream_batch(records, counter).failed_sequence_numbers == []
    usage = mover.usage(account)
    assert {kind: (k.best_effort, k.eventual) for kind, k in usage.kinds.items()} == {
        "projects": (1, 1),
        "volumes": (0, 0),
    }


def test_an_account_with_more_kinds_than_a_transaction_holds_moves_as_before(two, account):
    mover, other = two
    many = {f"k{n:03d}": 1 for n in range(MAX_MARKS)}
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3})
    mover.put_plan(new, {**many, "projects": 1})
    mover.assign_plan(account, old)
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved to a plan whose kinds with the old plan's are more than a move's
    # transaction marks
    mover.assign_plan(account, new)
    # Then the move is made without marks: the mover judges by the new plan, the other process by
    # the plan it cached until its cache expires (the documented window: PlanCacheSeconds)
    assert mover.would_create(account, "p1", {}, kind="projects").would_admit is False
    assert other.would_create(account, "p1", {}, kind="projects").would_admit is True


def test_a_move_to_a_plan_lowered_just_before_is_judged_by_its_new_limits(two, new_account):
    mover, other = two
    big, target = new_plan(), new_plan()
    mover.put_plan(big, {"projects": 50})
    mover.put_plan(target, {"projects": 10})
    account, neighbour = new_account(), new_account()
    mover.assign_plan(account, big)
    mover.assign_plan(neighbour, target)
    # Given the other process has cached the target plan at 10 (a neighbour's usage) and the
    # account's profile on the big plan (a create)
    assert other.usage(neighbour).kinds["projects"].limit == 10
    other.create(account, "p0", {}, kind="projects")
    # When the target plan is lowered to 2, and the account moved onto it (1 in use: fits)
    mover.put_plan(target, {"projects": 2})
    mover.assign_plan(account, target)
    # Then the other process judges the account by the plan's limits the move was judged by: one
    # more is admitted, not nine (review 81: the mark named the plan, and the process read its
    # limits through its cache, still at 10)
    other.create(account, "p1", {}, kind="projects")
    with pytest.raises(LimitExceeded) as refused:
        other.create(account, "p2", {}, kind="projects")
    assert (refused.value.limit, refused.value.used) == (2, 2)


def test_usage_in_a_process_that_cached_the_old_plan_shows_the_new_plans_limits(two, account):
    mover, other = two
    old, new = new_plan(), new_plan()
    mover.put_plan(old, {"projects": 3, "seats": 5})
    mover.put_plan(new, {"projects": 2, "volumes": 4})
    mover.assign_plan(account, old)
    # Given the other process cached the old plan (a project)
    other.create(account, "p0", {}, kind="projects")
    # When the account is moved to the new plan
    mover.assign_plan(account, new)
    # Then the other process's usage shows the new plan and its limits, for kinds never used too
    # (their items hold the move's mark; usage reads no profile)
    usage = other.usage(account)
    assert usage.plan_id == new
    assert {kind: k.limit for kind, k in usage.kinds.items()} == {"projects": 2, "volumes": 4}
