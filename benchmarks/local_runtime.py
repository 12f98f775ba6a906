"""What the embedded local runtime costs: `make bench-local` (= python -m benchmarks.local_runtime).

Three measurements, each in its own started runtime on DynamoDB Local and moto:

* ``load``: an open-loop generator sends create+delete pairs at a fixed rate (default 50
  pairs/s for 20 s): every request has a scheduled send time fixed in advance, and its
  latency is measured from that time, so a slow server cannot slow the generator down and
  hide its own queueing (no coordinated omission). Each pair is a POST create and, half a
  period later, a DELETE of the resource created half a second earlier. The first second is
  also reported on its own: it shows what a burst right after start waits for.
* ``overhead``: sequential requests through the HTTP front door; per request the runtime's
  own time (gateway and hand-off to the execution environment, both ways) is the server-side
  time minus the handler's Duration as the environment measured it, and the client-side
  latency is compared with calling the same handler directly in this process.
* ``init``: the init phase (interpreter start and handler import) of each function, spawned
  cold several times.

Latency figures depend on the machine and on what else runs on it; compare figures from
the same run. Results go to bench-results/local_runtime.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from localrun.runtime import LocalRuntime, RuntimeOptions

QUIET_FUNCTIONS = {"LogLevel": "WARNING"}  # function logs would flood the terminal at 100 req/s


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (p99 of 1000 values is the 990th smallest)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, round(fraction * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def summary(latencies_ms: list[float]) -> dict[str, float]:
    return {
        "count": len(latencies_ms),
        "p50_ms": round(percentile(latencies_ms, 0.50), 1),
        "p90_ms": round(percentile(latencies_ms, 0.90), 1),
        "p99_ms": round(percentile(latencies_ms, 0.99), 1),
        "max_ms": round(max(latencies_ms, default=float("nan")), 1),
    }


class Connections:
    """One keep-alive HTTP connection per client thread, as a pooled HTTP client keeps them."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self._local = threading.local()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if payload is not None else {}
        for attempt in range(2):
            connection = getattr(self._local, "connection", None)
            if connection is None:
                connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
                self._local.connection = connection
            try:
                connection.request(method, self.prefix + path, body=payload, headers=headers)
                response = connection.getresponse()
                return response.status, response.read()
            except (ConnectionError, http.client.HTTPException):
                connection.close()
                self._local.connection = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


# -- load: open loop ------------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # create | delete
    scheduled: float
    sent: float = 0.0
    done: float = 0.0
    status: int = 0

    @property
    def latency_ms(self) -> float:
        return (self.done - self.scheduled) * 1000


@dataclass
class LoadResult:
    rate: float
    duration: float
    outcomes: list[Outcome] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        start = min(outcome.scheduled for outcome in self.outcomes)
        result: dict[str, Any] = {"pairs_per_second": self.rate, "seconds": self.duration}
        for kind in ("create", "delete"):
            mine = [outcome for outcome in self.outcomes if outcome.kind == kind]
            ok = {"create": 201, "delete": 204}[kind]
            result[kind] = {
                **summary([outcome.latency_ms for outcome in mine]),
                "first_second": summary([o.latency_ms for o in mine if o.scheduled - start < 1.0]),
                "errors": sum(1 for outcome in mine if outcome.status != ok),
                "statuses": sorted({outcome.status for outcome in mine}),
            }
        lags = [(outcome.sent - outcome.scheduled) * 1000 for outcome in self.outcomes]
        result["generator_send_lag_p99_ms"] = round(percentile(lags, 0.99), 1)
        return result


def run_load(runtime: LocalRuntime, rate: float, duration: float, accounts: int = 10) -> LoadResult:
    client = Connections(runtime.api_url)
    names = [f"bench-{uuid.uuid4().hex[:8]}-{n}" for n in range(accounts)]
    for name in names:
        assert client.request("PUT", f"/accounts/{name}/limit", {"limit": 100_000})[0] == 200
    lag = max(1, round(rate / 2))  # a delete removes the resource created half a second earlier
    pairs = round(rate * duration)
    created: dict[int, Future[str | None]] = {}

    def create(index: int) -> str | None:
        status, body = client.request(
            "POST", f"/accounts/{names[index % accounts]}/resources", {"name": f"r{index}"}
        )
        return str(json.loads(body)["resource_id"]) if status == 201 else None

    # Resources for the first deletes (not measured).
    with ThreadPoolExecutor(8) as pool:
        for index in range(-lag, 0):
            created[index] = pool.submit(create, index)
        for future in list(created.values()):
            future.result()

    result = LoadResult(rate, duration)
    lock = threading.Lock()
    period = 1.0 / rate
    start = time.monotonic() + 0.2

    def timed(outcome: Outcome, action: Callable[[], tuple[int, Any]]) -> Any:
        outcome.sent = time.monotonic()
        status, value = action()
        outcome.done = time.monotonic()
        outcome.status = status
        with lock:
            result.outcomes.append(outcome)
        return value

    def create_pair(index: int, outcome: Outcome) -> str | None:
        def send() -> tuple[int, str | None]:
            status, body = client.request(
                "POST", f"/accounts/{names[index % accounts]}/resources", {"name": f"r{index}"}
            )
            return status, str(json.loads(body)["resource_id"]) if status == 201 else None

        value: str | None = timed(outcome, send)
        return value

    def delete_pair(index: int, outcome: Outcome) -> None:
        target = index - lag

        def send() -> tuple[int, None]:
            resource_id = created[target].result()  # waits if that create is late: counted
            if resource_id is None:
                return 0, None
            account = names[target % accounts]
            return client.request("DELETE", f"/accounts/{account}/resources/{resource_id}")[0], None

        timed(outcome, send)

    # Open loop: enough threads that a slow answer never delays the next scheduled send.
    with ThreadPoolExecutor(max_workers=256) as pool:
        for index in range(pairs):
            create_at = start + index * period
            delete_at = create_at + period / 2
            for kind, at in (("create", create_at), ("delete", delete_at)):
                pause = at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                outcome = Outcome(kind, at)
                if kind == "create":
                    created[index] = pool.submit(create_pair, index, outcome)
                else:
                    pool.submit(delete_pair, index, outcome)
    return result


# -- the command ----------------------------------------------------------------------------------


def bench_options(**overrides: Any) -> RuntimeOptions:
    options = RuntimeOptions(
        port=0,
        stack_name=f"hc-bench-{uuid.uuid4().hex[:6]}",
        parameter_overrides=dict(QUIET_FUNCTIONS),
        start_schedules=False,
        extra_environment={"POWERTOOLS_METRICS_DISABLED": "true"},
    )
    for name, value in overrides.items():
        setattr(options, name, value)
    return options


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", nargs="*", default=["load"], choices=["load"])
    parser.add_argument("--rate", type=float, default=50.0, help="create+delete pairs per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("bench-results/local_runtime.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {}
    if "load" in args.what:
        with LocalRuntime(bench_options()) as runtime:
            results["load"] = run_load(runtime, args.rate, args.seconds).report()
            runtime.wait_until_idle(120)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
