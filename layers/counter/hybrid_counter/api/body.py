"""Strict JSON for request bodies.

A request body is checked in two steps, both before Powertools validates it against the models:

1. ``reject_oversize``, a middleware, measures the body as it arrived (base64 or not) and refuses
   one over ``MAX_BODY_BYTES`` before anything decodes or parses it; a body that is not UTF-8 is
   refused here too.
2. ``strict_json`` is the resolver's JSON deserializer: the one parse of the body, which refuses
   what Python's ``json`` would read but JSON (RFC 8259) or its interoperable profile I-JSON
   (RFC 7493) does not allow, and what would make the parser itself fail:

   - ``NaN``, ``Infinity`` and ``-Infinity``, and numbers that overflow a double (``1e400``):
     stored, they would be sent back as invalid JSON;
   - integers of more than ``MAX_INT_DIGITS`` digits (CPython refuses over 4,300 with a
     ValueError that no caller should be able to trigger);
   - nesting deeper than ``MAX_DEPTH``, found by a scan that does not recurse before the parser
     (which does, and raises RecursionError near 1,000 levels) sees the body;
   - a name given twice in one object: readers disagree on which one counts, so the body is
     ambiguous rather than "the last one wins";
   - strings holding an unpaired UTF-16 surrogate (``"\\ud800"``), which is no Unicode text.

Every refusal is a ``ValidationError`` (400, the API's error body). Malformed JSON still raises
``json.JSONDecodeError``, which Powertools reports as a validation error of its own.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections import Counter
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from hybrid_counter.errors import ValidationError

MAX_BODY_BYTES = 16 * 1024
# The longest base64 text of a body within the limit; longer is refused without being decoded.
MAX_BASE64_CHARS = 4 * -(-MAX_BODY_BYTES // 3)
# A limit is at most 10 digits; 64 leaves room for any id or counter a caller keeps in an extra
# field (a 128-bit id has 39) while int() stays trivially cheap and far from CPython's 4,300.
MAX_INT_DIGITS = 64
# The top-level object is level 1. DynamoDB nests maps and lists at most 32 levels, so extra fields
# could one day be stored as a map; far below the ~1,000 levels where Python's json, reading or
# writing, recurses too deep.
MAX_DEPTH = 32

NOT_UTF8 = "request body is not UTF-8 encoded JSON"
TOO_LARGE = f"request body is larger than {MAX_BODY_BYTES} bytes"

# An escape (skipped: it may be \" inside a string), a quote, or a bracket.
_STRUCTURE = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def reject_oversize(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response[Any]:
    check_size(app.current_event.body, bool(app.current_event.is_base64_encoded))
    return next_middleware(app)


def check_size(body: str | None, is_base64: bool) -> None:
    """Refuse a body over MAX_BODY_BYTES, measuring before decoding, and one that is not UTF-8."""
    if not body:
        return
    if len(body) > (MAX_BASE64_CHARS if is_base64 else MAX_BODY_BYTES):
        raise ValidationError(TOO_LARGE)  # every character is at least one byte (or 3/4 of one)
    try:
        raw = base64.b64decode(body, validate=True) if is_base64 else body.encode()
        if len(raw) > MAX_BODY_BYTES:
            raise ValidationError(TOO_LARGE)
        raw.decode()
    except ValueError as error:  # not base64 (binascii.Error), not UTF-8 (UnicodeError)
        raise ValidationError(NOT_UTF8) from error


def strict_json(text: str) -> Any:
    """``json.loads`` for request bodies: refuses what the module docstring lists."""
    if _deeper_than(text, MAX_DEPTH):
        raise _refused(f"nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(
            text,
            parse_constant=_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
            object_pairs_hook=_unique_names,
        )
    except RecursionError as error:  # the scan above makes this unreachable; a last defence
        raise _refused(f"nested deeper than {MAX_DEPTH} levels") from error
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError as error:
            raise _refused("a string holds an unpaired UTF-16 surrogate") from error
    return value


def _deeper_than(text: str, bound: int) -> bool:
    """Whether brackets outside strings nest deeper than ``bound``: a loop, never recursion."""
    depth = 0
    in_string = False
    for match in _STRUCTURE.finditer(text):
        mark = match.group()
        if mark == '"':
            in_string = not in_string
        elif in_string or mark[0] == "\\":
            continue
        elif mark in "[{":
            depth += 1
            if depth > bound:
                return True
        else:
            depth -= 1
    return False


def _refused(reason: str) -> ValidationError:
    return ValidationError(f"body: {reason}")


def _constant(name: str) -> Any:
    raise _refused(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise _refused(f"number out of range: {literal[:32]}")
    return number


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise _refused(f"integer of more than {MAX_INT_DIGITS} digits")
    return int(literal)


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        twice = next(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        raise _refused(f"field {json.dumps(twice[:64])} is given more than once")
    return value
