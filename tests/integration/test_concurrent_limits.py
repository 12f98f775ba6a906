"""Limits hold exactly under concurrent creates, with no transaction on the API path."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from hybrid_counter.errors import LimitExceeded

pytestmark = pytest.mark.integration


def create_many(service, account, count, workers=20):
    barrier = threading.Barrier(min(count, workers))

    def one(n):
        if n < workers:
            barrier.wait()
        try:
            return service.create(account, f"r{n}", {})[0].resource_id
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
