"""Healing the best-effort counter and the operator's recount, including under concurrent traffic."""

from __future__ import annotations

import contextlib
import threading

import pytest

from hybrid_counter.errors import LimitExceeded, NotFound
from hybrid_counter.healing import Healer
from hybrid_counter.ops.recount import Recounter
from tests.faults import injected

pytestmark = pytest.mark.integration


@pytest.fixture
def healer(settings, clients):
    return Healer(settings.table_name, clients)


@pytest.fixture
def recounter(settings, clients, counter, healer):
    return Recounter(settings.table_name, counter, healer, clients)


def test_heal_raises_a_drifted_best_effort_to_eventual(service, account, drain, healer, clients, sweeper_now):
    # Given best-effort lost two admissions (responses that never reached DynamoDB)
    with injected(clients.dynamodb_single_attempt, "UpdateItem", when="before", times=2):
        service.create(account, "a", {})
        service.create(account, "b", {})
    service.create(account, "c", {})
    drain(account)
    before = service.usage(account)
    assert (before.best_effort, before.eventual) == (1, 1)
    sweeper_now.sweep(older_than_seconds=0)  # the two unadmitted resources are found in the table
    assert service.usage(account).eventual == 3
    # When the healer runs
    outcome = healer.heal_account(account)
    # Then best-effort is back to the truth
    assert outcome.healed
    assert service.usage(account).best_effort == 3


def test_heal_waits_while_a_delete_is_in_flight(
    service, account, drain, healer, clients, settings, set_counter
):
    # Given three counted resources, one soft-deleted but not yet hard-deleted by the stream
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(3)]
    drain(account)
    service.delete(account, ids[0])
    set_counter(account, best_effort=0)  # drifted low
    # When the healer runs now, it must not count the deleted resource into best-effort
    outcome = healer.heal_account(account)
    assert not outcome.healed
    assert outcome.reason == "deletes are in flight"
    # Once the stream has hard-deleted it, healing brings best-effort to the 2 live resources
    drain(account)
    assert healer.heal_account(account).healed
    assert service.usage(account).best_effort == 2


def test_heal_after_a_delete_at_zero_still_waits_for_the_hard_delete(
    service, account, drain, healer, clients, settings, set_counter
):
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(2)]
    drain(account)
    set_counter(account, best_effort=0)
    service.delete(account, ids[0])  # best-effort already 0: nothing to decrement, token recorded
    assert not healer.heal_account(account).healed
    drain(account)
    assert healer.heal_account(account).healed
    assert service.usage(account).best_effort == 1


def test_heal_loses_the_race_to_a_concurrent_admission_instead_of_overcounting(
    service, account, drain, healer, clients, settings, set_counter
):
    for n in range(3):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=1)
    # A create lands between the healer's read and its write.
    raced: list[object] = []

    def race(**_):
        if not raced:
            raced.append(service.create(account, "racer", {}))

    clients.dynamodb.meta.events.register("before-call.dynamodb.UpdateItem", race)
    try:
        outcome = healer.heal_account(account)
    finally:
        clients.dynamodb.meta.events.unregister("before-call.dynamodb.UpdateItem", race)
    assert raced
    assert not outcome.healed
    assert service.usage(account).best_effort == 2  # the admission, not the heal, won


def test_heal_all_finds_accounts_through_the_counter_index(
    service, new_account, drain, healer, clients, settings, set_counter
):
    accounts = [new_account() for _ in range(3)]
    for account in accounts:
        service.create(account, "a", {})
        drain(account)
        set_counter(account, best_effort=0)
    healed = {o.account_id for o in healer.heal_all() if o.healed}
    assert set(accounts) <= healed
    assert all(service.usage(a).best_effort == 1 for a in accounts)


