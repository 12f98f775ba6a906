"""Latency and convergence over HTTP through the local runtime, with an open-loop generator.

Pairs arrive on a fixed schedule (``rate`` per second): a POST at its scheduled time, and a DELETE
of that resource one second later. Each request's latency is measured from its *scheduled* send
time, so a server that falls behind cannot hide its queue (a closed loop would just send less).
For one pair in five, the delete waits until the stream path has counted the resource, and the
time from the create's answer to its count is the convergence lag. Times are of this machine and
its load: the figures to compare are the ones of one run.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from botocore.config import Config
from requests.adapters import HTTPAdapter

from hybrid_counter.keys import resource_key
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.stack.aws_clients import dynamodb_client

CONVERGENCE_EVERY = 5


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "n": 0}
    ordered = sorted(values)

    def q(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 1)

    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "n": len(ordered)}


def _session() -> requests.Session:
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=128)
    session.mount("http://", adapter)
    return session


def _headers(runtime: LocalRuntime, account: str | None) -> dict[str, str]:
    """A tenant's token for ``account``, or the operator's (None), from the local issuer."""
    auth = runtime.auth_description()
    if account is None:
        token = runtime.issuer.mint({}, [auth["operator_scope"]])
    else:
        token = runtime.issuer.mint({auth["account_claim"]: account})
    return {"Authorization": f"Bearer {token}"}


def one_rate(runtime: LocalRuntime, rate: float, seconds: float) -> dict[str, Any]:
    base = runtime.api_url
    account = f"latency-{int(rate)}-{time.time_ns() % 10**9}"
    operator = _session()
    operator.headers.update(_headers(runtime, None))
    limit = operator.put(f"{base}/accounts/{account}/limit", json={"limit": 1_000_000}, timeout=30)
    limit.raise_for_status()
    http = _session()
    http.headers.update(_headers(runtime, account))
    db = dynamodb_client(runtime.dynamodb_url, Config(max_pool_connections=64))
    latencies: dict[str, list[float]] = {"create": [], "delete": []}
    lags: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    start = time.monotonic() + 0.5
    pairs = int(rate * seconds)

    def at(moment: float) -> None:
        time.sleep(max(0.0, moment - time.monotonic()))

    def pair(n: int) -> None:
        scheduled = start + n / rate
        at(scheduled)
        response = http.post(f"{base}/accounts/{account}/resources", json={"name": f"r{n}"}, timeout=60)
        answered = time.monotonic()
        with lock:
            latencies["create"].append((answered - scheduled) * 1000)
            if response.status_code != 201:
                errors.append(response.status_code)
                return
        rid = response.json()["resource_id"]
        if n % CONVERGENCE_EVERY == 0:
            while time.monotonic() - answered < 30:
                item = db.get_item(
                    TableName=runtime.table_name, Key=resource_key(account, rid), ConsistentRead=True
                )
                if item.get("Item", {}).get("counter_processed", {}).get("BOOL"):
                    with lock:
                        lags.append((time.monotonic() - answered) * 1000)
                    break
                time.sleep(0.01)
        delete_at = scheduled + 1.0
        at(delete_at)
        delete = http.delete(f"{base}/accounts/{account}/resources/{rid}", timeout=60)
        with lock:
            latencies["delete"].append((time.monotonic() - delete_at) * 1000)
            if delete.status_code != 204:
                errors.append(delete.status_code)

    with ThreadPoolExecutor(max_workers=min(256, int(rate * 4) + 16)) as pool:
        list(pool.map(pair, range(pairs)))
    runtime.wait_until_idle(120)
    answer = http.get(f"{base}/accounts/{account}/usage", timeout=30)
    answer.raise_for_status()
    usage = answer.json()
    return {
        "pairs_per_second": rate,
        "pairs": pairs,
        "create": _quantiles(latencies["create"]),
        "delete": _quantiles(latencies["delete"]),
        "convergence_lag_ms": _quantiles(lags),
        "unexpected_statuses": errors,
        "settled_usage": {k: usage[k] for k in ("best_effort", "eventual")},
    }


def run(*, quick: bool) -> dict[str, Any]:
    # Rates two shared cores can serve. 20 pairs/s saturated them: its seconds measured the
    # open-loop queue, not the service, and the time it took (15 s of pairs, then the queue) went to
    # the two-kind ladder within the bench's 15 minutes (50 pairs/s: `make bench-local`).
    rates = [5.0, 10.0]
    seconds = 8.0 if quick else 15.0
    options = RuntimeOptions(port=0, stack_name="hybrid-counter-bench-http", start_schedules=False)
    with LocalRuntime(options) as runtime:
        one_rate(runtime, rates[0], 3.0)  # warm-up, not reported: environments started, imports done
        rows = [one_rate(runtime, rate, seconds) for rate in rates]
    header = "| pairs/s | create p50 / p95 / p99 ms | delete p50 / p95 / p99 ms | convergence lag p50 / p99 ms |\n|---|---|---|---|"
    lines = [
        f"| {r['pairs_per_second']:g} | {r['create']['p50']} / {r['create']['p95']} / {r['create']['p99']} "
        f"| {r['delete']['p50']} / {r['delete']['p95']} / {r['delete']['p99']} "
        f"| {r['convergence_lag_ms']['p50']} / {r['convergence_lag_ms']['p99']} |"
        for r in rows
    ]
    return {"rates": rows, "seconds_per_rate": seconds, "table": "\n".join([header, *lines])}
