"""Malformed requests get API Gateway's 4xx answers from the local gateway, never a 5xx or a traceback.

Each request is written byte for byte to a real socket (http clients refuse to send most of these)
and the gateway must answer it, keep serving, and log no error. What each case is answered, and
on what authority: docs/local-runtime.md, "Malformed requests".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from localrun.gateway.routes import Route, RouteTable
from localrun.gateway.server import HttpGateway
from tests.integration.local_gateway import Answer, LocalGateway, exchange, local_gateway

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

USAGE = "/accounts/acme/usage"
CREATE = "/accounts/acme/kinds/projects/resources"
HEAD_QUOTA = 10240  # API Gateway HTTP API: total combined size of request line and header values
INCOMPLETE_REQUEST_SECONDS = 1.0


@pytest.fixture(scope="module")
def served() -> Iterator[LocalGateway]:
    with local_gateway(incomplete_request_timeout=INCOMPLETE_REQUEST_SECONDS) as running:
        yield running


@pytest.fixture
def fresh(served: LocalGateway) -> LocalGateway:
    served.events.clear()
    return served


def http(request_line: str | bytes, *headers: str | bytes, body: bytes = b"", host: bool = True) -> bytes:
    """A request as written on the wire: the request line, a Host header (unless told), the others."""
    lines = [request_line, *(["Host: 127.0.0.1"] if host else []), *headers]
    head = b"".join((line.encode() if isinstance(line, str) else line) + b"\r\n" for line in lines)
    return head + b"\r\n" + body


def filler_to(total: int, request_line: str, *values: str) -> str:
    """A header value that brings the request line and header values (Host's too) to ``total`` bytes."""
    used = len(request_line) + len("127.0.0.1") + sum(len(value) for value in values)
    return "f" * (total - used)


def chunked(*chunks: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"


BAD_REQUEST = (400, {"message": "Bad Request"})
NOT_FOUND = (404, {"message": "Not Found"})
TOO_LARGE = (413, {"message": "Request Entity Too Large"})
UNAUTHORIZED = (401, {"message": "Unauthorized"})  # well-formed: on to the authorizer (no token sent)
TENANT_GET = f"GET {USAGE} HTTP/1.1"
TENANT_POST = f"POST {CREATE} HTTP/1.1"
AT_QUOTA = filler_to(HEAD_QUOTA, TENANT_GET, "")
TEN_MB = 10 * 1024 * 1024

CASES = [
    # -- lengths --
    pytest.param(http(TENANT_POST, "Content-Length: abc"), BAD_REQUEST, id="content-length-not-a-number"),
    pytest.param(http(TENANT_POST, "Content-Length: "), BAD_REQUEST, id="content-length-empty"),
    pytest.param(http(TENANT_POST, "Content-Length: -1"), BAD_REQUEST, id="content-length-negative"),
    pytest.param(
        http(TENANT_POST, "Content-Length: +3", body=b"abc"), BAD_REQUEST, id="content-length-plus-sign"
    ),
    pytest.param(http(TENANT_POST, "Content-Length: 0x3", body=b"abc"), BAD_REQUEST, id="content-length-hex"),
    pytest.param(
        http(TENANT_POST, "Content-Length: 3e0", body=b"abc"), BAD_REQUEST, id="content-length-exponent"
    ),
    pytest.param(
        http(TENANT_POST, "Content-Length: 99999999999999999999"), TOO_LARGE, id="content-length-huge"
    ),
    pytest.param(
        http(TENANT_POST, f"Content-Length: {'9' * 40}"), TOO_LARGE, id="content-length-of-40-digits"
    ),
    pytest.param(
        http(TENANT_POST, f"Content-Length: {TEN_MB + 1}"), TOO_LARGE, id="content-length-over-10-MB"
    ),
    pytest.param(
        http(TENANT_POST, "Content-Length: 10", body=b"abc"),
        BAD_REQUEST,
        id="body-shorter-than-content-length",
    ),
    pytest.param(
        http(TENANT_POST, "Content-Length: 3", "Content-Length: 4", body=b"abcd"),
        BAD_REQUEST,
        id="two-content-lengths-that-disagree",
    ),
    pytest.param(
        http(TENANT_POST, "Content-Length: 3, 4", body=b"abcd"),
        BAD_REQUEST,
        id="content-length-list-that-disagrees",
    ),
    pytest.param(
        http(TENANT_POST, "Content-Length: 3", "Content-Length: 3", body=b"abc"),
        UNAUTHORIZED,
        id="two-content-lengths-that-agree",
    ),
    # -- transfer encodings --
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", body=chunked(b"abc")), UNAUTHORIZED, id="chunked"
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", body=b"3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n"),
        UNAUTHORIZED,
        id="chunked-with-extension-and-trailer",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", body=b"zz\r\nabc\r\n0\r\n\r\n"),
        BAD_REQUEST,
        id="chunk-size-not-hex",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", body=b"-3\r\nabc\r\n0\r\n\r\n"),
        BAD_REQUEST,
        id="chunk-size-negative",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", body=b"5\r\nab"),
        BAD_REQUEST,
        id="chunked-body-cut-short",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", body=chunked(b"x" * (TEN_MB + 1))),
        TOO_LARGE,
        id="chunk-over-10-MB",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: gzip", body=b"abc"), BAD_REQUEST, id="transfer-encoding-gzip"
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: x-unknown"), BAD_REQUEST, id="transfer-encoding-unknown"
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: gzip, chunked", body=chunked(b"abc")),
        BAD_REQUEST,
        id="transfer-encoding-gzip-then-chunked",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", "Transfer-Encoding: chunked", body=chunked(b"abc")),
        BAD_REQUEST,
        id="two-transfer-encodings",
    ),
    pytest.param(
        http(TENANT_POST, "Transfer-Encoding: chunked", "Content-Length: 3", body=chunked(b"abc")),
        BAD_REQUEST,
        id="transfer-encoding-and-content-length",
    ),
    # -- headers --
    pytest.param(
        http(TENANT_GET, f"X-Fill: {AT_QUOTA}"),
        UNAUTHORIZED,
        id="request-line-and-header-values-at-the-quota",
    ),
    pytest.param(
        http(TENANT_GET, f"X-Fill: {AT_QUOTA}f"),
        BAD_REQUEST,
        id="request-line-and-header-values-over-the-quota",
    ),
    pytest.param(
        http(TENANT_GET, *[f"X-Fill-{n}: {'f' * 100}" for n in range(110)]),
        BAD_REQUEST,
        id="header-values-over-the-quota-in-many-headers",
    ),
    pytest.param(http(TENANT_GET, f"X-Big: {'b' * 70_000}"), BAD_REQUEST, id="one-header-of-70-KB"),
    pytest.param(http(TENANT_GET, *[f"X-N{n}: v" for n in range(150)]), UNAUTHORIZED, id="150-small-headers"),
    pytest.param(http(TENANT_GET, "No colon here"), BAD_REQUEST, id="header-line-without-colon"),
    pytest.param(http(TENANT_POST, "Content-Length : 3", body=b"abc"), BAD_REQUEST, id="space-before-colon"),
    pytest.param(http(TENANT_GET, b"X-A: a\x00b"), BAD_REQUEST, id="nul-in-a-header-value"),
    pytest.param(http(TENANT_GET, "Host: elsewhere"), BAD_REQUEST, id="two-host-headers"),
    pytest.param(http(TENANT_GET, host=False), BAD_REQUEST, id="http-1.1-without-host"),
    pytest.param(http(f"GET {USAGE} HTTP/1.0", host=False), UNAUTHORIZED, id="http-1.0-without-host"),
    pytest.param(http(TENANT_GET, "X-Folded: a", " b"), UNAUTHORIZED, id="obsolete-line-folding"),
    # -- methods --
    pytest.param(http(f"FOO {USAGE} HTTP/1.1"), NOT_FOUND, id="unknown-method"),
    pytest.param(http(f"get {USAGE} HTTP/1.1"), NOT_FOUND, id="lowercase-method"),
    pytest.param(http(f"TRACE {USAGE} HTTP/1.1"), NOT_FOUND, id="trace"),
    pytest.param(http("CONNECT 127.0.0.1:443 HTTP/1.1"), BAD_REQUEST, id="connect"),
    pytest.param(http(f"G(T {USAGE} HTTP/1.1"), BAD_REQUEST, id="method-not-a-token"),
    # -- request lines --
    pytest.param(f"GET {USAGE}\r\n\r\n".encode(), BAD_REQUEST, id="http-0.9-request-line"),
    pytest.param(http(f"GET {USAGE} HTTP/2.0"), BAD_REQUEST, id="http-2.0-request-line"),
    pytest.param(http(f"GET {USAGE} HTTP/1.1 extra"), BAD_REQUEST, id="four-words"),
    pytest.param(http(f"GET  {USAGE} HTTP/1.1"), BAD_REQUEST, id="two-spaces"),
    pytest.param(http(f"GET {USAGE} http/1.1"), BAD_REQUEST, id="lowercase-protocol"),
    pytest.param(
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(32)), BAD_REQUEST, id="tls-client-hello"
    ),
    # -- paths --
    pytest.param(http(f"GET /accounts/{'a' * 20_000}/usage HTTP/1.1"), BAD_REQUEST, id="path-over-the-quota"),
    pytest.param(http(f"GET /{'a' * 9000} HTTP/1.1"), NOT_FOUND, id="long-path-within-the-quota"),
    pytest.param(http("GET /accounts/%zz/usage HTTP/1.1"), BAD_REQUEST, id="percent-not-followed-by-hex"),
    pytest.param(http("GET /accounts/acme/usage% HTTP/1.1"), BAD_REQUEST, id="percent-at-the-end"),
    pytest.param(http("GET /accounts/%ff/usage HTTP/1.1"), BAD_REQUEST, id="percent-encoded-invalid-utf-8"),
    pytest.param(http("GET /accounts/caf%C3%A9/usage HTTP/1.1"), UNAUTHORIZED, id="percent-encoded-utf-8"),
    pytest.param(http(b"GET /accounts/caf\xc3\xa9/usage HTTP/1.1"), BAD_REQUEST, id="raw-non-ascii"),
    pytest.param(http("GET /accounts/../usage HTTP/1.1"), NOT_FOUND, id="dot-dot-segment"),
    pytest.param(http("GET //accounts/acme/usage HTTP/1.1"), NOT_FOUND, id="double-slash"),
    pytest.param(http("OPTIONS * HTTP/1.1"), BAD_REQUEST, id="asterisk-form"),
    pytest.param(http(f"GET http://127.0.0.1{USAGE} HTTP/1.1"), UNAUTHORIZED, id="absolute-form"),
    pytest.param(http(f"GET {USAGE}?x=%zz HTTP/1.1"), UNAUTHORIZED, id="percent-error-in-the-query"),
]


