"""Fault injection through real boto3 clients (botocore's event hooks), not by replacing domain code.

``inject(client, "UpdateItem", when="after")`` lets the request reach DynamoDB and then makes the
client see a read timeout, as when a response is lost: the write took effect, the caller cannot
know. ``when="before"`` fails before anything is sent. ``lost`` says what the client sees instead of
the response: "timeout" (a read timeout; before sending, a connect timeout), "ssl" (TLS failed while
the response was read: botocore's SSLError), "closed" (the connection dropped: ConnectionClosedError)
or "proxy" (the proxy's connection dropped after it forwarded the request: botocore then raises
ProxyConnectionError). Each is what botocore raises for that failure (tests/integration/
test_lost_responses.py shows the ssl and proxy ones against real sockets). ``error`` may also be a
DynamoDB error code ("ThrottlingException", "TransactionConflictException", ...), answered without
sending.
``when="crash"`` stands for the caller's process dying at that call, before it is sent: it raises
``ProcessDied``, a BaseException, so no ``except Exception`` of the domain runs (as when a Lambda
is killed); whatever the flow wrote before stays as it was.
``fail(request, ...)`` is the same fault applied to one request (the interleaving scheduler's).
"""

from __future__ import annotations

import io
import json
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.client import RemoteDisconnected
from typing import Any

import urllib3
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    ProxyConnectionError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.exceptions import ProtocolError, ProxyError

from hybrid_counter.keys import RESOURCE_PREFIX

_http = urllib3.PoolManager(maxsize=16)
# Every fault that fired in this process, by (operation, kind): reported by the reliability runs.
FIRED: Counter[tuple[str, str]] = Counter()
_fired_lock = threading.Lock()


def target_of(request: Any) -> str:
    """The DynamoDB operation of a prepared request ("UpdateItem", ...)."""
    target = request.headers.get("X-Amz-Target", b"")
    target = target.decode() if isinstance(target, bytes) else str(target)
    return target.rpartition(".")[2]


def at_an_organization(body: dict[str, Any]) -> bool:
    """A request (its JSON body) on an item of an organization's partition: a ``where`` filter."""
    return str(body.get("Key", {}).get("pk", {}).get("S", "")).startswith("ORG#")


def on_a_resource(body: dict[str, Any]) -> bool:
    """A request (its JSON body) on a resource's item: a ``where`` filter."""
    return str(body.get("Key", {}).get("sk", {}).get("S", "")).startswith(RESOURCE_PREFIX)


def forward(request: Any) -> int:
    """Send the request ourselves (it takes effect); the caller never sees the response."""
    headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
    return int(_http.request("POST", request.url, body=request.body, headers=headers).status)


LOST = ("timeout", "ssl", "closed", "proxy")


def lost_as(request: Any, lost: str, *, sent: bool) -> Exception:
    """The exception botocore raises when ``request``'s response is lost so (``sent``: after the
    request went out), built the way botocore/httpsession.py wraps urllib3's."""
    url = request.url
    if lost == "timeout":
        return ReadTimeoutError(endpoint_url=url) if sent else ConnectTimeoutError(endpoint_url=url)
    if lost == "ssl":
        reason = "DECRYPTION_FAILED_OR_BAD_RECORD_MAC] decryption failed or bad record mac"
        if not sent:
            reason = "WRONG_VERSION_NUMBER] wrong version number"  # the handshake itself failed
        tls = urllib3.exceptions.SSLError(ssl.SSLError(1, f"[SSL: {reason}"))
        return SSLError(endpoint_url=url, error=tls)
    dropped = RemoteDisconnected("Remote end closed connection without response")
    if lost == "closed":
        return ConnectionClosedError(
            endpoint_url=url, request=request, error=ProtocolError("Connection aborted.", dropped)
        )
    if lost == "proxy":
        return ProxyConnectionError(
            proxy_url="http://proxy.invalid:3128", error=ProxyError("Unable to connect to proxy", dropped)
        )
    raise ValueError(f"lost must be one of {LOST}, not {lost!r}")


class ProcessDied(BaseException):
    """The caller's process died at this call (``when="crash"``): nothing after it runs."""


def fail(request: Any, when: str = "after", error: str | None = None, lost: str = "timeout") -> AWSResponse:
    """Answer ``request`` with a fault (or raise the exception that stands for a lost response)."""
    if when == "crash":
        raise ProcessDied(target_of(request))
    if error == "TransactionCanceledException":
        actions = len(json.loads(request.body or b"{}").get("TransactItems", []))
        reasons = [{"Code": "None"}] * actions
        reasons[-1] = {"Code": "TransactionConflict", "Message": "injected conflict"}
        body = {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "message": "Transaction cancelled (injected)",
            "CancellationReasons": reasons,
        }
        return _response(request.url, json.dumps(body).encode())
    if error is not None:
        body = {"__type": f"com.amazonaws.dynamodb.v20120810#{error}", "message": "injected"}
        return _response(request.url, json.dumps(body).encode())
    if when == "before":
        raise lost_as(request, lost, sent=False)
    forward(request)
    raise lost_as(request, lost, sent=True)


@dataclass
class Fault:
    operation: str
    when: str = "after"  # "after": applied then lost; "before": never sent; "crash": the process dies
    error: str | None = None  # DynamoDB error code answered instead of sending
    lost: str = "timeout"  # what the client sees instead of the response: one of LOST
    times: int = 1
    skip: int = 0  # matching calls let through before the first fault
    # Only requests whose (JSON) body this accepts match; None: every request of the operation.
    where: Callable[[dict[str, Any]], bool] | None = None
    fired: int = 0
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.lost not in LOST:
            raise ValueError(f"lost must be one of {LOST}, not {self.lost!r}")

    def _take(self) -> bool:
        with self.lock:
            self.calls += 1
            if self.calls <= self.skip or self.fired >= self.times:
                return False
            self.fired += 1
        with _fired_lock:
            FIRED[(self.operation, self.kind)] += 1
        return True

    @property
    def kind(self) -> str:
        if self.error:
            return self.error
        if self.when == "crash":
            return "crash"
        kind = f"lost-{'request' if self.when == 'before' else 'response'}"
        return kind if self.lost == "timeout" else f"{kind}-{self.lost}"

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        if target_of(request) != self.operation:
            return None
        if self.where is not None and not self.where(json.loads(request.body or b"{}")):
            return None
        if not self._take():
            return None
        return fail(request, self.when, self.error, self.lost)


# Errors DynamoDB answers with a 5xx: the request may have taken effect.
SERVER_ERRORS = {"InternalServerError": 500, "ServiceUnavailable": 503}


def _response(url: str, body: bytes) -> AWSResponse:
    code = json.loads(body).get("__type", "").rpartition("#")[2]
    status = SERVER_ERRORS.get(code, 400)
    headers = HTTPHeaders()
    headers["x-amzn-requestid"] = "injected"
    raw = urllib3.HTTPResponse(body=io.BytesIO(body), status=status, headers={}, preload_content=False)
    return AWSResponse(url, status, headers, raw)


def inject(client: Any, operation: str, **kwargs: Any) -> Fault:
    fault = Fault(operation, **kwargs)
    client.meta.events.register_first("before-send.*.*", fault)
    return fault


def clear(client: Any, fault: Fault) -> None:
    client.meta.events.unregister("before-send.*.*", fault)


@contextmanager
def injected(client: Any, operation: str, **kwargs: Any) -> Iterator[Fault]:
    fault = inject(client, operation, **kwargs)
    try:
        yield fault
    finally:
        clear(client, fault)
