"""Which running stack the end-to-end tests talk to, chosen by HC_E2E_TARGET:

- ``local`` (default): the embedded runtime, started here from template.yaml.
- ``built``: the embedded runtime running the ``sam build`` output on a clean python3.12
  (``make sam-build`` first); ``make test`` runs a representative part of the suite so.
- ``url``: any deployment at HC_API_URL (for example LocalStack's HTTP API URL).
- ``stack``: a CloudFormation stack named HC_STACK_NAME; its outputs give the API URL and queue
  URLs. Works against AWS, and against LocalStack with AWS_ENDPOINT_URL=http://localhost:4566.

Every request carries a token as a client's would (tests/e2e/auth.py; for url/stack from
HC_TOKEN_COMMAND and HC_OPERATOR_TOKEN). Locally, every AWS call of every function is
recorded for the least-privilege check, which runs after the rest of the suite.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import requests
from requests.adapters import HTTPAdapter

from localrun.runtime import LocalRuntime, RuntimeOptions
from tests.e2e.auth import Tokens, local_tokens, tokens_from_environment

AUTO: Any = object()  # Target.call: the headers a permitted caller would send


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "after_suite: runs after the other e2e tests (needs their traffic)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move `after_suite` tests behind the last other e2e test (not behind the whole session)."""
    last = [item for item in items if item.get_closest_marker("after_suite") is not None]
    if not last:
        return
    rest = [item for item in items if item not in last]
    e2e = [index for index, item in enumerate(rest) if item.get_closest_marker("e2e") is not None]
    position = e2e[-1] + 1 if e2e else len(rest)
    items[:] = [*rest[:position], *last, *rest[position:]]


def pooled_session() -> requests.Session:
    """A session with room for the concurrency tests' clients (requests keeps 10 by default)."""
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=64)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@dataclass
class Target:
    api_url: str
    runtime: LocalRuntime | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    http: requests.Session = field(default_factory=pooled_session)
    tokens: Tokens | None = None
    calls_recorded_to: Path | None = None

    def call(
        self, method: str, path: str, body: Any = None, raw: str | bytes | None = None, auth: Any = AUTO
    ) -> requests.Response:
        """`auth`: AUTO (a permitted caller's token), None (no credentials), or headers to send."""
        url = self.api_url.rstrip("/") + path
        headers = dict(self.auth_headers(method, path) if auth is AUTO else auth or {})
        if raw is not None:
            headers["content-type"] = "application/json"
            data = raw.encode() if isinstance(raw, str) else raw
            return self.http.request(method, url, data=data, headers=headers, timeout=30)
        return self.http.request(method, url, json=body, headers=headers, timeout=30)

    def auth_headers(self, method: str, path: str) -> dict[str, str]:
        return {} if self.tokens is None else self.tokens.for_request(method, path)

    def settle(self, timeout: float = 60) -> None:
        """Wait until the asynchronous paths have caught up (local: exactly; remote: by polling)."""
        if self.runtime is not None:
            self.runtime.wait_until_idle(timeout)


def eventually(check: Callable[[], Any], timeout: float = 30, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        else:
            return result
        time.sleep(interval)


def localstack_api_url(aws_url: str, endpoint: str) -> str:
    """https://ID.execute-api.REGION.amazonaws.com -> http://ID.execute-api.localhost.localstack.cloud:4566."""
    api_id = (urlsplit(aws_url).hostname or "").split(".", 1)[0]
    edge = urlsplit(endpoint)
    return f"{edge.scheme}://{api_id}.execute-api.localhost.localstack.cloud:{edge.port or 4566}"


# Package scope: the runtime (DynamoDB Local, moto, warm function environments, stream and queue
# pollers, the sweeper's schedule) stops once the last e2e test is done; a session-scoped one kept
# polling through the rest of `make test`'s process (the integration and unit tests: minutes of
# idle polling competing with them for two cores). No test outside tests/e2e uses it.
@pytest.fixture(scope="package")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    kind = os.environ.get("HC_E2E_TARGET", "local")
    if kind in {"local", "built"}:
        calls = tmp_path_factory.mktemp("aws-calls")
        options = RuntimeOptions(
            port=0,
            stack_name="hybrid-counter-e2e",
            failure_visibility_seconds=0.5,
            # A failing stream batch's retries and bisection (test_operator_tooling.py's outage):
            # shorter pauses than the local default, the same retries
            retry_backoff_seconds=0.05,
            max_retry_backoff_seconds=0.4,
            record_calls_to=calls,
            built=kind == "built",
            # A plan change is seen within 2 s, not the default 60 (test_kinds_plans_units.py).
            parameter_overrides={"PlanCacheSeconds": "2"},
            # The stream function's batches wait 0.1 s for more records, not the template's 1 s
            # (MaximumBatchingWindowInSeconds): the same batching, retries and bisection, but each
            # settle() after a write no longer waits out the window (about a second each, most of
            # the e2e suite's waiting). Batches of many records are built deterministically where
            # they matter (test_localrun_runtime.py and test_failure_paths.py pause the stream).
            stream_batching_window_seconds=0.1,
        )
        with LocalRuntime(options) as runtime:
            tokens = local_tokens(runtime.issuer)
            yield Target(api_url=runtime.api_url, runtime=runtime, tokens=tokens, calls_recorded_to=calls)
    elif kind == "url":
        yield Target(api_url=os.environ["HC_API_URL"], tokens=tokens_from_environment())
    elif kind == "stack":
        cloudformation = boto3.client("cloudformation")
        stack = cloudformation.describe_stacks(StackName=os.environ["HC_STACK_NAME"])["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        api_url = outputs["ApiUrl"]
        if os.environ.get("AWS_ENDPOINT_URL"):  # LocalStack serves HTTP APIs on its own host
            api_url = localstack_api_url(api_url, os.environ["AWS_ENDPOINT_URL"])
        yield Target(api_url=api_url, outputs=outputs, tokens=tokens_from_environment())
    else:
        raise pytest.UsageError(f"HC_E2E_TARGET must be local, built, url or stack, not {kind!r}")


@pytest.fixture
def local_runtime(target: Target) -> LocalRuntime:
    if target.runtime is None:
        pytest.skip("needs the embedded runtime (writes to its table and wraps its functions)")
    return target.runtime