def assert_still_serving(gateway: LocalGateway) -> None:
    answer = gateway.get(USAGE, gateway.token())
    assert answer.status == 200, answer.body


@pytest.fixture
def quiet_log(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> Iterator[None]:
    """Fails the test if the gateway logged an error or anything printed a traceback."""
    caplog.set_level(logging.DEBUG, logger="localrun")
    yield
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]
    assert errors == []
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_a_malformed_request_gets_api_gateways_answer_and_the_gateway_keeps_serving(
    fresh: LocalGateway, quiet_log: None, raw: bytes, expected: tuple[int, dict[str, str]]
) -> None:
    # Given a request as a client could write it, byte for byte

    # When it is sent (and the client then says it has nothing more to send)
    (answer,) = exchange(fresh.port, raw)

    # Then the gateway answers as API Gateway does, in its JSON, with a request id
    assert (answer.status, answer.json()) == expected, answer.body[:200]
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["apigw-requestid"]
    # the function never sees it (the well-formed ones stop at the authorizer: no token)
    assert fresh.events == []
    # and it goes on serving
    assert_still_serving(fresh)


def test_a_well_formed_body_reaches_the_function_however_it_is_framed(fresh: LocalGateway) -> None:
    # Given a valid token and the same body sent with a length, with two agreeing lengths, and chunked
    auth = f"Authorization: Bearer {fresh.token()}"
    bodies = [
        http(TENANT_POST, auth, "Content-Length: 6", body=b"abcdef"),
        http(TENANT_POST, auth, "Content-Length: 6", "Content-Length: 6", body=b"abcdef"),
        http(TENANT_POST, auth, "Transfer-Encoding: chunked", body=chunked(b"abc", b"def")),
    ]

    # When each is sent
    answers = [exchange(fresh.port, raw)[0] for raw in bodies]

    # Then the function gets the whole body each time
    assert [answer.status for answer in answers] == [200, 200, 200]
    assert [event["body"] for event in fresh.events] == ["abcdef"] * 3


