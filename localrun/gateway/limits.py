"""API Gateway HTTP API limits in front of the integrations: throttling and the integration timeout.

Throttling follows API Gateway's token bucket: each route has a bucket holding up to its
burst limit, refilled at its rate limit per second, that one request empties by one token;
a request finding it empty is refused with `429 {"message":"Too Many Requests"}` and never
reaches the function. A route's limits come from the HttpApi event's `RouteSettings`, then
the API's `RouteSettings` for its route key, then `DefaultRouteSettings`, field by field; a
route with none of them is limited only by the account-level bucket that every route also
draws from (10,000 requests per second, burst 5,000: AWS's default quota per Region).

The integration timeout is the route's `TimeoutInMillis` (30 s by default, the HTTP API
maximum): when the function has not answered by then, the client gets
`503 {"message":"Service Unavailable"}` while the invocation runs on, as on AWS, where the
function keeps running until its own Timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from localrun.stack.template import INTEGRATION_TIMEOUT_MS, HttpApiEvent, Template, Throttle

log = logging.getLogger("localrun.http")

THROTTLED_BODY = b'{"message":"Too Many Requests"}'
TIMED_OUT_BODY = b'{"message":"Service Unavailable"}'
ACCOUNT_THROTTLE = Throttle(burst_limit=5_000, rate_limit=10_000.0)
_MAX_PENDING_INTEGRATIONS = 512  # threads waiting on functions; beyond it requests queue (and may time out)


class IntegrationTimeoutError(Exception):
    """The function did not answer within the route's integration timeout."""


class TokenBucket:
    """`burst` tokens at most, `rate` added per second; thread-safe."""

    def __init__(self, burst: int, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.rate = rate
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


@dataclass(frozen=True)
class RouteLimit:
    route_key: str
    throttle: Throttle | None  # the route's own target, None = account level only
    timeout_ms: int = INTEGRATION_TIMEOUT_MS


def route_limit(template: Template, event: HttpApiEvent) -> RouteLimit:
    """The route's throttle (event RouteSettings over the API's RouteSettings over its defaults)."""
    api = template.http_apis.get(event.api) if event.api is not None else None
    throttle = event.route_settings
    if api is not None:
        for fallback in (api.route_settings.get(event.route_key), api.default_route_settings):
            if fallback is not None:
                throttle = fallback if throttle is None else throttle.over(fallback)
    return RouteLimit(event.route_key, throttle, event.timeout_ms)


class HttpLimits:
    def __init__(self, routes: Iterable[RouteLimit], clock: Callable[[], float] = time.monotonic) -> None:
        self._timeouts = {route.route_key: route.timeout_ms / 1000 for route in routes}
        self._buckets = {
            route.route_key: _bucket(route.throttle.over(ACCOUNT_THROTTLE), clock)
            for route in routes
            if route.throttle is not None
        }
        self._account = _bucket(ACCOUNT_THROTTLE, clock)
        self._pool = ThreadPoolExecutor(_MAX_PENDING_INTEGRATIONS, thread_name_prefix="localrun-integration")

    def admit(self, route_key: str) -> bool:
        """Take a token for the route (and the account); False = throttle the request."""
        bucket = self._buckets.get(route_key)
        if bucket is not None and not bucket.take():
            return False
        return self._account.take()

    def call(self, route_key: str, integration: Callable[[], Any]) -> Any:
        """Run the integration; raise IntegrationTimeoutError past the route's timeout (it runs on)."""
        future = self._pool.submit(integration)
        try:
            return future.result(timeout=self._timeouts.get(route_key, INTEGRATION_TIMEOUT_MS / 1000))
        except FutureTimeout:
            future.add_done_callback(_log_late_failure)
            raise IntegrationTimeoutError(route_key) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _bucket(throttle: Throttle, clock: Callable[[], float]) -> TokenBucket:
    assert throttle.burst_limit is not None
    assert throttle.rate_limit is not None
    return TokenBucket(throttle.burst_limit, throttle.rate_limit, clock)


def _log_late_failure(future: Any) -> None:
    error = future.exception()
    if error is not None:
        log.warning("an integration that had timed out failed later: %s", error)
