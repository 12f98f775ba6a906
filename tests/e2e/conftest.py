"""Which running stack the end-to-end tests talk to, chosen by HC_E2E_TARGET:

- ``local`` (default): the embedded runtime, started here from template.yaml.
- ``built``: the embedded runtime running the ``sam build`` output on a clean python3.12
  (``make sam-build`` first); ``make test`` runs a representative part of the suite so.
- ``url``: any deployment at HC_API_URL (for example LocalStack's HTTP API URL).
- ``stack``: a CloudFormation stack named HC_STACK_NAME; its outputs give the API URL and queue
  URLs. Works against AWS, and against LocalStack with AWS_ENDPOINT_URL=http://localhost:4566.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import requests
from requests.adapters import HTTPAdapter

from localrun.runtime import LocalRuntime, RuntimeOptions


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

    def call(self, method: str, path: str, body: Any = None, raw: str | None = None) -> requests.Response:
        url = self.api_url.rstrip("/") + path
        if raw is not None:
            headers = {"content-type": "application/json"}
            return self.http.request(method, url, data=raw.encode(), headers=headers, timeout=30)
        return self.http.request(method, url, json=body, timeout=30)

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


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    kind = os.environ.get("HC_E2E_TARGET", "local")
    if kind in {"local", "built"}:
        options = RuntimeOptions(
            port=0, stack_name="hybrid-counter-e2e", failure_visibility_seconds=0.5, built=kind == "built"
        )
        with LocalRuntime(options) as runtime:
            yield Target(api_url=runtime.api_url, runtime=runtime)
    elif kind == "url":
        yield Target(api_url=os.environ["HC_API_URL"])
    elif kind == "stack":
        cloudformation = boto3.client("cloudformation")
        stack = cloudformation.describe_stacks(StackName=os.environ["HC_STACK_NAME"])["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        api_url = outputs["ApiUrl"]
        if os.environ.get("AWS_ENDPOINT_URL"):  # LocalStack serves HTTP APIs on its own host
            api_url = localstack_api_url(api_url, os.environ["AWS_ENDPOINT_URL"])
        yield Target(api_url=api_url, outputs=outputs)
    else:
        raise pytest.UsageError(f"HC_E2E_TARGET must be local, built, url or stack, not {kind!r}")


@pytest.fixture
def local_runtime(target: Target) -> LocalRuntime:
    if target.runtime is None:
        pytest.skip("needs the embedded runtime (writes to its table and wraps its functions)")
    return target.runtime
