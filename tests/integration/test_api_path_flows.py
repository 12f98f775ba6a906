"""The API path against DynamoDB Local: limits, idempotency, and the best-effort counter's rules."""

from __future__ import annotations

import boto3
import pytest

from hybrid_counter.api.app import build_app
from hybrid_counter.counter_item import CounterState
from hybrid_counter.errors import LimitExceeded, NotFound, ValidationError
from hybrid_counter.keys import resource_key
from tests.conftest import load_event
from tests.faults import clear, inject, injected

pytestmark = pytest.mark.integration


def test_limit_walkthrough(service, account, drain):
    # Given a limit of 3
    service.set_limit(account, 3)
    # When 3 resources are created
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(3)]
    # Then best-effort shows them at once, the 4th is refused, and eventual catches up
    assert service.usage(account).best_effort == 3
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "fourth", {})
    assert (refused.value.limit, refused.value.used) == (3, 3)
    drain(account)
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (3, 3)
    # When one is deleted, a repeated delete is NotFound
    service.delete(account, ids[0])
    with pytest.raises(NotFound):
        service.delete(account, ids[0])
    assert service.usage(account).best_effort == 2
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, usage.used, usage.limit) == (2, 2, 2, 3)
    # Then a create succeeds again
    service.create(account, "again", {})
    assert service.usage(account).best_effort == 3


def test_rejected_create_leaves_nothing_behind(service, account, clients, settings, drain):
    service.set_limit(account, 0)
    with pytest.raises(LimitExceeded):
        service.create(account, "nope", {}, resource_id="r-rejected")
    item = clients.dynamodb.get_item(
        TableName=settings.table_name, Key=resource_key(account, "r-rejected"), ConsistentRead=True
    )
    assert "Item" not in item
    assert service.list(account).items == []


def test_put_with_same_id_is_idempotent_and_counted_once(service, account, drain):
    first, created = service.create(account, "a", {"k": 1}, resource_id="fixed")
    again, created_again = service.create(account, "a", {"k": 1}, resource_id="fixed")
    assert (created, created_again) == (True, False)
    assert again == first
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (1, 1)


def test_put_of_an_existing_id_succeeds_even_when_the_account_is_at_its_limit(service, account):
    service.set_limit(account, 1)
    service.create(account, "a", {}, resource_id="only")
    _, created = service.create(account, "a", {}, resource_id="only")
    assert created is False


def test_recreating_an_id_still_being_deleted_is_a_validation_error(service, account, drain):
    service.create(account, "a", {}, resource_id="busy")
    service.delete(account, "busy")
    with pytest.raises(ValidationError):
        service.create(account, "a", {}, resource_id="busy")
    drain(account)
    _, created = service.create(account, "a", {}, resource_id="busy")
    assert created is True
    drain(account)
    assert service.usage(account).eventual == 1


def test_retried_delete_after_a_crash_uncounts_once(service, account):
    # Given a delete that decremented best-effort and died before the soft delete
    resource, _ = service.create(account, "a", {})
    service.create(account, "b", {})
    item = service._get_item(account, resource.resource_id)
    service.counters.uncount(account, f"{resource.resource_id}#{item['incarnation']['S']}")
    assert service.usage(account).best_effort == 1
    # When the client retries the delete
    service.delete(account, resource.resource_id)
    # Then best-effort was decremented once in all
    assert service.usage(account).best_effort == 1


def test_lost_response_of_the_admission_does_not_count_twice(service, account, clients, drain):
    # Given the best-effort increment reaches DynamoDB but its response is lost (a read timeout)
    fault = inject(clients.dynamodb_single_attempt, "UpdateItem", when="after")
    try:
        # When a resource is created
        resource, created = service.create(account, "a", {})
    finally:
        clear(clients.dynamodb_single_attempt, fault)
    # Then the caller gets the resource, the increment was applied exactly once (no blind retry)
    assert created is True
    assert fault.fired == 1
    assert service.usage(account).best_effort == 1
    drain(account)
    assert service.usage(account).eventual == 1
    assert service.get(account, resource.resource_id) == resource


def test_admission_that_never_reached_dynamodb_leaves_best_effort_undercounting(
    service, account, clients, drain, sweeper_now
):
    fault = inject(clients.dynamodb_single_attempt, "UpdateItem", when="before")
    try:
        service.create(account, "a", {})
    finally:
        clear(clients.dynamodb_single_attempt, fault)
    assert service.usage(account).best_effort == 0  # undercount: allowed, never overcount
    drain(account)
    assert service.usage(account).eventual == 0  # no admission record reached the stream
    sweeper_now.sweep(older_than_seconds=0)
    assert service.usage(account).eventual == 1  # the table itself held the pending work


