"""What the embedded local runtime costs: `make bench-local` (= python -m benchmarks.local_runtime).

Three measurements, each in its own started runtime on DynamoDB Local and moto:

* ``load``: an open-loop generator, in a process of its own, sends create+delete pairs at a
  fixed rate (default 50 pairs/s for 20 s): every request has a send time fixed in advance
  and its latency is measured from that time, so a slow server cannot slow the generator
  down and hide its own queueing (no coordinated omission). Each pair is a POST create and,
  half a period later, a DELETE of the resource created half a second earlier. The first
  second, right after start, is also reported on its own.
* ``overhead``: sequential creates and deletes through the HTTP front door, alternating with
  the same requests made by calling the API handler directly in this process. Per request,
  what the runtime adds is the client-side latency minus the handler's Duration as its
  execution environment measured it (front door and hand-off, both ways, plus the client's
  own HTTP work); the hand-off alone is `invoke()`'s time minus that Duration.
* ``init``: the init phase of each function (process start to ready, and the handler
  module's import as the environment measured it), started cold three times, from the
  source tree and from the build.

Latency figures depend on the machine and on what else runs on it; compare figures from
the same run. Results go to bench-results/local_runtime.json.
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from localrun.functions.invoke import new_context
from localrun.gateway.payload import HttpRequest, build_event, new_request_id
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
        "p50_ms": round(percentile(latencies_ms, 0.50), 2),
        "p90_ms": round(percentile(latencies_ms, 0.90), 2),
        "p99_ms": round(percentile(latencies_ms, 0.99), 2),
        "max_ms": round(max(latencies_ms, default=float("nan")), 2),
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


def run_load(api_url: str, rate: float, duration: float, accounts: int = 10) -> LoadResult:
    client = Connections(api_url)
    names = [f"bench-{uuid.uuid4().hex[:8]}-{n}" for n in range(accounts)]
    for name in names:
        assert client.request("PUT", f"/accounts/{name}/limit", {"limit": 100_000})[0] == 200
    lag = max(1, round(rate / 2))  # a delete removes the resource created half a second earlier
    pairs = round(rate * duration)
    created: dict[int, Future[str | None]] = {}

    def post(index: int) -> tuple[int, str | None]:
        status, body = client.request(
            "POST", f"/accounts/{names[index % accounts]}/resources", {"name": f"r{index}"}
        )
        return status, str(json.loads(body)["resource_id"]) if status == 201 else None

    # Resources for the first deletes (not measured).
    with ThreadPoolExecutor(8) as pool:
        for index in range(-lag, 0):
            created[index] = pool.submit(lambda i: post(i)[1], index)
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
        value: str | None = timed(outcome, lambda: post(index))
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

    # Open loop: sends follow the schedule, not the answers. Should all threads be busy (an
    # overloaded server), a send starts late, and its latency still counts from its scheduled
    # time; the report gives the generator's own lag.
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


def load_from_another_process(api_url: str, rate: float, seconds: float) -> dict[str, Any]:
    """The generator gets its own interpreter: its threads must not compete for the runtime's GIL."""
    command = ["generate", "--url", api_url, "--rate", str(rate), "--seconds", str(seconds)]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.local_runtime", *command],
        capture_output=True,
        text=True,
        timeout=seconds * 20 + 120,
        check=True,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


# -- overhead: sequential, against calling the handler directly -----------------------------------


class DirectHandler:
    """The API function's handler imported into this process, with its function's environment."""

    def __init__(self, runtime: LocalRuntime) -> None:
        spec = runtime.template.functions["ApiFunction"]
        self.spec = spec
        self.identity = runtime.resources.functions["ApiFunction"]
        accessor = getattr(runtime, "function_environment", None)  # older runtimes set os.environ
        if accessor is not None:
            os.environ.update({k: v for k, v in accessor("ApiFunction").items() if k not in {"PATH", "TZ"}})
        sys.path.insert(0, str(spec.code_uri))
        module = importlib.import_module(spec.handler_module)
        self.handler = getattr(module, spec.handler_function)
        self.api_id = runtime.resources.http_api_ids.get("HttpApi", "localapi00")

    def call(self, method: str, path: str, route_key: str, parameters: dict[str, str], body: Any) -> Any:
        request = HttpRequest(
            method=method,
            target=path,
            headers=[("content-type", "application/json"), ("host", "127.0.0.1")],
            body=b"" if body is None else json.dumps(body).encode(),
            source_ip="127.0.0.1",
        )
        event = build_event(
            request,
            route_key=route_key,
            path_parameters=parameters,
            api_id=self.api_id,
            stage="$default",
            request_id=new_request_id(),
        )
        context = new_context(self.identity, self.spec.memory_size, self.spec.timeout)
        return self.handler(event, context)


