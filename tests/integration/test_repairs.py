"""Where a fault, a crash or an operator tool meets a path nobody interleaved (issue 17).

Each test is one sequence a review found, replayed against DynamoDB Local: a repair acting on an
id instead of the incarnation it judged, a PUT after a delete that released its slot, two
recounts fixing the totals twice, an admitted create left pending with its stream record gone,
and an operator whose clock is ten minutes off.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from hybrid_counter.counting.records import ops_from_record
from hybrid_counter.counting.recount import Recounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper, SweepOutcome
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import InProgress
from hybrid_counter.healing import Healer
from hybrid_counter.keys import counter_key, iso_utc, range_of, resource_key
from hybrid_counter.ops import cli
from hybrid_counter.ops.clock import ClockUnknown, ServerClock, calibrate
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from hybrid_counter.resources.repairs import Repairs
from hybrid_counter.resources.table import ResourceTable
from tests.explorer.scheduler import Race
from tests.faults import injected

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def timed(settings, clients, clock):
    return ResourceService(
        settings, clients, effects=Effects(clock=clock, waiter=Waiter(attempts=2, delay=0.01))
    )


def item_of(clients, settings, account: str, rid: str) -> Any:
    return clients.dynamodb.get_item(
        TableName=settings.table_name, Key=resource_key(account, rid), ConsistentRead=True
    ).get("Item")


def counts(service, account: str) -> tuple[int, int]:
    usage = service.usage(account)
    return usage.best_effort, usage.eventual


def recounter_for(settings, clients, counter, service, clock) -> Recounter:
    return Recounter(
        settings.table_name,
        service.counters,
        counter,
        Healer(settings.table_name, clients),
        clients,
        service=service,
        grace_seconds=settings.pending_grace_seconds,
        clock=clock,
        sleep=lambda _: None,
    )


def stuck_delete(timed, clients, account: str, rid: str) -> None:
    """A delete of ``rid`` that claimed it and died before its release."""
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first = race.start(f"DELETE {rid}", lambda: timed.delete(account, rid))
        race.until(first, "UpdateItem")  # the claim
        race.step(first, fault="crash")


# ---- 2. repairs act on the incarnation they judged --------------------------------------------


@pytest.mark.parametrize("repair", ["audit", "recount"])
def test_a_repair_never_deletes_a_resource_created_again_since_it_read_the_stale_claim(
    repair, timed, service, settings, clients, counter, clock, account, drain
):
    # Given x and y counted, and a delete of x that died after its claim
    service.set_limit(account, 2)
    for rid in ("x", "y"):
        service.create(account, rid, {"v": 1}, resource_id=rid)
    drain(account)
    stuck_delete(timed, clients, account, "x")
    clock.now += settings.pending_grace_seconds + 1
    # And a repair that has read the stale claim
    seen = item_of(clients, settings, account, "x")
    assert seen is not None
    assert resource_items.state_of(seen) == "deleting"
    # When, before the repair acts, the client retries its DELETE (taking the claim over and
    # finishing it) and creates x again
    timed.delete(account, "x")
    again, created = timed.create(account, "x2", {}, resource_id="x")
    assert created
    drain(account)
    # and the repair then acts on what it read
    if repair == "audit":
        sweeper = Sweeper(
            settings.table_name,
            counter,
            settings.pending_grace_seconds,
            clients,
            clock=clock,
            deletes=timed,
        )
        outcome = SweepOutcome()
        sweeper._audit_page([seen], iso_utc(clock() - settings.pending_grace_seconds), outcome)
        assert outcome.deletes_finished == 0
    else:
        recounter = recounter_for(settings, clients, counter, timed, clock)
        census = recounter.census(account, range_of("x"))
        census.deleting_items = [seen]
        actions: list[str] = []
        assert recounter._finish(census, None, actions) is False
        assert actions == []
    # Then the new x is untouched and the counters are exact
    assert service.get(account, "x") == again
    drain(account)
    assert counts(service, account) == (2, 2)


def test_the_audit_finishes_a_stale_delete_it_read_exactly_once(
    timed, service, settings, clients, counter, clock, account, drain
):
    # Given a delete of x that died after its claim, older than the grace period
    for rid in ("x", "y"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    stuck_delete(timed, clients, account, "x")
    clock.now += settings.pending_grace_seconds + 1
    seen = item_of(clients, settings, account, "x")
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=clock, deletes=timed
    )
    # When the audit acts on the page it read, twice (a retried run)
    for expected in (1, 0):
        outcome = SweepOutcome()
        sweeper._audit_page([seen], iso_utc(clock() - settings.pending_grace_seconds), outcome)
        assert outcome.deletes_finished == expected
    # Then x is gone and its slot was released once
    assert item_of(clients, settings, account, "x") is None
    drain(account)
    assert counts(service, account) == (1, 1)


# ---- 3. a PUT after a delete that released its slot creates -----------------------------------


def test_a_put_after_a_delete_that_released_but_could_not_remove_creates_again(
    service, settings, clients, account, drain
):
    # Given x, at a limit of 1, deleted with a 204 whose removal of the item failed
    service.set_limit(account, 1)
    original, _ = service.create(account, "x", {"v": 1}, resource_id="x")
    drain(account)
    with injected(clients.dynamodb, "DeleteItem", when="before", times=20):
        service.delete(account, "x")
    assert resource_items.state_of(item_of(clients, settings, account, "x")) == "deleting"
    assert counts(service, account) == (0, 0)
    # When the same PUT is sent again
    again, created = service.create(account, "x", {"v": 1}, resource_id="x")
    # Then it creates x anew (201): the deleted resource no longer exists for callers
    assert created
    assert again.created_at >= original.created_at
    drain(account)
    assert counts(service, account) == (1, 1)
    assert service.get(account, "x") == again


def test_a_put_after_such_a_delete_answers_503_until_it_can_tell_and_never_exists(
    service, timed, settings, clients, account, drain
):
    # Given x deleted with its removal failed, and then another delete's release overwrote the
    # record of x's, so nothing on the counter item says x's release applied
    service.create(account, "x", {}, resource_id="x")
    service.create(account, "y", {}, resource_id="y")
    with injected(clients.dynamodb, "DeleteItem", when="before", times=20):
        service.delete(account, "x")
    service.delete(account, "y")
    # When a PUT of x comes before the stream path removed the item
    with pytest.raises(InProgress):
        timed.create(account, "x", {}, resource_id="x")
    # Then it never answered "exists"; once the stream path has removed the item, it creates
    drain(account)
    _, created = timed.create(account, "x", {}, resource_id="x")
    assert created
    drain(account)
    assert counts(service, account) == (1, 1)


# ---- 4. two recounts at once fix the totals once ----------------------------------------------


def test_two_recounts_at_once_fix_corrupted_totals_once(service, settings, clients, counter, account, drain):
    # Given three counted resources, and eventual's total corrupted to 4 (its shares sum to 3)
    for n in range(3):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    drain(account)
    clients.dynamodb.update_item(
        TableName=settings.table_name,
        Key=counter_key(account),
        UpdateExpression="SET eventual = :four",
        ExpressionAttributeValues={":four": {"N": "4"}},
    )
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first, second = (recounter_for(settings, clients, counter, service, time.time) for _ in range(2))
        # When both read the totals before either fixes them
        a = race.start("recount A", lambda: first.recount(account, fix=True))
        b = race.start("recount B", lambda: second.recount(account, fix=True))
        race.until(a, "GetItem", count=2)
        race.until(b, "GetItem", count=2)
        race.finish(a)
        race.finish(b)
        assert a.error is None
        assert b.error is None
    # Then the total was lowered once, and it is the sum of its shares again
    state = service.counters.read(account)
    assert state.eventual == 3
    assert state.totals_mismatch() == (0, 0)


# ---- 5. an admitted create left pending is finished, whatever was lost -------------------------


def admitted_then_died(service, clients, settings, account: str, rid: str) -> None:
    """A PUT whose admission applied and whose process died before making the item live."""
    api = ResourceService(settings, clients)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        put = race.start(f"PUT {rid}", lambda: api.create(account, rid, {}, resource_id=rid))
        # its admission: the first UpdateItem after its put (a kind's first create registers the
        # kind on the account's profile, an UpdateItem too, before it puts anything)
        race.until(put, "PutItem")
        race.until(put, "UpdateItem")
        race.step(put, fault="crash")


def test_the_audit_rolls_back_an_admitted_create_left_pending_with_its_records_gone(
    service, settings, clients, counter, stream, account, drain
):
    # Given x live and counted, and PUT y admitted then dead before y went live
    service.create(account, "x", {}, resource_id="x")
    drain(account)
    admitted_then_died(service, clients, settings, account, "y")
    assert counts(service, account) == (2, 1)
    # And the stream records of y's admission are gone (trimmed after 24 hours)
    stream.records_for(account)
    # When the audit runs after the grace period
    later = time.time() + settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    )
    sweeper.request_audit("records trimmed")
    audit = sweeper.audit()
    # Then y is rolled back and its slot released: the counters count what exists
    assert audit.pending_rolled_back >= 1
    assert item_of(clients, settings, account, "y") is None
    assert counts(service, account) == (1, 1)
    drain(account)
    assert counts(service, account) == (1, 1)


def test_the_audit_releases_nothing_for_a_pending_create_that_was_never_admitted(
    service, settings, clients, counter, stream, account, drain
):
    # Given x counted, and a pending y whose admission never applied (a refused create whose
    # rollback failed): it holds no slot
    service.create(account, "x", {}, resource_id="x")
    drain(account)
    clients.dynamodb.put_item(
        TableName=settings.table_name,
        Item=resource_items.pending_item(account, "y", "y", {}, "0123456789abcdef", now=time.time()),
    )
    stream.records_for(account)
    later = time.time() + settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    )
    sweeper.request_audit("records trimmed")
    sweeper.audit()
    # Then y is gone and x's slot is still counted
    assert item_of(clients, settings, account, "y") is None
    assert counts(service, account) == (1, 1)


def ttl_removal(record: dict[str, Any]) -> dict[str, Any]:
    """The REMOVE record of an item TTL deleted: the same, with the service's identity."""
    return {**record, "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}}


def test_a_ttl_removal_of_an_admitted_pending_item_releases_its_slot(
    service, settings, clients, counter, stream, account, drain
):
    # Given PUT y admitted then dead, its admission's records gone
    admitted_then_died(service, clients, settings, account, "y")
    stream.records_for(account)
    assert counts(service, account) == (1, 0)
    # When TTL removes the pending item (15 days later) and the stream path sees it
    clients.dynamodb.delete_item(TableName=settings.table_name, Key=resource_key(account, "y"))
    records = [ttl_removal(r) for r in stream.records_for(account) if r["eventName"] == "REMOVE"]
    assert [type(op).__name__ for op in ops_from_record(records[0])] == ["CensusOp"]
    assert process_stream_batch(records, counter).failed_sequence_numbers == []
    # Then the sweeper's next pass takes the census it asked for, and the slot is free
    later = time.time() + settings.pending_grace_seconds + 1
    sweep = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    ).sweep()
    assert sweep.ranges_recounted >= 1
    assert counts(service, account) == (0, 0)


