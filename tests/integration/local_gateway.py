"""A local gateway in this process, for the gateway's own tests: real sockets, a real JWT authorizer.

The routes are shaped like the template's: a tenant route (no scopes), a tenant route that takes a
body, and operator routes that need the `hybrid-counter/operator` scope, all behind a JWT
authorizer whose keys come from a local OIDC issuer. The function is a stub that records each
event and answers 200 with the body it was given. No DynamoDB, no execution environments.

`exchange()` writes raw bytes to the gateway and parses the answer with http.client, so a test can
send what no HTTP client would (a bad Content-Length, a broken request line).
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from localrun.gateway.auth import GatewayAuth, RouteAuth
from localrun.gateway.jwt_authorizer import JwtAuthorizer
from localrun.gateway.oidc_issuer import LocalIssuer
from localrun.gateway.routes import Route, RouteTable
from localrun.gateway.server import HttpGateway

AUDIENCE = "hybrid-counter"
OPERATOR_SCOPE = "hybrid-counter/operator"
USAGE = ("GET", "/accounts/{account_id}/usage")
CREATE = ("POST", "/accounts/{account_id}/kinds/{kind}/resources")
LIST_PLANS = ("GET", "/plans")
PUT_PLAN = ("PUT", "/plans/{plan_id}")
OPERATOR_ROUTES = (LIST_PLANS, PUT_PLAN)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class LocalGateway:
    gateway: HttpGateway
    issuer: LocalIssuer
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.gateway.port

    def token(self, **claims: Any) -> str:
        """A token the authorizer accepts (claims given as None are left out of it)."""
        wanted = {"account_id": "acme", **claims}
        return self.issuer.mint({name: value for name, value in wanted.items() if value is not None})

    def get(self, target: str, token: str | None = None) -> Answer:
        return request(self.port, "GET", target, bearer(token) if token else [])


def bearer(token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {token}")]


def request(port: int, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b"") -> Answer:
    """A well-formed request, through http.client (which sends the target exactly as written)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        if body or method in {"POST", "PUT"}:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


class _SharedReader:
    """One buffered reader of a socket that several http.client responses read in turn.

    http.client closes its file once a response is read; this one stays open for the next.
    """

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def makefile(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def exchange(
    port: int, raw: bytes, *, answers: int = 1, half_close: bool = True, timeout: float = 10.0
) -> list[Answer]:
    """Write ``raw`` to a new connection and read ``answers`` responses.

    ``half_close``: shut the sending side once written, as a client that has nothing more to send
    does, so a request cut short ends at once rather than when the gateway stops waiting for it.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway answered (and closed) before it had read everything: read that answer
        reader = _SharedReader(sock.makefile("rb"))
        found = []
        for _ in range(answers):
            response = http.client.HTTPResponse(reader, method="HEAD" if raw.startswith(b"HEAD") else "GET")  # type: ignore[arg-type]
            response.begin()
            headers = {k.lower(): v for k, v in response.getheaders()}
            found.append(Answer(response.status, headers, response.read()))
        return found


@contextmanager
def local_gateway(**gateway_options: Any) -> Iterator[LocalGateway]:
    """A gateway on a free port, with its issuer; ``gateway_options`` go to HttpGateway."""
    issuer = LocalIssuer((AUDIENCE,)).start()
    authorizer = JwtAuthorizer("TokenAuthorizer", issuer.url, (AUDIENCE,))
    tenant = RouteAuth("JWT", authorizer)
    operator = RouteAuth("JWT", authorizer, (OPERATOR_SCOPE,))
    routes = [Route(method, path, "ApiFunction") for method, path in (USAGE, CREATE, *OPERATOR_ROUTES)]
    auth = GatewayAuth(
        {
            route.route_key: operator if (route.method, route.path) in OPERATOR_ROUTES else tenant
            for route in routes
        }
    )
    events: list[dict[str, Any]] = []

    def invoke(function: str, event: dict[str, Any]) -> Any:
        events.append(event)
        return {"statusCode": 200, "body": json.dumps({"body": event.get("body")})}

    gateway = HttpGateway(
        RouteTable(routes), invoke, api_id="gatewaytests", port=0, auth=auth, **gateway_options
    )
    gateway.start()
    try:
        yield LocalGateway(gateway, issuer, events)
    finally:
        gateway.stop()
        issuer.stop()