@dataclass
class Samples:
    http: list[float] = field(default_factory=list)  # client-side latency through the front door
    direct: list[float] = field(default_factory=list)  # the handler called in this process
    duration: list[float] = field(default_factory=list)  # the handler's Duration in its environment
    added: list[float] = field(default_factory=list)  # http - duration: what the runtime adds
    handoff: list[float] = field(default_factory=list)  # invoke() - duration: the hand-off alone

    def report(self) -> dict[str, Any]:
        def p(values: list[float], q: float) -> float:
            return round(percentile(values, q), 2)

        entry: dict[str, Any] = {
            "http_p50_ms": p(self.http, 0.5),
            "direct_call_p50_ms": p(self.direct, 0.5),
            "http_minus_direct_p50_ms": round(p(self.http, 0.5) - p(self.direct, 0.5), 2),
        }
        if self.added:
            entry["handler_duration_p50_ms"] = p(self.duration, 0.5)
            entry["runtime_added_ms"] = {
                "p50": p(self.added, 0.5),
                "p90": p(self.added, 0.9),
                "p99": p(self.added, 0.99),
            }
            entry["handoff_only_ms"] = {"p50": p(self.handoff, 0.5), "p99": p(self.handoff, 0.99)}
        return entry


CREATE_ROUTE = "POST /accounts/{account_id}/resources"
DELETE_ROUTE = "DELETE /accounts/{account_id}/resources/{resource_id}"


def measure_overhead(runtime: LocalRuntime, pairs: int = 150) -> dict[str, Any]:
    client = Connections(runtime.api_url)
    direct = DirectHandler(runtime)
    account = f"overhead-{uuid.uuid4().hex[:8]}"
    assert client.request("PUT", f"/accounts/{account}/limit", {"limit": 100_000})[0] == 200
    reports = getattr(runtime.function("ApiFunction"), "reports", None)  # older runtimes report none
    samples = {"create": Samples(), "delete": Samples()}

    def through_http(kind: str, method: str, path: str, body: Any = None) -> bytes:
        started = time.perf_counter()
        status, answer = client.request(method, path, body)
        elapsed = (time.perf_counter() - started) * 1000
        assert status in {201, 204}, (status, answer)
        samples[kind].http.append(elapsed)
        if reports:
            report = reports[-1]
            samples[kind].duration.append(report.duration_ms)
            samples[kind].added.append(elapsed - report.duration_ms)
            samples[kind].handoff.append(report.total_ms - report.duration_ms)
        return answer

    def directly(kind: str, path: str, route: str, parameters: dict[str, str], body: Any = None) -> Any:
        started = time.perf_counter()
        answer = direct.call(route.split(maxsplit=1)[0], path, route, parameters, body)
        samples[kind].direct.append((time.perf_counter() - started) * 1000)
        assert answer["statusCode"] in {201, 204}, answer
        return answer

    collection = f"/accounts/{account}/resources"
    for index in range(pairs + 10):
        if index == 10:  # the first pairs warm both paths up
            samples = {"create": Samples(), "delete": Samples()}
        created = json.loads(through_http("create", "POST", collection, {"name": "o"}))
        through_http("delete", "DELETE", f"{collection}/{created['resource_id']}")
        answer = directly("create", collection, CREATE_ROUTE, {"account_id": account}, {"name": "o"})
        resource_id = json.loads(answer["body"])["resource_id"]
        parameters = {"account_id": account, "resource_id": resource_id}
        directly("delete", f"{collection}/{resource_id}", DELETE_ROUTE, parameters)
    return {"pairs": pairs, **{kind: values.report() for kind, values in samples.items()}}


