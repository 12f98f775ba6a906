"""DynamoDB's size and capacity rules, for the benchmark's cost figures and the item-size checks.

Item size (AWS, "Item sizes and formats"): the sum of each attribute's name length and value
size; a string is its UTF-8 length, a number about one byte per two significant digits plus
one, a boolean or null one byte, a list or map three bytes plus one per element plus its
elements. A write costs one write unit per started KB of the larger of the item before and
after (two per KB in a transaction); a strongly consistent read one read unit per started 4 KB
(half for eventually consistent, two for transactional).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

KB = 1024


def _number_size(text: str) -> int:
    digits = Decimal(text).normalize()
    significant = len(digits.as_tuple().digits)
    return 1 + math.ceil(significant / 2)


def _text_size(data: Any) -> int:
    return len(data) if isinstance(data, bytes) else len(str(data).encode())


_SIZES: dict[str, Any] = {
    "S": _text_size,
    "B": _text_size,
    "N": lambda data: _number_size(str(data)),
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
    "SS": lambda data: sum(_text_size(member) for member in data),
    "BS": lambda data: sum(_text_size(member) for member in data),
    "NS": lambda data: sum(_number_size(str(member)) for member in data),
    "L": lambda data: 3 + sum(1 + value_size(member) for member in data),
    "M": lambda data: 3 + sum(1 + len(name.encode()) + value_size(member) for name, member in data.items()),
}


def value_size(value: Mapping[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind not in _SIZES:
        raise ValueError(f"unknown attribute value type {kind!r}")
    return int(_SIZES[kind](data))


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size_before: int, size_after: int, *, transactional: bool = False) -> int:
    units = max(1, math.ceil(max(size_before, size_after) / KB))
    return 2 * units if transactional else units


def read_units(size: int, *, consistent: bool = True, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / (4 * KB)))
    if transactional:
        return 2.0 * units
    return float(units) if consistent else units / 2
