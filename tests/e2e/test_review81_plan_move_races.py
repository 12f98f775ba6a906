"""Review 81: an account's plan moves (up and down, forced and not) racing creates, grows, holds,
deletes and overrides over HTTP; after each step, the live units against the limit the last
change left (design.md §5.5: an unforced move is judged in its own write, and from its answer
every environment judges by the new plan)."""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.e2e.conftest import Target
from tests.e2e.test_org_hostile_findings import SEATS, new_id, ok

pytestmark = pytest.mark.e2e

STATUS: Counter[int] = Counter()
LOCK = threading.Lock()


def call(target: Target, method: str, path: str, body: Any = None) -> Any:
    response = target.call(method, path, body)
    with LOCK:
        STATUS[response.status_code] += 1
    # (503 InProgress: two requests on one resource at once; retry: documented)
    retryable = response.status_code == 503 and method in ("PATCH", "DELETE") and "retry" in response.text
    assert response.status_code < 500 or retryable, (method, path, response.status_code, response.text)
    return response


def live(target: Target, account: str) -> list[dict[str, Any]]:
    return ok(call(target, "GET", f"/accounts/{account}/kinds/{SEATS}/resources?limit=100"))["items"]


# One seed in make test (about 30 s here); review 81 ran 1, 2 and 3 (2,535 requests, no 5xx):
# HC_E2E_MOVE_RACE_SEEDS=1,2,3
SEEDS = [int(seed) for seed in os.environ.get("HC_E2E_MOVE_RACE_SEEDS", "1").split(",")]


@pytest.mark.parametrize("seed", SEEDS)
def test_moves_racing_creates_grows_holds_deletes_and_overrides_never_leave_units_past_the_limit(
    target: Target, seed: int
) -> None:
    rng = random.Random(seed)
    plans = {new_id("big"): 12, new_id("mid"): 6, new_id("small"): 3, new_id("tiny"): 1}
    for plan, seats in plans.items():
        ok(call(target, "PUT", f"/plans/{plan}", {"limits": {SEATS: seats, "projects": seats}}))
    names = list(plans)
    account = new_id("acct")
    ok(call(target, "PUT", f"/accounts/{account}/plan", {"plan_id": names[0]}))
    base = f"/accounts/{account}/kinds/{SEATS}/resources"
    ids: list[str] = []
    override: int | None = None
    current = names[0]
    log: list[Any] = []

    def op(n: int) -> None:
        choice = rng.random()
        if choice < 0.45 or not ids:
            hold = "?hold_seconds=300" if rng.random() < 0.3 else ""
            r = call(target, "POST", base + hold, {"name": f"r{n}", "units": rng.choice([1, 1, 2])})
            if r.status_code == 201:
                with LOCK:
                    ids.append(r.json()["resource_id"])
        elif choice < 0.75:
            rid = rng.choice(ids)
            call(target, "PATCH", f"{base}/{rid}", {"units": rng.choice([1, 2, 3])})
        else:
            rid = rng.choice(ids)
            if call(target, "DELETE", f"{base}/{rid}").status_code in (204, 404):
                with LOCK:
                    if rid in ids:
                        ids.remove(rid)

    with ThreadPoolExecutor(max_workers=12) as pool:
        for step in range(40):
            # warm every environment's cache of the account's profile
            list(pool.map(lambda _: call(target, "GET", f"/accounts/{account}/usage"), range(8)))
            what = rng.random()
            force = rng.random() < 0.1
            futures = [pool.submit(op, step * 100 + n) for n in range(10)]
            kind: tuple[str, str | int | None, bool, int]
            if what < 0.85:
                plan = rng.choice([p for p in names if p != current])
                answer = call(target, "PUT", f"/accounts/{account}/plan", {"plan_id": plan, "force": force})
                kind = ("move", plan, force, answer.status_code)
                if answer.status_code == 200:
                    current = plan
            elif what < 0.92 or override is None:
                limit = rng.choice([2, 4, 8])
                answer = call(
                    target, "PUT", f"/accounts/{account}/limits/{SEATS}", {"limit": limit, "force": force}
                )
                kind = ("override", limit, force, answer.status_code)
                if answer.status_code == 200:
                    override = limit
            else:
                suffix = "?force=true" if force else ""
                answer = call(target, "DELETE", f"/accounts/{account}/limits/{SEATS}{suffix}")
                kind = ("unoverride", None, force, answer.status_code)
                if answer.status_code == 204:
                    override = None
            for future in futures:
                future.result()
            target.settle()
            items = live(target, account)
            units = sum(item["units"] for item in items)
            usage = ok(call(target, "GET", f"/accounts/{account}/usage"))["kinds"][SEATS]
            limit = override if override is not None else plans[current]
            log.append((step, kind, units, usage["used"], usage["limit"], usage["limit_source"]))
            assert usage["limit"] == limit, log
            assert usage["used"] == units, log
            if not kind[2] and kind[3] in (200, 204) and (kind[0] != "move" or override is None):
                # an unforced change answered: nothing past the limit it left
                assert units <= limit, log
    for entry in log:
        print(entry)
    print("STATUS", dict(STATUS))