def test_throttled_admission_is_retried_because_nothing_was_written(service, account, clients):
    fault = inject(clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=2)
    try:
        service.create(account, "a", {})
    finally:
        clear(clients.dynamodb_single_attempt, fault)
    assert fault.fired == 2
    assert service.usage(account).best_effort == 1


def test_best_effort_never_goes_negative(service, account, clients, settings, set_counter):
    resource, _ = service.create(account, "a", {})
    # A drifted counter at 0 (for example after failures) stays at 0 on delete.
    set_counter(account, best_effort=0)
    service.delete(account, resource.resource_id)
    assert service.usage(account).best_effort == 0


def test_list_is_paginated_and_hides_deleted(service, account):
    for n in range(7):
        service.create(account, f"r{n}", {}, resource_id=f"id-{n}")
    service.delete(account, "id-3")
    seen: list[str] = []
    token = None
    while True:
        page = service.list(account, page_size=3, next_token=token)
        seen.extend(r.resource_id for r in page.items)
        token = page.next_token
        if token is None:
            break
    assert sorted(seen) == [f"id-{n}" for n in range(7) if n != 3]


def test_eventual_counter_covers_a_drifted_best_effort(
    service, account, clients, settings, drain, set_counter
):
    # Given 3 counted resources and a best-effort counter that drifted down to 0 after failures
    service.set_limit(account, 3)
    for n in range(3):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=0)
    # When another create comes in, the limit is judged on max(best_effort, eventual)
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "over", {})
    assert refused.value.used == 3
    assert len(service.list(account).items) == 3


def test_admission_rechecks_eventual_inside_the_conditional_write(
    service, account, clients, settings, drain, set_counter
):
    # Given the pre-check saw room, but the eventual counter reached the limit before the admission
    service.set_limit(account, 2)
    for n in range(2):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=0)
    stale = CounterState(best_effort=0, eventual=0, limit=2)
    # When the admission is attempted with that stale view
    admission = service.counters.admit(account, "x#y", stale)
    # Then the conditional write itself refuses it
    assert admission.outcome == "rejected"
    assert service.usage(account).best_effort == 0


def test_store_errors_on_reads_become_503_with_the_error_body(service, account, clients):
    event = load_event("api_get_usage.json")
    path = f"/accounts/{account}/usage"
    event.update(rawPath=path, pathParameters={"account_id": account})
    event["requestContext"]["http"]["path"] = path
    app = build_app(lambda: service)
    with injected(clients.dynamodb, "GetItem", error="ProvisionedThroughputExceededException", times=10):
        response = app.resolve(event, None)  # type: ignore[arg-type]
    assert response["statusCode"] == 503
    assert '"code": "ServiceUnavailable"' in response["body"]


def test_failed_rollback_leaves_a_resource_the_sweeper_counts_once(
    service, account, clients, settings, sweeper_now, drain
):
    # Given a create that passes the pre-check, loses the admission race to another create,
    # and whose rollback delete cannot reach DynamoDB
    service.set_limit(account, 1)
    other = boto3.client("dynamodb", endpoint_url=clients.dynamodb.meta.endpoint_url)

    def another_create_wins(**_):
        clients.dynamodb.meta.events.unregister("before-call.dynamodb.PutItem", another_create_wins)
        other.update_item(
            TableName=settings.table_name,
            Key={"pk": {"S": f"ACCOUNT#{account}"}, "sk": {"S": "COUNTER"}},
            UpdateExpression="SET best_effort = :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )

    clients.dynamodb.meta.events.register("before-call.dynamodb.PutItem", another_create_wins)
    with (
        injected(clients.dynamodb, "DeleteItem", error="ProvisionedThroughputExceededException", times=10),
        pytest.raises(LimitExceeded),
    ):
        service.create(account, "refused", {}, resource_id="orphan")
    # Then the resource is still there, uncounted; the sweeper counts it, once
    drain(account)
    assert service.usage(account).eventual == 0
    sweeper_now.sweep(older_than_seconds=0)
    sweeper_now.sweep(older_than_seconds=0)
    assert service.usage(account).eventual == 1
    assert service.get(account, "orphan").resource_id == "orphan"
