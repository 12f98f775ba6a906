"""One client's connection to the front door: HTTP/1.1 requests in, responses out, nothing malformed let through.

h11 does the HTTP/1.1 parsing and framing (RFC 9112): request line, header syntax, Content-Length
(digits only; repeated values must agree), Transfer-Encoding (chunked only, once), chunk syntax,
Host (required on HTTP/1.1, once), a request cut short by the client's end of stream. On top of
it, what API Gateway's HTTP API quotas and routing need:

- request line plus header values over 10,240 bytes (API Gateway's quota) -> 400;
- a body over 10 MB (API Gateway's payload quota), declared or chunked -> 413;
- Content-Length together with Transfer-Encoding (the request-smuggling pair, RFC 9112 6.1),
  an HTTP version other than 1.x, a target that is not a path (CONNECT's `host:port`,
  `OPTIONS *`), or a path whose percent-encoding is broken or not UTF-8 -> 400;
- a request that stops arriving for `incomplete_request_timeout` seconds -> 408 (an idle
  kept-alive connection between requests waits as long as the client likes).

Every refusal is an answer (a `Refusal`), never an exception, and the connection closes after it.
Which answer is API Gateway's documented behaviour and which is local choice:
docs/local-runtime.md, "Malformed requests".
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import cast
from urllib.parse import unquote_to_bytes, urlsplit

import h11

from localrun.gateway.payload import MAX_REQUEST_BODY, TOO_LARGE_BODY, HttpResponse

MAX_REQUEST_HEAD = 10240  # API Gateway HTTP API: "total combined size of request line and header values"
# h11 stops buffering a head still incomplete past this; such a head is over the quota anyway.
HEAD_BUFFER = 64 * 1024
INCOMPLETE_REQUEST_SECONDS = 3.0
# After a refusal, what the client still sends is read (and dropped) this long before closing: a
# socket closed with unread input resets the connection, and the client may lose the answer.
LINGER_SECONDS = 1.0
RECEIVE_BYTES = 64 * 1024
BAD_REQUEST_BODY = b'{"message":"Bad Request"}'
REQUEST_TIMEOUT_BODY = b'{"message":"Request Timeout"}'
HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection"})
_HEX = frozenset(b"0123456789abcdefABCDEF")
# h11 refuses a Content-Length of more than 20 digits as malformed; it is a length over the quota.
_OVERLONG_LENGTH = re.compile(rb"(?im)^content-length[ \t]*:[ \t]*[0-9]{21,}[ \t]*\r?$")


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    target: str  # origin-form: the path and optional query, as sent
    http_version: str  # "1.1", "1.0"
    headers: list[tuple[str, str]]  # as sent: names in their case, repeated headers repeated
    body: bytes


@dataclass(frozen=True)
class Refusal:
    """A request the front door answers itself; `reason` is for the log and never quotes the request."""

    status: int
    body: bytes
    reason: str
    method: str = "-"
    target: str = "-"


class UnsendableResponse(ValueError):
    """The function's answer cannot be written as HTTP (a header with a line break, a 1xx status)."""


def bad_request(reason: str, request: h11.Request | None = None) -> Refusal:
    return _refusal(400, BAD_REQUEST_BODY, reason, request)


def _refusal(status: int, body: bytes, reason: str, request: h11.Request | None) -> Refusal:
    if request is None:
        return Refusal(status, body, reason)
    return Refusal(status, body, reason, request.method.decode("ascii"), request.target.decode("ascii"))


