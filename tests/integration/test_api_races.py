"""The races of issue 6, each as the interleaving that broke the counts, replayed call by call.

Each test runs real requests against DynamoDB Local and decides, DynamoDB call by DynamoDB call,
which request goes next (tests/explorer/scheduler.py). Every one of them failed on the previous
protocol (token set, soft delete before the stream's uncount); the explorer
(test_interleavings.py) covers every other order of the same calls.
"""

from __future__ import annotations

import time

import pytest

from benchmarks.capacity import item_size
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import LimitExceeded, NotFound, Throttled
from hybrid_counter.healing import Healer
from hybrid_counter.keys import counter_key
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Crash, Race
from tests.faults import injected

pytestmark = pytest.mark.integration


@pytest.fixture
def race(clients):
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        yield race


@pytest.fixture
def api(settings, clients, race):
    """A ResourceService whose waits for other requests are scheduling points of the race."""
    effects = Effects(waiter=Waiter(attempts=5, delay=0, sleep=lambda _: race.scheduler.sleep_point()))
    return ResourceService(settings, clients, effects=effects)


def counts(service, account, live_count):
    usage = service.usage(account)
    return usage.best_effort, usage.eventual, live_count(account)


def test_1_a_delete_between_a_creates_put_and_its_admission_finds_nothing_to_delete(
    api, service, account, race, settle, live_count
):
    # Given an account with a limit of 1, and PUT x stopped after writing x, before its admission
    service.set_limit(account, 1)
    put = race.start("PUT x", lambda: api.create(account, "x", {}, resource_id="x"))
    race.until(put, "PutItem")
    # When DELETE x runs whole in between, and then the PUT finishes
    delete = race.run("DELETE x", lambda: api.delete(account, "x"))
    race.finish(put)
    # Then the delete came first (x did not exist yet), the create after it, and the counts agree
    assert isinstance(delete.error, NotFound)
    assert put.error is None
    assert put.result[1] is True
    settle(account)
    assert counts(service, account, live_count) == (1, 1, 1)
    assert service.get(account, "x").resource_id == "x"


def test_2_a_delete_during_a_refused_creates_rollback_releases_nothing(
    api, service, account, race, settle, live_count
):
    # Given a limit of 2 with one resource, and PUT x past its limit check with x written
    service.set_limit(account, 2)
    service.create(account, "o", {}, resource_id="o")
    put = race.start("PUT x", lambda: api.create(account, "x", {}, resource_id="x"))
    race.until(put, "PutItem")
    # When another create takes the last slot, x's admission is refused, and DELETE x lands
    # before x's rollback
    race.run("POST", lambda: api.create(account, "other", {}))
    race.until(put, "UpdateItem")
    delete = race.run("DELETE x", lambda: api.delete(account, "x"))
    race.finish(put)
    # Then the delete found nothing (x was never created), the PUT was refused, no slot was freed
    assert isinstance(delete.error, NotFound)
    assert isinstance(put.error, LimitExceeded)
    settle(account)
    assert counts(service, account, live_count) == (2, 2, 2)
    with pytest.raises(LimitExceeded):
        service.create(account, "a third", {})


def test_2_a_refused_creates_rollback_retried_after_a_lost_response_removes_only_its_own_item(
    api, service, account, race, settle, live_count
):
    # Given a limit of 1, and PUT x past its limit check with x written, refused because another
    # create took the slot, its rollback applied but its response lost (botocore will retry it)
    service.set_limit(account, 1)
    first = race.start("PUT x", lambda: api.create(account, "x", {}, resource_id="x"))
    race.until(first, "PutItem")
    service.create(account, "o", {}, resource_id="o")
    race.until(first, "UpdateItem")  # its admission, refused
    assert race.next_call(first) == "DeleteItem"
    race.step(first, fault="lost")
    assert race.next_call(first) == "DeleteItem"  # botocore's retry of the rollback, not sent yet
    # When the slot is freed and the client's retried PUT x creates x afresh, before that retry
    service.delete(account, "o")
    _, created = service.create(account, "x", {}, resource_id="x")
    assert created is True
    race.finish(first)
    # Then the first attempt is still refused, and its rollback removed nothing but its own item:
    # x, answered 201, stays visible, holding the slot it was counted for
    assert isinstance(first.error, LimitExceeded)
    assert service.get(account, "x").resource_id == "x"
    settle(account)
    assert counts(service, account, live_count) == (1, 1, 1)


