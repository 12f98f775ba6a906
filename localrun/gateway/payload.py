"""API Gateway HTTP API Lambda proxy payloads, format version 2.0.

`build_event()` turns an HTTP request into the event API Gateway sends: lower-case
header names with duplicates joined by commas, `Cookie` headers moved into `cookies`,
duplicate query parameters joined by commas, URL-decoded path and path parameters,
and a body that is base64-encoded (`isBase64Encoded: true`) when it is not UTF-8.
Fields API Gateway leaves out when empty (cookies, queryStringParameters,
pathParameters, body) are left out.

`map_response()` interprets the function's answer as API Gateway does: a dict with a
`statusCode` is used as given (`headers`, `cookies` -> `Set-Cookie`, `body`,
`isBase64Encoded`); any other JSON value is returned as a 200 `application/json` body.
`multiValueHeaders` belongs to format 1.0 and is ignored, as on AWS.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

from localrun.stack.template import ACCOUNT_ID

NOT_FOUND_BODY = b'{"message":"Not Found"}'
INTERNAL_ERROR_BODY = b'{"message":"Internal Server Error"}'
TOO_LARGE_BODY = b'{"message":"Request Entity Too Large"}'
MAX_REQUEST_BODY = 10 * 1024 * 1024


class InvalidResponseError(ValueError):
    """The function's answer cannot be turned into an HTTP response (API Gateway answers 500)."""


@dataclass
class HttpRequest:
    method: str
    target: str  # the request line's target: path plus optional ?query
    headers: list[tuple[str, str]]
    body: bytes
    source_ip: str
    protocol: str = "HTTP/1.1"


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def new_request_id() -> str:
    """An id shaped like API Gateway's (`JKJaXmPLvHcESHA=`)."""
    return base64.b64encode(secrets.token_bytes(10)).decode()


def joined_header(headers: list[tuple[str, str]], name: str) -> str | None:
    """A header's value as API Gateway sees it: repeated headers joined with commas."""
    values = [value for header, value in headers if header.lower() == name.lower()]
    return ",".join(values) if values else None


def split_target(target: str) -> tuple[str, str]:
    path, _, query = target.partition("?")
    return path or "/", query


def build_event(
    request: HttpRequest,
    *,
    route_key: str,
    path_parameters: dict[str, str],
    api_id: str,
    stage: str,
    request_id: str,
) -> dict[str, Any]:
    raw_path, raw_query = split_target(request.target)
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in request.headers:
        lower = name.lower()
        if lower == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        headers[lower] = f"{headers[lower]},{value}" if lower in headers else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    now = time.time()
    host = headers.get("host", "localhost")
    decoded_path = unquote(raw_path)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": decoded_path,
        "rawQueryString": raw_query,
    }
    if cookies:
        event["cookies"] = cookies
    event["headers"] = headers
    if query:
        event["queryStringParameters"] = query
    event["requestContext"] = {
        "accountId": ACCOUNT_ID,
        "apiId": api_id,
        "domainName": host,
        "domainPrefix": host.split(".", 1)[0].split(":", 1)[0],
        "http": {
            "method": request.method,
            "path": decoded_path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": route_key,
        "stage": stage,
        "time": datetime.fromtimestamp(now, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now * 1000),
    }
    is_base64 = False
    if request.body:
        try:
            event["body"] = request.body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(request.body).decode()
            is_base64 = True
    if path_parameters:
        event["pathParameters"] = path_parameters
    event["isBase64Encoded"] = is_base64
    return event


def forwarded_headers(
    headers: list[tuple[str, str]], source_ip: str, port: int, request_id: str
) -> list[tuple[str, str]]:
    """The headers API Gateway adds before calling the integration."""
    extra = [
        ("x-forwarded-for", source_ip),
        ("x-forwarded-port", str(port)),
        ("x-forwarded-proto", "http"),
        ("x-amzn-trace-id", f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)}"),
    ]
    present = {name.lower() for name, _ in headers}
    return headers + [(name, value) for name, value in extra if name not in present]


def map_response(result: Any, request_id: str) -> HttpResponse:
    """The HTTP response API Gateway makes of a format 2.0 Lambda result."""
    base_headers = [("apigw-requestid", request_id)]
    if not (isinstance(result, dict) and "statusCode" in result):
        text = result if isinstance(result, str) else json.dumps(result)
        return HttpResponse(200, [*base_headers, ("content-type", "application/json")], text.encode())
    status = result["statusCode"]
    if isinstance(status, bool) or not isinstance(status, int | str):
        raise InvalidResponseError(f"statusCode must be an integer, not {status!r}")
    try:
        code = int(status)
    except ValueError as error:
        raise InvalidResponseError(f"statusCode must be an integer, not {status!r}") from error
    if not 100 <= code <= 599:
        raise InvalidResponseError(f"statusCode {code} is not an HTTP status")
    headers = list(base_headers)
    raw_headers = result.get("headers") or {}
    if not isinstance(raw_headers, dict):
        raise InvalidResponseError("headers must be an object")
    headers.extend((str(name), _header_value(value)) for name, value in raw_headers.items())
    headers.extend(("set-cookie", str(cookie)) for cookie in _as_list(result.get("cookies")))
    body = result.get("body")
    if body is None:
        payload = b""
    elif not isinstance(body, str):
        payload = json.dumps(body).encode()
    elif result.get("isBase64Encoded") is True:
        try:
            payload = base64.b64decode(body, validate=True)
        except ValueError as error:
            raise InvalidResponseError("isBase64Encoded is true but body is not base64") from error
    else:
        payload = body.encode()
    return HttpResponse(code, headers, payload)


def _header_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise InvalidResponseError(f"header values must be strings, not {value!r}")


def _as_list(value: Any) -> Iterable[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidResponseError("cookies must be a list of strings")
    return value


def json_error(status: int, body: bytes, request_id: str) -> HttpResponse:
    return HttpResponse(status, [("apigw-requestid", request_id), ("content-type", "application/json")], body)