class ClientConnection:
    """Reads one request at a time from a connected socket and writes the answer; not thread-safe."""

    def __init__(
        self, sock: socket.socket, *, incomplete_request_timeout: float = INCOMPLETE_REQUEST_SECONDS
    ):
        self._sock = sock
        self._timeout = incomplete_request_timeout
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_BUFFER)
        self._method = b""
        self._head = bytearray()  # the bytes of the request being read, until its head is parsed

    def next_request(self) -> ReceivedRequest | Refusal | None:
        """The next request, or what to answer instead; None when the client closed between requests."""
        request: h11.Request | None = None
        self._method = b""
        self._head = bytearray(self._h11.trailing_data[0])  # a pipelined request's first bytes
        try:
            event = self._next_event()
            if not isinstance(event, h11.Request):
                return None  # ConnectionClosed: nothing was asked
            request = event
            self._method = request.method
            return refuse_head(request) or self._with_body(request)
        except h11.RemoteProtocolError as error:
            return self._malformed(error, request)
        except TimeoutError:
            return _refusal(408, REQUEST_TIMEOUT_BODY, "the request stopped arriving", request)

    def _with_body(self, request: h11.Request) -> ReceivedRequest | Refusal:
        declared = _declared_length(request)
        if declared is not None and declared > MAX_REQUEST_BODY:
            return _refusal(413, TOO_LARGE_BODY, "declared body over 10 MB", request)
        if self._h11.client_is_waiting_for_100_continue:
            self._sock.sendall(self._h11.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        body = self._read_body()
        if body is None:
            return _refusal(413, TOO_LARGE_BODY, "body over 10 MB", request)
        return ReceivedRequest(
            method=request.method.decode("ascii"),
            target=origin_form(request.target.decode("ascii")),
            http_version=request.http_version.decode("ascii"),
            headers=[
                (name.decode("ascii"), value.decode("latin-1")) for name, value in request.headers.raw_items()
            ],
            body=body,
        )

    def _malformed(self, error: h11.RemoteProtocolError, request: h11.Request | None) -> Refusal:
        if request is None and _OVERLONG_LENGTH.search(self._head):
            return _refusal(413, TOO_LARGE_BODY, "declared body over 10 MB", None)
        # h11's message can quote the request (a header line): keep only what kind of error it is.
        return bad_request(str(error).split(":", 1)[0], request)

    def send(self, response: HttpResponse, *, close: bool = False) -> None:
        """Write the answer; UnsendableResponse (nothing written) if it is no valid HTTP response."""
        no_body = self._method == b"HEAD" or response.status in (204, 304)
        headers = [(name, value) for name, value in response.headers if name.lower() not in HOP_BY_HOP]
        if response.status not in (204, 304):
            headers.append(("content-length", str(len(response.body))))
        headers.append(("date", formatdate(usegmt=True)))
        if close:
            headers.append(("connection", "close"))
        try:
            head = h11.Response(
                status_code=response.status,
                headers=[(name.encode(), value.encode()) for name, value in headers],
            )
            data = self._h11.send(head)
        except h11.LocalProtocolError as error:
            raise UnsendableResponse(str(error)) from None
        if response.body and not no_body:
            data = (data or b"") + (self._h11.send(h11.Data(data=response.body)) or b"")
        data = (data or b"") + (self._h11.send(h11.EndOfMessage()) or b"")
        self._sock.settimeout(None)  # the wait for a request's bytes is not a limit on the client's reading
        self._sock.sendall(data)

    def ready_for_next(self) -> bool:
        """After an answer: whether the connection can carry another request (keep-alive)."""
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            return True
        return False

    def linger(self) -> None:
        """Before closing after a refusal: stop sending, and drop what still arrives for a moment."""
        deadline = time.monotonic() + LINGER_SECONDS
        try:
            self._sock.shutdown(socket.SHUT_WR)
            while (left := deadline - time.monotonic()) > 0:
                self._sock.settimeout(left)
                if not self._sock.recv(RECEIVE_BYTES):
                    return
        except OSError:
            return

    def _next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                return cast("h11.Event | type[h11.PAUSED]", event)
            # Between requests the client may stay silent as long as it likes; once a request has
            # begun, it must keep arriving.
            begun = self._h11.their_state is not h11.IDLE or bool(self._h11.trailing_data[0])
            self._sock.settimeout(self._timeout if begun else None)
            try:
                data = self._sock.recv(RECEIVE_BYTES)
            except ConnectionResetError:
                data = b""  # the client is gone: the same as its end of stream
            if self._h11.their_state is h11.IDLE and len(self._head) < HEAD_BUFFER:
                self._head += data
            self._h11.receive_data(data)

    def _read_body(self) -> bytes | None:
        """The whole body, or None once it passes 10 MB."""
        chunks: list[bytes] = []
        size = 0
        while True:
            event = self._next_event()
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            if not isinstance(event, h11.Data):
                raise h11.RemoteProtocolError("the request ended without its body")
            size += len(event.data)
            if size > MAX_REQUEST_BODY:
                return None
            chunks.append(bytes(event.data))


def refuse_head(request: h11.Request) -> Refusal | None:
    """What API Gateway's quota and routing refuse in a request line and headers h11 accepted."""
    version = request.http_version
    if not version.startswith(b"1."):
        return bad_request("not HTTP/1.x", request)
    line = len(request.method) + len(request.target) + len(b"HTTP/") + len(version) + 2
    if line + sum(len(value) for _, value in request.headers.raw_items()) > MAX_REQUEST_HEAD:
        return bad_request(f"request line and header values over {MAX_REQUEST_HEAD} bytes", request)
    names = {name for name, _ in request.headers}
    if b"transfer-encoding" in names and b"content-length" in names:
        return bad_request("both Content-Length and Transfer-Encoding", request)
    target = request.target.decode("ascii")  # h11 allows visible ASCII only
    if not origin_form(target).startswith("/"):
        return bad_request("the target is not a path", request)
    if not is_utf8_percent_encoded(origin_form(target).partition("?")[0]):
        return bad_request("the path's percent-encoding is not UTF-8", request)
    return None


def origin_form(target: str) -> str:
    """`http://host/path?q` -> `/path?q` (RFC 9112 3.2.2: a server must accept the absolute form)."""
    if not target.lower().startswith(("http://", "https://")):
        return target
    parts = urlsplit(target)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def is_utf8_percent_encoded(path: str) -> bool:
    """Every `%` starts two hex digits, and what they encode is UTF-8 (API Gateway decodes paths)."""
    raw = path.encode("ascii")
    for index, byte in enumerate(raw):
        if byte == ord("%") and not (index + 2 < len(raw) and set(raw[index + 1 : index + 3]) <= _HEX):
            return False
    try:
        unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _declared_length(request: h11.Request) -> int | None:
    for name, value in request.headers:
        if name == b"content-length":
            return int(value)  # h11 checked it is digits, and that repeated values agree
    return None