def test_3_two_deletes_of_one_resource_around_the_stream_release_it_once(
    api, service, account, race, drain, settle, live_count
):
    # Given two counted resources and a limit of 2
    service.set_limit(account, 2)
    for rid in ("x", "z"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    # When one DELETE x has made two calls, a second one starts, the first ends, the stream
    # catches up, and the second ends
    first = race.start("DELETE x (1)", lambda: api.delete(account, "x"))
    race.step(first, 2)
    second = race.start("DELETE x (2)", lambda: api.delete(account, "x"))
    race.step(second)
    race.finish(first)
    drain(account)
    race.finish(second)
    # Then one deleted it and the other found it gone; x's slot was released once
    assert first.error is None
    assert isinstance(second.error, NotFound)
    settle(account)
    assert counts(service, account, live_count) == (1, 1, 1)
    assert Healer(service._settings.table_name, service._clients).heal_account(account).reason == (
        "best_effort is not below eventual"
    )


def test_4_a_delete_cut_off_after_its_release_is_finished_and_counted_once(
    api, service, account, race, settle, live_count
):
    # Given two counted resources
    service.set_limit(account, 2)
    for rid in ("x", "z"):
        service.create(account, rid, {}, resource_id=rid)
    settle(account)
    # When DELETE x makes two calls and its process dies at the third (the caller gives up)
    delete = race.start("DELETE x", lambda: api.delete(account, "x"))
    race.step(delete, 2)
    race.step(delete, fault="crash")
    assert isinstance(delete.error, Crash)
    # Then once the system settles x is gone, and both counters agree with what is left
    settle(account)
    with pytest.raises(NotFound):
        service.get(account, "x")
    assert counts(service, account, live_count) == (1, 1, 1)


def test_4_a_delete_retried_after_the_grace_period_whose_first_attempt_had_released_does_not_release_again(
    api, service, settings, clients, account, race, drain, live_count
):
    # Given two counted resources, and DELETE x cut off after its claim and its release, before
    # removing x, while the stream path is stopped (nothing removes x for it)
    service.set_limit(account, 2)
    for rid in ("x", "z"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    delete = race.start("DELETE x", lambda: api.delete(account, "x"))
    race.until(delete, "UpdateItem", count=2)  # claim, release
    race.step(delete, fault="crash")
    assert counts(service, account, live_count) == (1, 1, 2)  # released; x still visible, claimed
    # When the client retries after the grace period: the stale claim is taken over
    later = time.time() + settings.pending_grace_seconds + 1
    retry = ResourceService(
        settings, clients, effects=Effects(clock=lambda: later, waiter=Waiter(attempts=1))
    )
    # Then the takeover saw that the first attempt's release applied (last_release names it) and
    # only removed x: the slot was released once, by the first attempt, so the retry finds
    # nothing left to delete (404: the resource was deleted by then, which a retry accepts)
    with pytest.raises(NotFound):
        retry.delete(account, "x")
    with pytest.raises(NotFound):
        service.get(account, "x")
    assert counts(service, account, live_count) == (1, 1, 1)
    drain(account)
    assert counts(service, account, live_count) == (1, 1, 1)


def test_5_a_put_retried_while_its_first_attempt_is_refused_does_not_answer_200(
    api, service, account, race, settle, live_count
):
    # Given a limit of 1, and PUT x (first attempt) past its limit check with x written
    service.set_limit(account, 1)
    first = race.start("PUT x", lambda: api.create(account, "x", {}, resource_id="x"))
    race.until(first, "PutItem")
    # When another create takes the only slot, the client retries PUT x, and the first attempt ends
    race.run("POST", lambda: api.create(account, "other", {}))
    retry = race.start("PUT x (retry)", lambda: api.create(account, "x", {}, resource_id="x"))
    race.step(retry)
    race.finish(first)
    race.finish(retry)
    # Then neither attempt claims x exists unless it does
    assert isinstance(first.error, LimitExceeded)
    assert retry.error is not None or retry.result[1] is True, "200 'exists' for a resource that is gone"
    if retry.error is None:
        assert service.get(account, "x")
    settle(account)
    assert counts(service, account, live_count) == (1, 1, 1)


def test_6_an_admission_throttled_on_every_attempt_is_a_429_and_leaves_nothing(
    service, clients, account, settle, live_count
):
    # Given a limit of 1 and the account's counter throttled on every admission attempt
    service.set_limit(account, 1)
    outcomes = []
    with injected(
        clients.dynamodb_single_attempt,
        "UpdateItem",
        error="ProvisionedThroughputExceededException",
        times=1000,
    ):
        for n in range(4):
            # When four creates come in
            try:
                service.create(account, f"r{n}", {})
                outcomes.append(201)
            except Throttled:
                outcomes.append(429)
    # Then each was answered with the retryable 429 and nothing was created uncounted
    assert outcomes == [429] * 4
    settle(account)
    assert counts(service, account, live_count) == (0, 0, 0)
    service.create(account, "after the throttling", {})
    assert counts(service, account, live_count)[0] == 1


def test_8_a_refused_create_whose_rollback_cannot_reach_dynamodb_is_still_a_409(api, service, account, race):
    # Given a limit of 1 and a POST past its limit check with its resource written
    service.set_limit(account, 1)
    post = race.start("POST", lambda: api.create(account, "late", {}))
    race.until(post, "PutItem")
    race.run("POST (takes the slot)", lambda: api.create(account, "first", {}))
    race.until(post, "UpdateItem")  # its admission, refused
    # When every attempt of the rollback fails to connect
    while race.next_call(post) == "DeleteItem":
        race.step(post, fault="unsent")
    race.finish(post)
    # Then the caller still gets the 409 the refusal decided
    assert isinstance(post.error, LimitExceeded)


def test_9_the_counter_item_stays_one_write_unit_with_hundreds_of_deletes_in_flight(
    service, settings, clients, account, drain, settle, live_count
):
    # Given 250 resources, counted (more than the 200 tokens the old set could hold)
    service.set_limit(account, 1000)
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(250)]
    drain(account)
    # When all are deleted while the stream is stopped (nothing delivered)
    for rid in ids:
        service.delete(account, rid)
    # Then the counter item is the same size as ever, an admission costs one write unit, and
    # the counts are right at once and after the stream catches up
    item = clients.dynamodb.get_item(
        TableName=settings.table_name, Key=counter_key(account), ConsistentRead=True
    )["Item"]
    assert item_size(item) < 1024
    consumed = clients.dynamodb.update_item(
        TableName=settings.table_name,
        Key=counter_key(account),
        UpdateExpression="ADD probe :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
        ReturnConsumedCapacity="TOTAL",
    )["ConsumedCapacity"]["CapacityUnits"]
    assert consumed == 1.0
    assert counts(service, account, live_count) == (0, 0, 0)
    settle(account)
    assert counts(service, account, live_count) == (0, 0, 0)
    # And a delete retried after the fact uncounts nothing
    with pytest.raises(NotFound):
        service.delete(account, ids[0])
    assert service.usage(account).best_effort == 0


def test_10_delete_then_create_at_the_limit_succeeds_at_once(service, account, drain):
    # Given an account at its limit of 1, counted by both counters
    service.set_limit(account, 1)
    service.create(account, "x", {}, resource_id="x")
    drain(account)
    # When the resource is deleted and another created before the stream sees the delete
    service.delete(account, "x")
    resource, created = service.create(account, "y", {})
    # Then the create is admitted at once, and the account is exactly at its limit
    assert created
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, usage.to_json()["remaining"]) == (1, 0, 0)
    with pytest.raises(LimitExceeded):
        service.create(account, "z", {})
    assert resource.name == "y"


