"""The HTTP front door: a threaded server on 127.0.0.1 that plays API Gateway (HTTP API).

Each connection is read by `localrun.gateway.client_connection` (HTTP/1.1 through h11, with API
Gateway's quotas: a malformed request is answered 400, 408 or 413 there, before anything else).
Each request is matched against the template's HttpApi routes and handed to the route's function
as a payload format 2.0 event; the function's answer is mapped back to HTTP. Like API Gateway: no
route -> 404 `{"message":"Not Found"}`, a function error or an answer that is not a valid
response -> 500 `{"message":"Internal Server Error"}`. One log line per request, with secrets
redacted (`localrun.gateway.redaction`). With a `GatewayAuth` (`localrun.gateway.auth`), each
route's authorizer runs before the function, as on AWS.

Routes are matched against the request target exactly as received: a path with an empty, `.`
or `..` segment matches no route (`localrun.gateway.routes`).

Routes of a non-`$default` stage are served under `/<stage>`, as on AWS. Throttling (429)
and the integration timeout (503) are `localrun.gateway.limits`.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from localrun.errors import LocalRunError
from localrun.gateway.client_connection import (
    INCOMPLETE_REQUEST_SECONDS,
    ClientConnection,
    ReceivedRequest,
    Refusal,
    UnsendableResponse,
)
from localrun.gateway.limits import THROTTLED_BODY, TIMED_OUT_BODY, HttpLimits, IntegrationTimeoutError
from localrun.gateway.payload import (
    INTERNAL_ERROR_BODY,
    NOT_FOUND_BODY,
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


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512  # bursts of concurrent clients (load tests) must not be refused
    gateway: HttpGateway

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Not socketserver's traceback on stderr: a failure here is a bug of the gateway, logged as one.
        log.exception("connection from %s failed", client_address[0])


class _ConnectionHandler(socketserver.BaseRequestHandler):
    request: socket.socket
    server: _Server

    def setup(self) -> None:
        # A 100 Continue and its answer go out in separate writes; with Nagle's algorithm on, the
        # second would wait for the client's delayed ACK of the first (40 ms on Linux).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        self.server.gateway.serve(self.request, str(self.client_address[0]))


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
        incomplete_request_timeout: float = INCOMPLETE_REQUEST_SECONDS,
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
        self._incomplete_request_timeout = incomplete_request_timeout

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
            server = _Server(("127.0.0.1", self._requested_port), _ConnectionHandler)
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

    # -- connections and requests -----------------------------------------------------------------

    def serve(self, sock: socket.socket, client_ip: str) -> None:
        """Answer the requests of one connection until the client or a refusal closes it."""
        connection = ClientConnection(sock, incomplete_request_timeout=self._incomplete_request_timeout)
        try:
            while True:
                received = connection.next_request()
                if received is None:
                    return
                if isinstance(received, Refusal):
                    self._refuse(connection, received)
                    return
                self._answer(connection, received, client_ip)
                if not connection.ready_for_next():
                    return
        except OSError as error:
            log.debug("connection from %s ended: %s", client_ip, error)  # the client went away

    def _refuse(self, connection: ClientConnection, refusal: Refusal) -> None:
        connection.send(json_error(refusal.status, refusal.body, new_request_id()), close=True)
        log.info("%s %s -> %d - (%s)", refusal.method, refusal.target, refusal.status, refusal.reason)
        connection.linger()

    def _answer(self, connection: ClientConnection, received: ReceivedRequest, client_ip: str) -> None:
        started = time.monotonic()
        request_id = new_request_id()
        function = "-"
        try:
            response, function = self.respond(received, client_ip, request_id)
        except Exception:
            log.exception("gateway error")
            response = json_error(500, INTERNAL_ERROR_BODY, request_id)
        try:
            connection.send(response)
            unsendable = None
        except UnsendableResponse as error:
            unsendable = error
        if unsendable is not None:  # as API Gateway answers a malformed Lambda response
            log.error("%s's answer is not a valid HTTP response (%s)", function, unsendable)
            response = json_error(500, INTERNAL_ERROR_BODY, request_id)
            connection.send(response)
        log.info(
            "%s %s -> %d %s (%.0f ms)",
            received.method,
            received.target,
            response.status,
            function,
            (time.monotonic() - started) * 1000,
        )

    def respond(self, received: ReceivedRequest, client_ip: str, request_id: str) -> tuple[HttpResponse, str]:
        """API Gateway's answer to a well-formed request, and the function that made it ("-": none)."""
        path, _ = split_target(received.target)
        match = self._match(received.method, path)
        if match is None:
            return json_error(404, NOT_FOUND_BODY, request_id), "-"
        route_key, function = match.route.route_key, match.route.function
        if self._limits is not None and not self._limits.admit(route_key):
            return json_error(429, THROTTLED_BODY, request_id), "-"
        request = HttpRequest(
            method=received.method,
            target=received.target,
            headers=forwarded_headers(received.headers, client_ip, self.port, request_id),
            body=received.body,
            source_ip=client_ip,
            protocol=f"HTTP/{received.http_version}",
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
