"""Many clients at once over HTTP: limits hold exactly, nothing is lost, and the system drains."""

from __future__ import annotations

import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Target, eventually

pytestmark = pytest.mark.e2e


def live_ids(target: Target, account: str) -> list[str]:
    ids: list[str] = []
    token = None
    while True:
        query = f"?limit=100&next_token={token}" if token else "?limit=100"
        page = target.call("GET", f"/accounts/{account}/resources{query}").json()
        ids.extend(item["resource_id"] for item in page["items"])
        token = page["next_token"]
        if not token:
            return ids


def assert_drained(target: Target, account: str, expected_live: int | None = None) -> None:
    def drained() -> None:
        live = len(live_ids(target, account))
        usage = target.call("GET", f"/accounts/{account}/usage").json()
        assert usage["eventual"] == live
        assert usage["best_effort"] <= live
        if expected_live is not None:
            assert live == expected_live

    target.settle()
    eventually(drained, timeout=60)


def test_churn_from_many_clients_on_one_account_then_an_exact_limit(target):
    account = f"churn-{uuid.uuid4().hex[:8]}"
    limit = 20
    target.call("PUT", f"/accounts/{account}/limit", {"limit": limit})
    owned: list[str] = []
    lock = threading.Lock()
    outcomes: dict[int, int] = {}
    unexpected: list[tuple[str, int, str]] = []

    def client(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(12):
            with lock:
                victim = owned.pop(rng.randrange(len(owned))) if owned and rng.random() < 0.4 else None
            if victim is not None:
                response = target.call("DELETE", f"/accounts/{account}/resources/{victim}")
            else:
                response = target.call("POST", f"/accounts/{account}/resources", {"name": "churn"})
                if response.status_code == 201:
                    with lock:
                        owned.append(response.json()["resource_id"])
            with lock:
                outcomes[response.status_code] = outcomes.get(response.status_code, 0) + 1
                if response.status_code not in (201, 204, 409):
                    unexpected.append((response.request.method or "", response.status_code, response.text))

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(client, range(16)))
    assert set(outcomes) <= {201, 204, 409}, (outcomes, unexpected)  # nothing else reaches a caller
    assert len(live_ids(target, account)) == len(owned) <= limit
    assert_drained(target, account, expected_live=len(owned))

    # A burst after the churn fills the account exactly to its limit, not one more.
    with ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(
            pool.map(
                lambda n: (
                    target.call("POST", f"/accounts/{account}/resources", {"name": f"b{n}"}).status_code
                ),
                range(30),
            )
        )
    assert statuses.count(201) == limit - len(owned)
    assert_drained(target, account, expected_live=limit)


def test_many_accounts_in_parallel_each_admit_exactly_their_limit(target):
    accounts = [f"multi-{uuid.uuid4().hex[:8]}" for _ in range(6)]
    for n, account in enumerate(accounts):
        target.call("PUT", f"/accounts/{account}/limit", {"limit": 3 + n})
    work = [(account, i) for account in accounts for i in range(15)]
    random.Random(7).shuffle(work)

    def create(item: tuple[str, int]) -> tuple[str, int]:
        account, i = item
        return account, target.call("POST", f"/accounts/{account}/resources", {"name": f"r{i}"}).status_code

    with ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(create, work))
    for n, account in enumerate(accounts):
        admitted = sum(1 for a, status in results if a == account and status == 201)
        assert admitted == 3 + n
    for n, account in enumerate(accounts):
        assert_drained(target, account, expected_live=3 + n)
