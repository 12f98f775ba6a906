"""Sending a call: credentials, retries of what is safe to retry, errors turned into exceptions.

What is retried, and why (README, "Retries"; the API's own table of errors):

- `429 TooManyRequests` and `503 ServiceUnavailable` only: the API promises that such a request
  did nothing, or will be finished, so sending it again gets the final answer. Any other status
  is the answer (a 500 or 504 may have done anything; a 409 will not change by itself).
- Connection errors (`httpx.TransportError`, timeouts included) the same way.
- Only calls that are safe to send twice (`Call.retryable`): never a POST that creates, whose
  second arrival would create a second resource. `create(..., retry_safe=True)` sends a PUT
  instead. A confirm is a POST that is (idempotent: `Call.idempotent`).
- Waits honour `Retry-After` (never sooner), else back off exponentially; either is stretched by
  a random part of up to `jitter` of itself, so that clients throttled together do not return
  together. `deadline` bounds the whole call: no wait runs past it, and each attempt's timeout is
  cut to the time left.
- A 401 is sent again once with a fresh token (any method: API Gateway refuses it before the
  service runs). It is not counted as a retry.

The sync and async loops differ only in `send` and `sleep`; the decisions are `Attempts`'.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from hybrid_counter_client._calls import Call
from hybrid_counter_client.auth import AsyncBearerTokens, BearerTokens, SigV4
from hybrid_counter_client.errors import (
    HybridCounterError,
    NotFound,
    UnexpectedResponse,
    error_from_response,
)

log = logging.getLogger("hybrid_counter_client")

RETRYABLE_STATUS = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long and how often one call may be retried.

    `max_attempts`: requests sent for one call (the first included; 1 turns retries off).
    `deadline`: seconds from the first send after which no retry starts.
    `base_delay`/`max_delay`: the exponential backoff without `Retry-After`.
    `jitter`: each wait is stretched by a random fraction of itself in [0, jitter).
    """

    max_attempts: int = 5
    deadline: float = 30.0
    base_delay: float = 0.2
    max_delay: float = 5.0
    jitter: float = 0.25

    def delay(self, retry: int, retry_after: float | None, draw: float) -> float:
        """The wait before retry number `retry` (1: the first); `draw` is uniform in [0, 1)."""
        if retry_after is not None:
            floor = retry_after
        else:
            floor = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return floor * (1 + self.jitter * draw)


class Attempts:
    """One call's retry bookkeeping."""

    def __init__(
        self, policy: RetryPolicy, *, retryable: bool, clock: Callable[[], float], draw: Callable[[], float]
    ) -> None:
        self._policy = policy
        self._retryable = retryable
        self._clock = clock
        self._draw = draw
        self._ends = clock() + policy.deadline
        self.retries = 0

    def timeout(self, per_attempt: float) -> float:
        """An attempt's timeout: the configured one, cut to what is left of the deadline."""
        return max(0.001, min(per_attempt, self._ends - self._clock()))

    def wait(self, retry_after: float | None) -> float | None:
        """Seconds to wait before sending again; None: give up (not safe to send again, attempts
        spent, or the wait would end past the deadline)."""
        if not self._retryable or self.retries + 1 >= self._policy.max_attempts:
            return None
        delay = self._policy.delay(self.retries + 1, retry_after, self._draw())
        if self._clock() + delay >= self._ends:
            return None
        self.retries += 1
        return delay


@dataclass(frozen=True, slots=True)
class Settings:
    """What both loops share: where to send, the per-attempt timeout, the policy, and the
    clock and random source (injected by tests; the sleep is each loop's own)."""

    base_url: str
    headers: Mapping[str, str]
    timeout: float
    policy: RetryPolicy
    clock: Callable[[], float] = time.monotonic
    draw: Callable[[], float] = random.random

    def attempts(self, call: Call[Any]) -> Attempts:
        return Attempts(self.policy, retryable=call.retryable, clock=self.clock, draw=self.draw)

    def request(
        self, http: httpx.Client | httpx.AsyncClient, call: Call[Any], token: str | None, timeout: float
    ) -> httpx.Request:
        headers = dict(self.headers)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return http.build_request(
            call.method,
            self.base_url + call.path,
            params=dict(call.params) or None,
            json=call.body,
            headers=headers,
            timeout=timeout,
        )


