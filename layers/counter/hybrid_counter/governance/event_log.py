"""The event log: every event published, newest first, for operators (`GET /events`), kept by
the write that takes an event off the outbox and read from one sparse index, never by a Scan.

An event leaves the outbox (publisher.py) with one conditional UpdateItem of the item that kept
it (``LimitChanges.publish``), made once EventBridge has accepted it. That same update writes the
attributes below (``take_off``), so the log is exactly as current as publication: an event never
published is never in it, and one published twice (the sweeper's republish after a lost take-off)
is in it once, since only the first take-off finds the event still in the outbox.

- ``EventsIndex``: ``events_day`` = "<yyyy-mm-dd of publication>#<n>", n a hash of the event id in
  0..EVENT_SHARDS-1 (a burst, e.g. a plan change crossing many accounts' thresholds, spreads over
  EVENT_SHARDS partitions), range ``events_at`` = "<publication time>#<event id>": one total order
  over every partition, so a page's place is one range key. It projects ``events_log`` only (the
  event's JSON), so a page is read from the index alone.
- A threshold crossing's ``EVENT#`` item, which is nothing but the event, expires (``expires_at``,
  the table's TTL) EventLogDays after its publication; a limit change's history item keeps its own
  retention (HistoryRetentionDays). The route reads the day partitions back to ``since``, at most
  EventLogDays, so what the log answers is the same whichever item kept the event.
"""

from __future__ import annotations

import heapq
import json
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hybrid_counter.errors import ValidationError
from hybrid_counter.governance.paging import decode_place, encode_place, newest_first
from hybrid_counter.keys import EVENT_PREFIX, iso_utc

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.governance.publisher import OutboxEvent

EVENTS_INDEX = "EventsIndex"
EVENTS_DAY, EVENTS_AT, EVENTS_LOG = "events_day", "events_at", "events_log"
EXPIRES_AT = "expires_at"  # the table's TTL attribute (template.yaml)
EVENT_SHARDS = 4
MAX_PAGE = 100
DAY = 86_400


def event_shard(event_id: str) -> int:
    return zlib.crc32(event_id.encode()) % EVENT_SHARDS


@dataclass(frozen=True)
class TakeOff:
    """What the take-off's UpdateExpression SETs, and the values it names."""

    sets: tuple[str, ...]
    values: dict[str, dict[str, str]]


def take_off(event: OutboxEvent, published: float, *, log_days: int) -> TakeOff:
    """The event's place in the log, published at ``published`` (epoch seconds); an ``EVENT#``
    item (the event alone) expires ``log_days`` after it. Set at take-off, not at the item's
    creation, so an event that waits in the outbox never expires unpublished."""
    at = iso_utc(published)
    values: dict[str, dict[str, str]] = {
        f":{EVENTS_DAY}": {"S": f"{at[:10]}#{event_shard(event.event_id)}"},
        f":{EVENTS_AT}": {"S": f"{at}#{event.event_id}"},
        f":{EVENTS_LOG}": {"S": event.text()},
    }
    if str(event.key["sk"]["S"]).startswith(EVENT_PREFIX):
        values[f":{EXPIRES_AT}"] = {"N": str(int(published) + log_days * DAY)}
    return TakeOff(tuple(f"{name[1:]} = {name}" for name in values), values)


@dataclass(frozen=True)
class LoggedEvent:
    event_id: str
    detail_type: str
    time: str  # when it was published (taken off the outbox)
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "detail_type": self.detail_type,
            "time": self.time,
            "detail": self.detail,
        }

    @classmethod
    def of(cls, item: dict[str, Any]) -> LoggedEvent:
        stored = json.loads(item[EVENTS_LOG]["S"])
        at, _, event_id = str(item[EVENTS_AT]["S"]).partition("#")
        return cls(event_id, stored["detail_type"], at, stored["detail"])


@dataclass(frozen=True)
class EventPage:
    rows: list[LoggedEvent]
    next_token: str | None


class EventLog:
    """The log's reads: per day from the newest, the day's EVENT_SHARDS partitions merged."""

    def __init__(self, table_name: str, clients: Clients, *, log_days: int, clock: Any) -> None:
        self._table = table_name
        self._clients = clients
        self._days = log_days
        self._clock = clock

    def page(
        self, *, since: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> EventPage:
        """The events published at or after ``since`` (default: 24 hours ago; at most log_days
        back), newest first. A day's partitions are read only while the page is not full: each
        Query reads at most the rows still wanted + 1 (the one more says whether more is left)."""
        if not 1 <= page_size <= MAX_PAGE:
            raise ValidationError(f"limit must be between 1 and {MAX_PAGE}")
        now = datetime.fromtimestamp(self._clock(), UTC)
        start = now - timedelta(days=1) if since is None else _parse_time(since)
        if start < now - timedelta(days=self._days):
            raise ValidationError(
                f"since must be within the last {self._days} days (EventLogDays): "
                "the log keeps no older events"
            )
        lower = iso_utc(start.timestamp())
        before = _decode(next_token) if next_token else None
        if before is not None and before < lower:
            return EventPage(
                [], None
            )  # a place older than since: nothing between (BETWEEN needs lower <= upper)
        newest = now if before is None else min(now, _parse_time(before.split("#", 1)[0]))
        found: list[dict[str, Any]] = []
        day = newest.date()
        while day >= start.date() and len(found) <= page_size:
            wanted = page_size + 1 - len(found)
            read = [self._query(f"{day.isoformat()}#{n}", lower, before, wanted) for n in range(EVENT_SHARDS)]
            found += list(heapq.merge(*read, key=_place, reverse=True))[:wanted]
            day -= timedelta(days=1)
        taken = found[:page_size]
        token = encode_place(_place(taken[-1])) if len(found) > page_size else None
        return EventPage([LoggedEvent.of(item) for item in taken], token)

    def _query(self, partition: str, lower: str, before: str | None, wanted: int) -> list[dict[str, Any]]:
        """Up to ``wanted`` items of one partition at or after ``lower`` and before ``before``,
        newest first. Reads on until it has them (a Query may stop early at 1 MB). A key
        condition has no "between, exclusive above": BETWEEN then drops the one item equal to
        ``before`` (the last row of the page before), at most one item read more."""
        values: dict[str, Any] = {":h": {"S": partition}, ":lower": {"S": lower}}
        if before is None:
            condition = "#h = :h AND #r >= :lower"
        else:
            condition = "#h = :h AND #r BETWEEN :lower AND :before"
            values[":before"] = {"S": before}
        query = {
            "TableName": self._table,
            "IndexName": EVENTS_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#h": EVENTS_DAY, "#r": EVENTS_AT},
            "ExpressionAttributeValues": values,
        }
        extra = 0 if before is None else 1
        return newest_first(
            self._clients, query, wanted, extra=extra, keep=lambda item: _place(item) != before
        )


def _place(item: dict[str, Any]) -> str:
    return str(item[EVENTS_AT]["S"])


def _parse_time(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise ValidationError(f"since must be an ISO 8601 time, not {text!r}") from error
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


# The range key a page ended on: the publication time (ISO 8601 UTC, milliseconds) and the event id.
_PLACE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z#[\x21-\x7e]{1,300}")


def _decode(token: str) -> str:
    """The range key a page ended on, strictly (a token not made here is refused)."""
    return decode_place(token, _PLACE)