def test_heal_under_concurrent_traffic_never_overcounts(service, account, drain, healer, live_count):
    service.set_limit(account, 1000)
    stop = threading.Event()
    created: list[str] = []

    def traffic():
        n = 0
        while not stop.is_set():
            created.append(service.create(account, f"t{n}", {})[0].resource_id)
            if n % 2:
                with contextlib.suppress(NotFound):
                    service.delete(account, created.pop(0))
            n += 1

    def stream():
        while not stop.is_set():
            drain(account, settle=False)

    workers = [threading.Thread(target=traffic), threading.Thread(target=stream)]
    for worker in workers:
        worker.start()
    try:
        for _ in range(40):
            healer.heal_account(account)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    drain(account)
    usage = service.usage(account)
    live = live_count(account)
    assert usage.best_effort <= live
    assert usage.eventual == live


def test_recount_dry_run_reports_drift_and_fix_repairs_it(
    service, account, drain, recounter, clients, settings, set_counter
):
    for n in range(4):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, eventual=9, best_effort=1)  # corrupted
    report = recounter.recount(account, fix=False)
    assert (report.eventual_drift, report.census.live, report.census.counted) == (5, 4, 4)
    assert service.usage(account).eventual == 9  # a dry run writes nothing
    fixed = recounter.recount(account, fix=True)
    assert (fixed.eventual, fixed.best_effort) == (4, 4)
    assert any("eventual 9 -> 4" in action for action in fixed.actions)


def test_recount_lowers_an_overcounting_best_effort(
    service, account, drain, recounter, clients, settings, set_counter
):
    for n in range(2):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=7)
    fixed = recounter.recount(account, fix=True)
    assert fixed.best_effort == 2
    service.set_limit(account, 2)
    with pytest.raises(LimitExceeded):
        service.create(account, "over", {})


def test_recount_finishes_pending_work_when_the_stream_records_are_gone(
    service, account, recounter, clients, settings
):
    # Given creates and a delete whose stream records were never processed (and are trimmed)
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(3)]
    service.delete(account, ids[0])
    assert service.usage(account).eventual == 0
    # When the operator recounts, finishing pending work found in the table itself
    fixed = recounter.recount(account, fix=True, finish_pending_older_than=0)
    # Then the account is exact again
    assert (fixed.eventual, fixed.best_effort, fixed.census.live) == (2, 2, 2)
    assert fixed.census.waiting_to_be_counted == fixed.census.waiting_for_hard_delete == 0


def test_recount_under_concurrent_stream_counting_is_exact(
    service, account, drain, recounter, clients, settings, set_counter
):
    service.set_limit(account, 1000)
    for n in range(60):
        service.create(account, f"r{n}", {})
    set_counter(account, eventual=500)  # corrupt before counting starts
    done = threading.Event()

    def stream():
        drain(account)
        done.set()

    worker = threading.Thread(target=stream)
    worker.start()
    while not done.is_set():
        recounter.recount(account, fix=True)
    worker.join()
    final = recounter.recount(account, fix=True)
    assert final.eventual == final.census.counted == 60


def test_full_uncounting_set_falls_back_to_a_plain_decrement_and_fences_healing(
    service, account, drain, healer, monkeypatch, live_count, set_counter
):
    # Given a stream backlog long enough to fill the token set (cap lowered to 1 for the test)
    monkeypatch.setattr("hybrid_counter.counter_item.UNCOUNTING_CAP", 1)
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(3)]
    drain(account)
    service.delete(account, ids[0])  # takes the only token slot
    # When another delete comes while the set is full
    service.delete(account, ids[1])
    # Then best-effort is still decremented (never overcounts) and healing is fenced off
    assert service.usage(account).best_effort == 1 == live_count(account)
    drain(account)
    assert service.usage(account).eventual == 1
    set_counter(account, best_effort=0)  # drifted low: healing would now raise it...
    outcome = healer.heal_account(account)
    assert not outcome.healed  # ...but an untokened delete happened, so it waits out the fence
    assert outcome.reason == "a delete bypassed the token set recently"