def test_a_rollback_of_a_refused_create_asks_for_no_census(settings, clients, stream, account):
    # A refused create's rollback removes a pending item that never held a slot: not TTL's
    clients.dynamodb.put_item(
        TableName=settings.table_name,
        Item=resource_items.pending_item(account, "z", "z", {}, "fedcba9876543210", now=time.time()),
    )
    ResourceTable(settings.table_name, clients, Effects()).roll_back(account, "z", "fedcba9876543210")
    removes = [r for r in stream.records_for(account) if r["eventName"] == "REMOVE"]
    assert removes
    assert all(ops_from_record(r) == [] for r in removes)


# ---- 7. operator clocks ------------------------------------------------------------------------


def ops_components(settings, clients, clock: ServerClock):
    """The domain's components as `hybrid-counter-ops` builds them for a recount."""
    target = cli.Target(settings.table_name, {}, clients, None, settings.pending_grace_seconds)
    return cli._parts(target, clock)


def test_an_operator_clock_ten_minutes_fast_does_not_take_over_a_running_delete(
    timed, service, settings, clients, account, drain
):
    # Given a delete of x that claimed it just now (still running, as far as anyone can tell)
    for rid in ("x", "y"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    stuck_delete(timed, clients, account, "x")
    fast = lambda: time.time() + 600  # noqa: E731 - the operator's machine, ten minutes fast
    # When an operator runs recount --fix, the staleness judged by DynamoDB's clock
    clock = calibrate(clients.dynamodb, settings.table_name, local=fast)
    assert abs(clock() - time.time()) < 3
    report = ops_components(settings, clients, clock).recounter.recount(account, fix=True)
    # Then the delete is left to its request: still claimed, its slot still held
    assert not any("finished the delete" in action for action in report.actions)
    assert resource_items.state_of(item_of(clients, settings, account, "x")) == "deleting"
    assert counts(service, account) == (2, 2)
    # (where the machine's own clock would have taken it over)
    naive = Repairs.on(
        settings.table_name, clients, service.counters, settings.pending_grace_seconds, Effects(clock=fast)
    )
    assert naive.stale(item_of(clients, settings, account, "x"), "deleting_since")


def test_an_operator_clock_ten_minutes_slow_still_finishes_a_stale_delete(
    service, settings, clients, account, drain
):
    # Given a delete of x that died after its claim six minutes ago (grace: five)
    for rid in ("x", "y"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    then = ResourceService(settings, clients, effects=Effects(clock=lambda: time.time() - 360))
    stuck_delete(then, clients, account, "x")
    slow = lambda: time.time() - 600  # noqa: E731
    # When the operator (ten minutes slow) runs recount --fix
    clock = calibrate(clients.dynamodb, settings.table_name, local=slow)
    report = ops_components(settings, clients, clock).recounter.recount(account, fix=True)
    # Then the dead delete is finished once
    assert "finished the delete of x" in report.actions
    assert item_of(clients, settings, account, "x") is None
    drain(account)
    assert counts(service, account) == (1, 1)


def test_without_a_server_date_the_operator_tool_refuses_to_judge(clients, settings):
    class Undated:
        def get_item(self, **_: Any) -> dict[str, Any]:
            return {"ResponseMetadata": {"HTTPHeaders": {}}}

    with pytest.raises(ClockUnknown):
        calibrate(Undated(), settings.table_name)  # type: ignore[arg-type]
    target = cli.Target(settings.table_name, {}, clients, None)
    target.clients = type(clients)(
        dynamodb=Undated(), dynamodb_single_attempt=clients.dynamodb_single_attempt
    )
    with pytest.raises(SystemExit, match="refusing to judge what is stale"):
        cli._server_clock(target)
