"""Limits hold exactly under concurrent creates, with no transaction on the API path."""

from __future__ import annotations

import contextlib
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from hybrid_counter.errors import LimitExceeded

pytestmark = pytest.mark.integration


def create_many(service, account, count, workers=20, **kind_and_units):
    barrier = threading.Barrier(min(count, workers))

    def one(n):
        if n < workers:
            barrier.wait()
        try:
            return service.create(account, f"r{n}", {}, **kind_and_units)[0].resource_id
        except LimitExceeded:
            return None

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, range(count)))


def test_40_concurrent_creates_against_limit_10_admit_exactly_10(service, account, drain, live_count):
    service.set_limit(account, 10)
    results = create_many(service, account, 40)
    admitted = [r for r in results if r is not None]
    assert len(admitted) == 10
    assert service.usage(account).best_effort == 10
    drain(account)
    usage = service.usage(account)
    assert live_count(account) == 10
    assert usage.eventual == 10
    assert usage.best_effort <= usage.eventual


def test_exact_limit_while_the_stream_counts_concurrently(service, account, drain, live_count):
    # The eventual counter moving during the race must not cause false rejections.
    service.set_limit(account, 15)
    stop = threading.Event()

    def stream_worker():
        while not stop.is_set():
            drain(account, settle=False)

    worker = threading.Thread(target=stream_worker)
    worker.start()
    try:
        results = create_many(service, account, 60)
    finally:
        stop.set()
        worker.join()
    assert sum(r is not None for r in results) == 15
    drain(account)
    assert live_count(account) == 15
    assert service.usage(account).eventual == 15


def test_parallel_creates_and_deletes_across_accounts_drain_to_the_truth(
    service, new_account, drain, live_count
):
    accounts = [new_account() for _ in range(4)]
    for account in accounts:
        service.set_limit(account, 12)

    def churn(account):
        made = []
        for n in range(20):
            with contextlib.suppress(LimitExceeded):
                made.append(service.create(account, f"r{n}", {})[0].resource_id)
            if n % 3 == 2 and made:
                service.delete(account, made.pop(0))
        return account

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(churn, accounts * 2))
    for account in accounts:
        drain(account)
        usage = service.usage(account)
        live = live_count(account)
        assert live <= 12
        assert usage.eventual == live
        assert usage.best_effort <= live


def on_plan(service, account, limits):
    plan_id = f"plan-{uuid.uuid4().hex[:12]}"
    service.put_plan(plan_id, limits)
    service.assign_plan(account, plan_id)


def test_40_concurrent_1_unit_creates_of_a_kind_against_its_plans_10_admit_exactly_10(
    service, account, drain, live_count
):
    # Given an account on a plan of 10 projects (judged by the plan: no override on the item)
    on_plan(service, account, {"projects": 10})
    # When 40 creates of 1 unit race
    results = create_many(service, account, 40, kind="projects", units=1)
    # Then exactly 10 are admitted, and both counters say 10 once the stream has counted
    assert sum(r is not None for r in results) == 10
    drain(account)
    projects = service.usage(account).kinds["projects"]
    assert (projects.best_effort, projects.eventual, projects.limit_source) == (10, 10, "plan")
    assert live_count(account) == 10


def test_10_concurrent_3_unit_creates_against_20_units_admit_exactly_6(service, account, drain):
    # Given 20 seat units on the account's plan
    on_plan(service, account, {"seats": 20})
    # When 10 creates of 3 units race
    results = create_many(service, account, 10, kind="seats", units=3)
    # Then exactly floor(20 / 3) = 6 are admitted: 18 units, counted so by both counters
    assert sum(r is not None for r in results) == 6
    drain(account)
    seats = service.usage(account).kinds["seats"]
    assert (seats.best_effort, seats.eventual) == (18, 18)
