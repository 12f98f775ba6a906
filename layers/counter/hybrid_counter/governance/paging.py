"""Pages of a sparse, write-sharded index read newest first (usage_over.py, event_log.py).

Each listing merges its partitions by range key; a page's ``next_token`` is the range key it
ended on, encoded, and is decoded strictly against the listing's own pattern, so a token not
made by it is refused and never handed to DynamoDB.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hybrid_counter.errors import ValidationError

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients


def encode_place(place: str) -> str:
    return base64.urlsafe_b64encode(place.encode()).decode()


def decode_place(token: str, pattern: re.Pattern[str]) -> str:
    """The range key a page ended on, if ``token`` encodes one that ``pattern`` matches whole."""
    try:
        place = base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise ValidationError("next_token is not valid") from error
    if not pattern.fullmatch(place):
        raise ValidationError("next_token is not valid")
    return place


def newest_first(
    clients: Clients,
    query: dict[str, Any],
    wanted: int,
    *,
    extra: int = 0,
    keep: Callable[[dict[str, Any]], bool] = lambda _: True,
) -> list[dict[str, Any]]:
    """Up to ``wanted`` kept items of one partition's ``query`` (its table, index and key
    condition), newest first. Reads on until it has them (a Query may stop early at 1 MB), so a
    merge never passes over an item a partition did not return. ``extra``: items each Query may
    read beyond those still wanted, for those ``keep`` drops."""
    found: list[dict[str, Any]] = []
    start: dict[str, Any] | None = None
    while True:
        page: dict[str, Any] = {**query, "ScanIndexForward": False, "Limit": wanted - len(found) + extra}
        if start:
            page["ExclusiveStartKey"] = start
        response = clients.dynamodb.query(**page)
        found += [item for item in response.get("Items", []) if keep(item)]
        start = response.get("LastEvaluatedKey")
        if not start or len(found) >= wanted:
            return found[:wanted]