def test_bytes_after_a_content_length_are_the_next_request(fresh: LocalGateway) -> None:
    # Given a request whose body is longer than its Content-Length says
    raw = http(TENANT_POST, f"Authorization: Bearer {fresh.token()}", "Content-Length: 3", body=b"abcdef")

    # When it is sent on one connection
    first, second = exchange(fresh.port, raw, answers=2)

    # Then the first 3 bytes are its body, and the rest is a request line that is not one: 400
    assert first.status == 200
    assert [event["body"] for event in fresh.events] == ["abc"]
    assert (second.status, second.json()) == BAD_REQUEST
    assert_still_serving(fresh)


def test_a_request_that_stops_arriving_is_answered_once_the_gateway_stops_waiting(
    fresh: LocalGateway, quiet_log: None
) -> None:
    # Given a request whose headers never end, on a connection the client keeps open
    raw = f"{TENANT_GET}\r\nHost: 127.0.0.1\r\nX-Waiting: 1\r\n".encode()
    started = time.monotonic()

    # When the client waits
    (answer,) = exchange(fresh.port, raw, half_close=False, timeout=INCOMPLETE_REQUEST_SECONDS + 9)

    # Then the gateway gives up on it and says so, rather than holding the connection forever
    assert (answer.status, answer.json()) == (408, {"message": "Request Timeout"})
    assert time.monotonic() - started < INCOMPLETE_REQUEST_SECONDS + 5
    assert_still_serving(fresh)