def answer[T](call: Call[T], response: httpx.Response) -> T:
    """A 2xx answer read into the call's result; anything else raised as its error."""
    if not response.is_success:
        failure = error_from_response(response)
        if isinstance(failure, NotFound) and call.not_found_hint is not None:
            failure.hint = call.not_found_hint
        raise failure
    try:
        return call.read(response)
    except (ValueError, KeyError, TypeError) as error:
        raise UnexpectedResponse(
            response.status_code, UnexpectedResponse.default_code, f"{call.method} {call.path}: {error}"
        ) from error


def _retrying(call: Call[Any], what: str, wait: float) -> None:
    log.info("hybrid-counter: %s %s: %s; retrying in %.2f s", call.method, call.path, what, wait)


class Sender:
    """The synchronous loop."""

    def __init__(
        self,
        http: httpx.Client,
        settings: Settings,
        auth: BearerTokens | SigV4 | None,
        sleep: Callable[[float], None],
    ) -> None:
        self._http = http
        self._settings = settings
        self._tokens = auth if isinstance(auth, BearerTokens) else None
        self._sigv4 = auth if isinstance(auth, SigV4) else None
        self._sleep = sleep

    def send[T](self, call: Call[T]) -> T:
        attempts = self._settings.attempts(call)
        reauthenticated = False
        while True:
            token = self._tokens.current() if self._tokens is not None else None
            request = self._settings.request(
                self._http, call, token, attempts.timeout(self._settings.timeout)
            )
            try:
                response = self._http.send(request, auth=self._sigv4)
            except httpx.TransportError as error:
                wait = attempts.wait(None)
                if wait is None:
                    raise
                _retrying(call, type(error).__name__, wait)
                self._sleep(wait)
                continue
            if (
                response.status_code == 401
                and self._tokens is not None
                and token is not None
                and not reauthenticated
            ):
                reauthenticated = True
                self._tokens.refresh(token)
                continue
            if response.status_code in RETRYABLE_STATUS:
                failure: HybridCounterError = error_from_response(response)
                wait = attempts.wait(failure.retry_after)
                if wait is None:
                    raise failure
                _retrying(call, str(response.status_code), wait)
                self._sleep(wait)
                continue
            return answer(call, response)


class AsyncSender:
    """The asyncio loop: `Sender`'s, awaiting."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        settings: Settings,
        auth: AsyncBearerTokens | SigV4 | None,
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self._http = http
        self._settings = settings
        self._tokens = auth if isinstance(auth, AsyncBearerTokens) else None
        self._sigv4 = auth if isinstance(auth, SigV4) else None
        self._sleep = sleep

    async def send[T](self, call: Call[T]) -> T:
        attempts = self._settings.attempts(call)
        reauthenticated = False
        while True:
            token = await self._tokens.current() if self._tokens is not None else None
            request = self._settings.request(
                self._http, call, token, attempts.timeout(self._settings.timeout)
            )
            try:
                response = await self._http.send(request, auth=self._sigv4)
            except httpx.TransportError as error:
                wait = attempts.wait(None)
                if wait is None:
                    raise
                _retrying(call, type(error).__name__, wait)
                await self._sleep(wait)
                continue
            if (
                response.status_code == 401
                and self._tokens is not None
                and token is not None
                and not reauthenticated
            ):
                reauthenticated = True
                await self._tokens.refresh(token)
                continue
            if response.status_code in RETRYABLE_STATUS:
                failure: HybridCounterError = error_from_response(response)
                wait = attempts.wait(failure.retry_after)
                if wait is None:
                    raise failure
                _retrying(call, str(response.status_code), wait)
                await self._sleep(wait)
                continue
            return answer(call, response)
