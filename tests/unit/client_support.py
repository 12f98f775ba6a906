"""What the client's unit tests share: a scripted API behind httpx.MockTransport, and fake time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from hybrid_counter_client import AsyncClient, Client, RetryPolicy

API = "https://api.example"
Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Script:
    """Answers requests in order (a response, an exception to raise, or a function of the
    request), and keeps every request it was sent."""

    def __init__(self, *answers: Answer, then: Answer | None = None) -> None:
        self.answers = list(answers)
        self.then = then  # the answer once the list is spent
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else self.then
        if answer is None:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            answer = answer(request)
        # A copy: httpx binds a response to the client that received it, and answers are reused.
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    @property
    def sent(self) -> list[tuple[str, str]]:
        return [(r.method, r.url.path) for r in self.requests]

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


class FakeTime:
    """A clock that only sleeps move: the waits are recorded, nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def error(status: int, code: str, message: str = "m", headers: dict[str, str] | None = None, **extra: Any):
    return httpx.Response(
        status, json={"error": {"code": code, "message": message, **extra}}, headers=headers
    )


def ok(body: Any = None, status: int = 200) -> httpx.Response:
    return httpx.Response(status) if body is None else httpx.Response(status, json=body)


def client(
    script: Script,
    time: FakeTime | None = None,
    *,
    draw: float = 0.0,
    policy: RetryPolicy | None = None,
    auth: Any = None,
) -> Client:
    time = time or FakeTime()
    return Client(
        API,
        auth=auth,
        retry=policy,
        transport=httpx.MockTransport(script),
        sleep=time.sleep,
        clock=time.clock,
        random=lambda: draw,
    )


def async_client(
    script: Script,
    time: FakeTime | None = None,
    *,
    draw: float = 0.0,
    policy: RetryPolicy | None = None,
    auth: Any = None,
) -> AsyncClient:
    time = time or FakeTime()
    return AsyncClient(
        API,
        auth=auth,
        retry=policy,
        transport=httpx.MockTransport(script),
        sleep=time.async_sleep,
        clock=time.clock,
        random=lambda: draw,
    )


def run[T](coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


RESOURCE = {
    "account_id": "acme",
    "kind": "projects",
    "resource_id": "r-1",
    "name": "web",
    "units": 2,
    "created_at": "2026-11-21T00:00:00.000Z",
    "team": "blue",
}
KIND_USAGE = {"limit": 2, "limit_source": "plan", "best_effort": 1, "eventual": 0, "used": 1, "remaining": 1}
USAGE = {
    "account_id": "acme",
    "plan_id": "gold",
    "limit": 100,
    "best_effort": 3,
    "eventual": 2,
    "used": 3,
    "remaining": 97,
    "kinds": {"projects": KIND_USAGE},
}
WOULD_ADMIT = {"would_admit": False, "kind": "projects", "units": 1, "limit": 2, "used": 2, "remaining": 0}
PLAN = {"plan_id": "gold", "limits": {"projects": 2, "seats": 10}}
ORG = {"org_id": "acme-group", "plan_id": "gold", "members": 2, "created_at": "2026-11-21T00:00:00.000Z"}
ORG_ROOM = {"org_id": "acme-group", "limit": 10, "limit_source": "override", "used": 7, "remaining": 3}
MEMBER_USAGE = {
    **USAGE,
    "org_id": "acme-group",
    "kinds": {"projects": {**KIND_USAGE, "organization": ORG_ROOM}},
}
ORG_KIND_USAGE = {
    "limit": 10,
    "limit_source": "override",
    "best_effort": 7,
    "eventual": 6,
    "used": 7,
    "remaining": 3,
    "top_accounts": [{"account_id": "acme", "used": 4}, {"account_id": "acme-eu", "used": 2}],
}
ORG_USAGE = {"org_id": "acme-group", "plan_id": "gold", "members": 2, "kinds": {"projects": ORG_KIND_USAGE}}
CHANGE = {
    "change_id": "c-1",
    "at": "2026-11-21T00:00:00.000Z",
    "by": "operator-1",
    "what": "override",
    "old": None,
    "new": 5,
    "force": True,
    "account_id": "acme",
    "kind": "projects",
    "plan_id": None,
}