def test_a_kept_alive_connection_serves_the_next_request_after_an_ordinary_refusal(
    fresh: LocalGateway,
) -> None:
    # Given two requests on one connection: one for no route, then one with a valid token
    token = fresh.token()
    raw = http("GET /nowhere HTTP/1.1") + http(TENANT_GET, f"Authorization: Bearer {token}")

    # When both are sent
    missing, served = exchange(fresh.port, raw, answers=2)

    # Then a 404 does not end the connection: the second request is served on it
    assert (missing.status, missing.json()) == NOT_FOUND
    assert served.status == 200


# -- a fuzz of request lines and headers ----------------------------------------------------------


def mostly[T](common: st.SearchStrategy[T], odd: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``common`` three times in four, so that most requests get past the request line."""
    return st.one_of(common, common, common, odd)


METHODS = mostly(
    st.sampled_from([b"GET", b"POST", b"PUT", b"HEAD", b"TRACE", b"CONNECT", b"get", b"FOO"]),
    st.binary(max_size=10),
)
TARGETS = mostly(
    st.sampled_from([USAGE.encode(), CREATE.encode(), b"/plans", b"*", b"//x", b"/%zz", b"/%ff", b"/a/../b"])
    | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=30).map(
        lambda text: ("/" + text).encode()
    ),
    st.binary(max_size=40).map(lambda raw: b"/" + raw),
)
VERSIONS = mostly(
    st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"http/1.1"]), st.binary(max_size=10)
)
HEADER_NAMES = mostly(
    st.sampled_from(
        [b"Content-Length", b"Transfer-Encoding", b"Authorization", b"Expect", b"Connection", b"Host", b"X-A"]
    ),
    st.binary(max_size=12),
)
HEADER_VALUES = mostly(
    st.sampled_from(
        [
            b"chunked",
            b"gzip",
            b"-1",
            b"abc",
            b"5",
            b"0",
            b"99999999999999999999",
            b"100-continue",
            b"close",
            b"Bearer x",
        ]
    ),
    st.binary(max_size=24),
)


@st.composite
def request_heads(draw: st.DrawFn) -> bytes:
    separator = draw(mostly(st.just(b" "), st.sampled_from([b"  ", b"\t"])))
    eol = draw(mostly(st.just(b"\r\n"), st.just(b"\n")))
    line = draw(METHODS) + separator + draw(TARGETS) + separator + draw(VERSIONS)
    headers = draw(st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=6))
    if draw(mostly(st.just(True), st.just(False))):
        headers.insert(0, (b"Host", b"127.0.0.1"))
    head = line + eol + b"".join(name + b": " + value + eol for name, value in headers) + eol
    return head + draw(st.binary(max_size=32))


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(raw=request_heads(), half_close=st.booleans())
def test_no_request_line_or_header_gets_a_5xx_or_hangs_the_gateway(
    fresh: LocalGateway, quiet_log: None, raw: bytes, half_close: bool
) -> None:
    # Given any request line, headers and a few body bytes

    # When they are sent (with the sending side shut, or left open as a slow client would)
    try:
        answers: list[Answer] = exchange(
            fresh.port, raw, half_close=half_close, timeout=INCOMPLETE_REQUEST_SECONDS + 9
        )
    except ConnectionError:
        answers = []  # nothing that could be a request before the client hung up: no answer is due

    # Then whatever was answered is not a 5xx, within the time the gateway waits for a request
    event(f"answered {[answer.status for answer in answers]}")
    assert all(100 <= answer.status < 500 for answer in answers), [answer.status for answer in answers]
    # and the gateway goes on serving
    assert_still_serving(fresh)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(
            {"statusCode": 200, "headers": {"X-A": "a\r\nX-Injected: 1"}}, id="a line break in a header"
        ),
        pytest.param({"statusCode": 200, "headers": {"X A": "b"}}, id="a space in a header name"),
        pytest.param({"statusCode": 101, "body": "switching"}, id="a 1xx status"),
    ],
)
def test_a_function_answer_that_is_no_valid_http_response_is_a_500(answer: dict[str, object]) -> None:
    # Given a function whose answer cannot be written as an HTTP response
    gateway = HttpGateway(
        RouteTable([Route("GET", "/x", "F")]), lambda function, event: answer, api_id="t", port=0
    )
    gateway.start()
    try:
        # When it is called
        (response,) = exchange(gateway.port, http("GET /x HTTP/1.1"))
    finally:
        gateway.stop()

    # Then the client gets API Gateway's 500, and nothing of the function's answer
    assert (response.status, response.json()) == (500, {"message": "Internal Server Error"})
    assert "x-injected" not in response.headers
