"""Fault injection through real boto3 clients (botocore's event hooks), not by replacing domain code.

``inject(client, "UpdateItem", when="after")`` lets the request reach DynamoDB and then makes the
client see a read timeout, as when a response is lost: the write took effect, the caller cannot
know. ``when="before"`` fails before anything is sent. ``error`` may also be a DynamoDB error
code ("ThrottlingException", "TransactionConflictException", ...), answered without sending.
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import urllib3
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

_http = urllib3.PoolManager()


@dataclass
class Fault:
    operation: str
    when: str = "after"  # "after": applied then lost; "before": never sent
    error: str | None = None  # DynamoDB error code answered instead of sending
    times: int = 1
    fired: int = 0
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _take(self) -> bool:
        with self.lock:
            self.calls += 1
            if self.fired >= self.times:
                return False
            self.fired += 1
            return True

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        if not target.endswith("." + self.operation):
            return None
        if not self._take():
            return None
        if self.error is not None:
            error_body = {"__type": f"com.amazonaws.dynamodb.v20120810#{self.error}", "message": "injected"}
            body = json.dumps(error_body).encode()
            status = 400
            raw = urllib3.HTTPResponse(
                body=io.BytesIO(body), status=status, headers={}, preload_content=False
            )
            return AWSResponse(request.url, status, _headers(), raw)
        if self.when == "before":
            raise ConnectTimeoutError(endpoint_url=request.url)
        headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        _http.request("POST", request.url, body=request.body, headers=headers)
        raise ReadTimeoutError(endpoint_url=request.url)


def _headers() -> HTTPHeaders:
    headers = HTTPHeaders()
    headers["x-amzn-requestid"] = "injected"
    return headers


def inject(client: Any, operation: str, **kwargs: Any) -> Fault:
    fault = Fault(operation, **kwargs)
    client.meta.events.register_first("before-send.*.*", fault)
    return fault


def clear(client: Any, fault: Fault) -> None:
    client.meta.events.unregister("before-send.*.*", fault)
