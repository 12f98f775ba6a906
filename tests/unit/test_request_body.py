"""Strict JSON request bodies (api/body.py): hostile shapes are a 400 with the error body, never a
5xx; the size is checked before anything decodes or parses; valid bodies behave as before."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_counter.api import body as body_module
from hybrid_counter.api.app import build_app
from hybrid_counter.api.body import MAX_BODY_BYTES, MAX_DEPTH, MAX_INT_DIGITS, strict_json
from hybrid_counter.errors import ValidationError
from hybrid_counter.resources.items import Resource, pending_item, resource_from_item
from tests.conftest import load_event
from tests.hostile_json import hostile_body
from tests.unit.test_api_validation import RecordingService, assert_error

CREATE, LIMIT, PUT = "api_create_resource.json", "api_put_limit.json", "api_put_resource.json"


def event_for(name: str, body: str | None, **changes: Any) -> dict[str, Any]:
    return {**load_event(name), "body": body, **changes}


def resolve(event: dict[str, Any], service: RecordingService) -> dict:
    return build_app(lambda: service).resolve(event, None)  # type: ignore[arg-type, return-value]


def answer(name: str, body: str | None, **changes: Any) -> tuple[int, Any, RecordingService]:
    service = RecordingService()
    response = resolve(event_for(name, body, **changes), service)
    text = response.get("body") or ""
    return response["statusCode"], (json.loads(text) if text else None), service


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + "1" + closer * depth


DEEP_ARRAY = nested(5000)  # 10 KB
DEEP_OBJECT = nested(2600, '{"a":', "}")  # 15.6 KB: 5,000 levels of objects do not fit in 16 KiB
DIGITS = "9" * 5000

HOSTILE = [
    (CREATE, '{"name": "x", "a": ' + DEEP_ARRAY + "}", "nested deeper than 32"),
    (CREATE, DEEP_ARRAY, "nested deeper than 32"),
    (CREATE, '{"name": "x", "a": ' + DEEP_OBJECT + "}", "nested deeper than 32"),
    (LIMIT, '{"limit": ' + DEEP_OBJECT + "}", "nested deeper than 32"),
    (CREATE, '{"name": "x", "a": ' + DIGITS + "}", "integer of more than 64 digits"),
    (LIMIT, '{"limit": ' + DIGITS + "}", "integer of more than 64 digits"),
    (LIMIT, '{"limit": -' + DIGITS + "}", "integer of more than 64 digits"),
    (CREATE, '{"name": "x", "a": ' + "1" * 65 + "}", "integer of more than 64 digits"),
    (LIMIT, '{"limit": NaN}', "NaN is not a JSON number"),
    (CREATE, '{"name": "x", "a": NaN}', "NaN is not a JSON number"),
    (CREATE, '{"name": "x", "a": Infinity}', "Infinity is not a JSON number"),
    (CREATE, '{"name": "x", "a": -Infinity}', "-Infinity is not a JSON number"),
    (CREATE, '{"name": "x", "meta": {"b": [1, {"c": NaN}]}}', "NaN is not a JSON number"),
    (PUT, '{"name": "x", "meta": {"b": [Infinity]}}', "Infinity is not a JSON number"),
    (CREATE, '{"name": "x", "a": 1e400}', "number out of range: 1e400"),
    (CREATE, '{"name": "x", "a": [-1e400]}', "number out of range"),
    (LIMIT, '{"limit": 1' + "0" * 400 + ".0}", "number out of range"),
    (CREATE, '{"name": "x", "name": "y"}', 'field \\"name\\" is given more than once'),
    (CREATE, '{"name": "x", "m": {"k": 1, "k": 2}}', 'field \\"k\\" is given more than once'),
    (LIMIT, '{"limit": 1, "limit": 2}', "given more than once"),
    (CREATE, '{"name": "x", "a": "\\ud800"}', "unpaired UTF-16 surrogate"),
    (CREATE, '{"name": "x", "a": ["\\udc00\\ud800"]}', "unpaired UTF-16 surrogate"),
    (CREATE, '{"name": "x", "\\ud83d": 1}', "unpaired UTF-16 surrogate"),
]
IDS = [
    "deep-array-field", "deep-array-body", "deep-object-field", "deep-object-limit", "long-int-field",
    "long-int-limit", "long-negative-int-limit", "65-digit-int", "nan-limit", "nan-field", "infinity",
    "minus-infinity", "nan-nested", "infinity-nested-put", "1e400", "minus-1e400-nested", "overflow-limit",
    "duplicate-name", "duplicate-nested", "duplicate-limit", "surrogate", "surrogates-reversed",
    "surrogate-in-name",
]  # fmt: skip


@pytest.mark.parametrize(("route", "raw", "message"), HOSTILE, ids=IDS)
def test_hostile_bodies_are_400_with_the_reason_and_reach_nothing(route, raw, message):
    assert len(raw.encode()) <= MAX_BODY_BYTES
    status, payload, service = answer(route, raw)
    assert_error(status, payload, 400, "ValidationError")
    assert message in json.dumps(payload["error"]["message"])
    assert service.calls == []


@pytest.mark.parametrize("text", [nested(5000), nested(5000, '{"a":', "}"), "[" * 100_000])
def test_nesting_is_measured_without_recursion(text):
    with pytest.raises(ValidationError, match="nested deeper than 32 levels"):
        strict_json(text)


def test_bounds_are_inclusive_and_strings_do_not_count_as_nesting():
    at_bound = nested(MAX_DEPTH - 1)  # inside the top-level object: MAX_DEPTH levels
    biggest = "9" * MAX_INT_DIGITS
    brackets = '"' + "[{" * 200 + '\\"[[[' + '"'
    text = f'{{"name": "x", "deep": {at_bound}, "big": -{biggest}, "s": {brackets}, "f": 1e308, "e": "\\ud83d\\ude00"}}'
    status, payload, service = answer(CREATE, text)
    assert status == 201
    assert payload["big"] == -int(biggest)
    assert payload["f"] == 1e308
    assert payload["e"] == "\U0001f600"
    assert payload["s"] == "[{" * 200 + '"[[['
    assert service.calls[0][1][2]["deep"] == json.loads(at_bound)


def test_the_body_is_parsed_once_and_strictly(monkeypatch):
    calls: list[str] = []
    loads = json.loads
    this_thread = threading.get_ident()

    def counting(text: str, **kwargs: Any) -> Any:
        # (only this test's thread: json.loads is global, and a local runtime an earlier test
        # started may still be polling its stream on threads of its own, parsing their answers)
        if threading.get_ident() == this_thread:
            calls.append(text)
            assert kwargs.get("parse_constant") is not None  # the strict parse, not a plain json.loads
        return loads(text, **kwargs)

    event = event_for(CREATE, '{"name": "x", "tier": "small"}')
    monkeypatch.setattr(json, "loads", counting)
    response = resolve(event, RecordingService())
    assert response["statusCode"] == 201
    assert calls == ['{"name": "x", "tier": "small"}']


@pytest.mark.parametrize("encoded", [False, True], ids=["plain", "base64"])
@pytest.mark.parametrize(
    "raw",
    ["[" * (10 * 1024 * 1024), "not json " * (1024 * 1024 + 1)],
    ids=["10MB-of-brackets", "10MB-of-text"],
)
def test_an_oversize_body_is_refused_before_it_is_decoded_or_parsed(monkeypatch, raw, encoded):
    this_thread = threading.get_ident()

    def must_not_run(real: Any) -> Any:
        # (on this test's thread only: these are global, and a local runtime an earlier test
        # started may still be decoding its stream's answers on threads of its own)
        def guard(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == this_thread:
                raise AssertionError("an oversize body was decoded or parsed")
            return real(*args, **kwargs)

        return guard

    body = base64.b64encode(raw.encode()).decode() if encoded else raw
    event, service = event_for(CREATE, body, isBase64Encoded=encoded), RecordingService()
    with monkeypatch.context() as patched:
        patched.setattr(json, "loads", must_not_run(json.loads))
        patched.setattr(body_module, "strict_json", must_not_run(body_module.strict_json))
        patched.setattr(base64, "b64decode", must_not_run(base64.b64decode))
        response = resolve(event, service)
    assert_error(response["statusCode"], json.loads(response["body"]), 400, "ValidationError")
    assert json.loads(response["body"])["error"]["message"] == "request body is larger than 16384 bytes"
    assert service.calls == []


def padded(size: int) -> str:
    """A valid resource body of exactly ``size`` bytes."""
    head = '{"name": "x", "pad": "'
    return head + "y" * (size - len(head) - 2) + '"}'


@pytest.mark.parametrize("encoded", [False, True], ids=["plain", "base64"])
def test_the_limit_is_on_the_decoded_bytes(encoded):
    def body(text: str) -> str:
        return base64.b64encode(text.encode()).decode() if encoded else text

    at_limit, over = padded(MAX_BODY_BYTES), padded(MAX_BODY_BYTES + 1)
    assert answer(CREATE, body(at_limit), isBase64Encoded=encoded)[0] == 201
    status, payload, service = answer(CREATE, body(over), isBase64Encoded=encoded)
    assert_error(status, payload, 400, "ValidationError")
    assert payload["error"]["message"] == "request body is larger than 16384 bytes"
    assert service.calls == []
    # Multi-byte characters count as bytes: 8,193 two-byte characters are over the limit.
    status, payload, _ = answer(CREATE, body('{"name": "' + "é" * 8193 + '"}'), isBase64Encoded=encoded)
    assert payload["error"]["message"] == "request body is larger than 16384 bytes"


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        (base64.b64encode(b'{"name": "\xff"}').decode(), True),
        ("!!not base64!!", True),
        ("éé", True),
        ('{"name": "x", "a": "\ud800"}', False),  # a lone surrogate in the event's string: no UTF-8
    ],
    ids=["base64-of-latin1", "not-base64", "non-ascii-base64", "surrogate-in-event"],
)
def test_a_body_that_is_not_utf8_is_a_400(raw, encoded):
    status, payload, service = answer(CREATE, raw, isBase64Encoded=encoded)
    assert_error(status, payload, 400, "ValidationError")
    assert payload["error"]["message"] == "request body is not UTF-8 encoded JSON"
    assert service.calls == []


def test_base64_bodies_get_the_same_checks():
    def encoded(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    status, payload, service = answer(
        CREATE, encoded('{"name": "b64", "tier": "small"}'), isBase64Encoded=True
    )
    assert (status, payload["tier"]) == (201, "small")
    assert service.calls == [("create", ("acct-demo", "b64", {"tier": "small"}, None))]
    for raw, message in [
        ('{"name": "x", "a": NaN}', "NaN"),
        ('{"name": "x", "a": ' + DEEP_ARRAY + "}", "nested"),
    ]:
        status, payload, service = answer(CREATE, encoded(raw), isBase64Encoded=True)
        assert_error(status, payload, 400, "ValidationError")
        assert message in payload["error"]["message"]
        assert service.calls == []


ROUTES = st.sampled_from([CREATE, LIMIT, PUT])


@given(route=ROUTES, raw=hostile_body(), encoded=st.booleans())
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_hostile_bodies_are_always_a_400_with_the_error_body(route, raw, encoded):
    body = base64.b64encode(raw.encode()).decode() if encoded else raw
    status, payload, service = answer(route, body, isBase64Encoded=encoded)
    assert_error(status, payload, 400, "ValidationError")
    assert service.calls == []


# Short random bytes, and random bytes repeated to around the size limit (drawing 16 KB is slow).
RANDOM_BYTES = st.binary(max_size=64) | st.builds(
    lambda chunk, size: (chunk * (size // len(chunk) + 1))[:size],
    st.binary(min_size=1, max_size=64),
    st.integers(MAX_BODY_BYTES - 400, MAX_BODY_BYTES + 400),
)


@given(route=ROUTES, data=RANDOM_BYTES)
@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_random_bytes_are_a_4xx_with_the_error_body(route, data):
    try:
        event: dict[str, Any] = {"body": data.decode(), "isBase64Encoded": False}
    except UnicodeDecodeError:
        event = {"body": base64.b64encode(data).decode(), "isBase64Encoded": True}
    status, payload, service = answer(route, **event)
    assert_error(status, payload, 400, "ValidationError")
    assert service.calls == []


def test_stored_extra_fields_can_never_hold_non_finite_numbers():
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        pending_item("a", "r", "n", {"x": [float("nan")]}, "inc", now=0)
    # An item written before bodies were parsed strictly is read back as valid JSON (null).
    item = pending_item("a", "r", "n", {"x": 1}, "inc", now=0)
    item["extra_json"] = {"S": '{"x":NaN,"y":[Infinity,-Infinity],"z":1.5}'}
    resource = resource_from_item(item)
    assert resource.extra == {"x": None, "y": [None, None], "z": 1.5}
    json.dumps(resource.to_json(), allow_nan=False)


def test_a_legacy_non_finite_extra_field_is_sent_back_as_null():
    service = RecordingService()

    def legacy(account_id: str, resource_id: str, **_: object) -> Resource:
        item = pending_item(account_id, resource_id, "n", {}, "inc", now=0)
        return resource_from_item({**item, "extra_json": {"S": '{"x":NaN}'}})

    service.get = legacy  # type: ignore[method-assign]
    response = resolve(load_event("api_get_resource.json"), service)
    assert response["statusCode"] == 200
    assert json.loads(response["body"], parse_constant=pytest.fail)["x"] is None