@pytest.mark.parametrize("calls_before_dying", [1, 2])
def test_a_create_that_dies_between_its_writes_never_leaves_a_slot_without_a_resource(
    api, service, account, race, settle, live_count, calls_before_dying
):
    # Given an account that has created resources before (its counter item says it belongs to no
    # organization, so a create reads no profile and registers nothing: its writes are its
    # resource's item and its counter item's)
    service.set_limit(account, 5)
    service.create(account, "earlier", {})
    # And a POST that gets through its first one or two writes and dies at the next call
    post = race.start("POST", lambda: api.create(account, "dies", {}))
    race.until(post, "GetItem")  # the limit check
    assert race.next_call(post) in ("PutItem", "UpdateItem")  # its first write, nothing else first
    race.step(post, calls_before_dying)
    race.step(post, fault="crash")
    # Then at no point does best_effort count a slot no resource holds, now or once settled
    usage = service.usage(account)
    assert usage.best_effort <= live_count(account) + (1 if calls_before_dying == 2 else 0)
    settle(account)
    assert service.usage(account).best_effort <= live_count(account)


@pytest.mark.parametrize("calls_before_dying", [1, 2])
def test_a_delete_that_dies_between_its_writes_never_leaves_a_slot_held_by_a_removed_resource(
    api, service, account, race, drain, settle, live_count, calls_before_dying
):
    # Given two counted resources, and a DELETE that makes one or two calls and dies at the next
    for rid in ("x", "z"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    delete = race.start("DELETE x", lambda: api.delete(account, "x"))
    race.step(delete, calls_before_dying)
    race.step(delete, fault="crash")
    # Then best_effort never counts more than what is visible, and after settling it is exact
    assert service.usage(account).best_effort <= live_count(account)
    settle(account)
    usage = service.usage(account)
    assert usage.best_effort == usage.eventual == live_count(account)