NOOP_TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Resources:
  Api:
    Type: AWS::Serverless::HttpApi
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: code/
      Handler: noop.handler
      Runtime: python3.12
      Events:
        Create: {Type: HttpApi, Properties: {ApiId: !Ref Api, Method: POST, Path: "/accounts/{account_id}/resources"}}
"""

# Answers what a create answers, without doing anything: what remains is the runtime's own time.
NOOP_HANDLER = """\
import json

BODY = json.dumps({"account_id": "a", "resource_id": "0" * 36, "name": "o", "created_at": "2026-01-01T00:00:00.000Z"})


def handler(event, context):
    return {"statusCode": 201, "headers": {"Content-Type": "application/json"}, "body": BODY}
"""


def measure_noop_overhead(requests: int = 1000) -> dict[str, Any]:
    """Front door and hand-off around a handler that does nothing: the runtime's own time per request."""
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "template.yaml").write_text(NOOP_TEMPLATE)
        (Path(root) / "code").mkdir()
        (Path(root) / "code" / "noop.py").write_text(NOOP_HANDLER)
        options = bench_options(template_path=Path(root) / "template.yaml", warm_http_environments=1)
        options.parameter_overrides = {}
        with LocalRuntime(options) as runtime:
            client = Connections(runtime.api_url)
            latencies: list[float] = []
            for index in range(requests + 100):  # the first 100 warm up
                started = time.perf_counter()
                status, _ = client.request("POST", "/accounts/a/resources", {"name": "o"})
                assert status == 201
                if index >= 100:
                    latencies.append((time.perf_counter() - started) * 1000)
            reports = list(getattr(runtime.function("Fn"), "reports", []))[100:]
    result: dict[str, Any] = {"requests": requests, "http_ms": summary(latencies)}
    if reports:
        result["handoff_only_ms"] = summary([report.total_ms - report.duration_ms for report in reports])
    return result


# -- init ------------------------------------------------------------------------------------------


def measure_init(built: bool, samples: int = 3) -> dict[str, Any]:
    options = bench_options(
        start_stream_pollers=False, start_queue_pollers=False, warm_http_environments=0, built=built
    )
    result: dict[str, Any] = {}
    with LocalRuntime(options) as runtime:
        for logical_id in runtime.template.functions:
            invoker = runtime.function(logical_id)
            for count in range(1, samples + 1):
                invoker.warm(count)  # one more cold environment, started alone
            reports = list(invoker.init_reports)
            result[logical_id] = {
                "ready_after_ms_p50": round(percentile([r.wall_ms for r in reports], 0.5)),
                "init_duration_ms_p50": round(percentile([r.init_ms for r in reports], 0.5)),
                "samples": len(reports),
            }
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


def conditions() -> dict[str, Any]:
    with open("/proc/loadavg") as loadavg:
        load = loadavg.read().split()[:3]
    return {"cpus": os.cpu_count(), "load_average_1_5_15": load, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "what",
        nargs="*",
        default=["init", "overhead", "load"],
        choices=["init", "overhead", "load", "generate"],
    )
    parser.add_argument("--rate", type=float, default=50.0, help="create+delete pairs per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pairs", type=int, default=150, help="sequential pairs for the overhead")
    parser.add_argument("--url", help="generate: the API to load")
    parser.add_argument("--out", type=Path, default=Path("bench-results/local_runtime.json"))
    args = parser.parse_args()
    if args.what == ["generate"]:
        print(json.dumps(run_load(args.url, args.rate, args.seconds).report()))
        return
    results: dict[str, Any] = {"conditions_at_start": conditions()}
    if "init" in args.what:
        results["init_source"] = measure_init(built=False)
        results["init_built"] = measure_init(built=True)
    if "overhead" in args.what:
        results["overhead_noop_handler"] = measure_noop_overhead()
        with LocalRuntime(bench_options()) as runtime:
            results["overhead"] = measure_overhead(runtime, args.pairs)
    if "load" in args.what:
        with LocalRuntime(bench_options()) as runtime:
            results["load"] = load_from_another_process(runtime.api_url, args.rate, args.seconds)
            runtime.wait_until_idle(300)
    results["conditions_at_end"] = conditions()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
