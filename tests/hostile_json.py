"""Hypothesis strategies for request bodies that JSON parsers choke on: nesting far deeper than the
API allows, integers of thousands of digits, NaN and the infinities (and numbers that overflow a
double), names given twice, unpaired surrogates; placed as a limit, as a (nested) extra field of a
resource, or as the whole body. Every body drawn is one the API must refuse with a 400."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from hybrid_counter.api.body import MAX_DEPTH, MAX_INT_DIGITS

NON_FINITE = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1E+999",
    "-0.1e99999",
    "1" + "0" * 400 + ".0",
]
# Each opener with its closer; a nesting repeats a few drawn kinds, so its depth is cheap to draw.
LEVELS = [("[", "]"), ('{"k":', "}"), ("[0,", "]"), ('{"a":1,"b":', "}"), ("[[],", "]")]


@st.composite
def deep_nesting(draw: Any) -> str:
    depth = draw(st.integers(MAX_DEPTH + 1, 5000))
    kinds = draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=3))
    levels = [kinds[i % len(kinds)] for i in range(depth)]
    leaf = draw(st.sampled_from(["1", '"x"', "[]", "{}", "null"]))
    return "".join(o for o, _ in levels) + leaf + "".join(c for _, c in reversed(levels))


@st.composite
def long_integer(draw: Any) -> str:
    digits = draw(st.integers(MAX_INT_DIGITS + 1, 6000))
    pattern = draw(st.text(alphabet="0123456789", min_size=1, max_size=12))
    body = (pattern * (digits // len(pattern) + 1))[: digits - 1]
    return draw(st.sampled_from(["", "-"])) + draw(st.sampled_from("123456789")) + body


@st.composite
def duplicate_name(draw: Any) -> str:
    name = draw(st.text(alphabet="abcxyz_", max_size=5))
    return f'{{"{name}": 1, "other": 2, "{name}": 3}}'


@st.composite
def unpaired_surrogate(draw: Any) -> str:
    code = draw(st.integers(0xD800, 0xDFFF))
    after = "" if code >= 0xDC00 else draw(st.sampled_from(["", "x", "\\u0041", "\\ud800"]))
    return f'"a\\u{code:04x}{after}"'


def hostile_fragment() -> st.SearchStrategy[str]:
    return st.one_of(
        deep_nesting(), long_integer(), st.sampled_from(NON_FINITE), duplicate_name(), unpaired_surrogate()
    )


@st.composite
def placed(draw: Any, fragment: st.SearchStrategy[str]) -> str:
    """The fragment as the limit, as a resource's extra field (under a few levels), or the body."""
    value = draw(fragment)
    for opener, closer in draw(st.lists(st.sampled_from(LEVELS), max_size=5)):
        value = opener + value + closer
    place = draw(st.sampled_from(["limit", "extra", "body"]))
    if place == "limit":
        return f'{{"limit": {value}}}'
    if place == "extra":
        return f'{{"name": "n", "tier": "small", "meta": {value}}}'
    return value


def hostile_body() -> st.SearchStrategy[str]:
    return placed(hostile_fragment())
