"""The HTTP front door: a threaded HTTP server on 127.0.0.1 that plays API Gateway (HTTP API).

Each request is matched against the template's HttpApi routes and handed to the
route's function as a payload format 2.0 event; the function's answer is mapped back
to HTTP. Like API Gateway: no route -> 404 `{"message":"Not Found"}`, a body over
10 MB -> 413, a function error or an answer that is not a valid response -> 500
`{"message":"Internal Server Error"}`. One log line per request, with secrets redacted
(`localrun.gateway.redaction`). With a `GatewayAuth` (`localrun.gateway.auth`), each route's authorizer
runs before the function, as on AWS.

Routes are matched against the request target exactly as received: a path with an empty, `.`
or `..` segment matches no route (`localrun.gateway.routes`), where http.server alone would have
turned a leading `//` into `/` and served `//accounts/acme/usage` as `/accounts/acme/usage`.

Routes of a non-`$default` stage are served under `/<stage>`, as on AWS. Throttling (429)
and the integration timeout (503) are `localrun.gateway.limits`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from localrun.errors import LocalRunError
from localrun.gateway.limits import THROTTLED_BODY, TIMED_OUT_BODY, HttpLimits, IntegrationTimeoutError
from localrun.gateway.payload import (
    INTERNAL_ERROR_BODY,
    MAX_REQUEST_BODY,
    NOT_FOUND_BODY,
    TOO_LARGE_BODY,
    HttpRequest,
    HttpResponse,
    build_event,
    forwarded_headers,
    json_error,
    map_response,
    new_request_id,
    split_target,
)
from localrun.gateway.redaction import RedactSecrets
from localrun.gateway.routes import RouteMatch, RouteTable

if TYPE_CHECKING:
    from localrun.gateway.auth import GatewayAuth

log = logging.getLogger("localrun.http")
log.addFilter(RedactSecrets())  # request lines carry tokens (`?access_token=`): never log them

Invoke = Callable[[str, dict[str, Any]], Any]  # (function logical id, event) -> result


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512  # bursts of concurrent clients (load tests) must not be refused
    gateway: HttpGateway


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the body would wait
    # for the client's delayed ACK of the headers (40 ms on Linux) on every keep-alive request.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)

    def _handle(self) -> None:
        self.server.gateway.handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle


def request_target(handler: BaseHTTPRequestHandler) -> str:
    """The target of the request line as the client sent it.

    `handler.path` is not: since Python 3.12 (gh-87389) http.server reduces a leading `//` to `/`.
    API Gateway documents no such normalisation, so the gateway routes what was sent.
    """
    words = handler.requestline.split()
    return words[1] if len(words) >= 2 else handler.path


class HttpGateway:
    def __init__(
        self,
        routes: RouteTable,
        invoke: Invoke,
        *,
        api_id: str,
        stage: str = "$default",
        port: int = 3000,
        on_request: Callable[[], Any] | None = None,
        auth: GatewayAuth | None = None,
        limits: HttpLimits | None = None,
    ) -> None:
        self._routes = routes
        self._auth = auth
        self._limits = limits
        self._invoke = invoke
        self._api_id = api_id
        self._stage = stage
        self._requested_port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._on_request = on_request

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the HTTP gateway is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        prefix = "" if self._stage == "$default" else f"/{self._stage}"
        return f"http://127.0.0.1:{self.port}{prefix}"

    def start(self) -> None:
        try:
            server = _Server(("127.0.0.1", self._requested_port), _Handler)
        except OSError as error:
            raise LocalRunError(
                f"cannot listen on 127.0.0.1:{self._requested_port} ({error.strerror}); "
                "set PORT to another port (0 = any free port)"
            ) from error
        server.gateway = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="localrun-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # -- request handling -------------------------------------------------------------------------

    def handle(self, handler: _Handler) -> None:
        started = time.monotonic()
        request_id = new_request_id()
        function = "-"
        try:
            response, function = self._respond(handler, request_id)
        except Exception:
            log.exception("gateway error")
            response = json_error(500, INTERNAL_ERROR_BODY, request_id)
        self._write(handler, response)
        log.info(
            "%s %s -> %d %s (%.0f ms)",
            handler.command,
            request_target(handler),
            response.status,
            function,
            (time.monotonic() - started) * 1000,
        )

    def _respond(self, handler: _Handler, request_id: str) -> tuple[HttpResponse, str]:
        length = int(handler.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BODY:
            handler.close_connection = True
            return json_error(413, TOO_LARGE_BODY, request_id), "-"
        body = self._read_body(handler, length)
        if body is None:
            handler.close_connection = True
            return json_error(413, TOO_LARGE_BODY, request_id), "-"
        target = request_target(handler)
        path, _ = split_target(target)
        match = self._match(handler.command, path)
        if match is None:
            return json_error(404, NOT_FOUND_BODY, request_id), "-"
        route_key, function = match.route.route_key, match.route.function
        if self._limits is not None and not self._limits.admit(route_key):
            return json_error(429, THROTTLED_BODY, request_id), "-"
        client_ip = str(handler.client_address[0])
        request = HttpRequest(
            method=handler.command,
            target=target,
            headers=forwarded_headers(list(handler.headers.items()), client_ip, self.port, request_id),
            body=body,
            source_ip=client_ip,
            protocol=handler.request_version,
        )
        authorizer = None
        if self._auth is not None:
            decision = self._auth.authorize(match.route.route_key, request, request_id)
            if decision.refusal is not None:
                return decision.refusal, "-"
            authorizer = decision.context
        event = build_event(
            request,
            route_key=route_key,
            path_parameters=match.path_parameters,
            api_id=self._api_id,
            stage=self._stage,
            request_id=request_id,
        )
        if authorizer is not None:
            event["requestContext"]["authorizer"] = authorizer
        if self._on_request is not None:
            self._on_request()
        return self._integrate(route_key, function, event, request_id), function

    def _integrate(
        self, route_key: str, function: str, event: dict[str, Any], request_id: str
    ) -> HttpResponse:
        """Invoke the route's function and map its answer (or its failure) to the HTTP response."""
        method, path = event["requestContext"]["http"]["method"], event["rawPath"]
        try:
            if self._limits is None:
                result = self._invoke(function, event)
            else:
                result = self._limits.call(route_key, lambda: self._invoke(function, event))
            return map_response(result, request_id)
        except IntegrationTimeoutError:
            log.warning("%s did not answer %s %s in time", function, method, path)
            return json_error(503, TIMED_OUT_BODY, request_id)
        except Exception:
            log.exception("%s failed for %s %s", function, method, path)
            return json_error(500, INTERNAL_ERROR_BODY, request_id)

    def _match(self, method: str, path: str) -> RouteMatch | None:
        if self._stage != "$default":
            prefix = f"/{self._stage}"
            if path != prefix and not path.startswith(prefix + "/"):
                return None
            path = path[len(prefix) :] or "/"
        return self._routes.match(method, path)

    @staticmethod
    def _read_body(handler: _Handler, length: int) -> bytes | None:
        if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(handler.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    return b"".join(chunks)
                total += size
                if total > MAX_REQUEST_BODY:
                    return None
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
        return handler.rfile.read(length) if length > 0 else b""

    @staticmethod
    def _write(handler: _Handler, response: HttpResponse) -> None:
        handler.send_response(response.status)
        for name, value in response.headers:
            if name.lower() not in {"content-length", "transfer-encoding", "connection"}:
                handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(response.body)))
        if handler.close_connection:
            handler.send_header("Connection", "close")
        handler.end_headers()
        if handler.command != "HEAD" and response.body:
            handler.wfile.write(response.body)
