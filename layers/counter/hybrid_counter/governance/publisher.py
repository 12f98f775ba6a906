"""Publishing events to EventBridge, from durable state, at least once.

An event to publish is first written to an item (the *outbox*: a threshold crossing's event
item, a limit change's history item), in the same write that decides it happened, with the
PendingIndex keys. Then it is published (PutEvents) and taken off the outbox. A PutEvents that
fails, wholly or for some entries, leaves those items in the outbox: nothing is dropped, and
nothing waits on it (counting goes on); the sweeper publishes what the PendingIndex still lists.
So an event may be published more than once: each carries ``detail.event_id``, deterministic
(the same crossing or change always has the same id), which consumers dedupe on. EventBridge's
own ``id`` differs per publish.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.observability import Observability

EVENT_SOURCE = "hybrid-counter"
THRESHOLD_REACHED = "Quota Threshold Reached"
THRESHOLD_CLEARED = "Quota Threshold Cleared"
LIMIT_CHANGED = "Quota Limit Changed"
OUTBOX = "event"  # the attribute holding an event to publish (JSON)
PUT_EVENTS_MAX = 10


@dataclass(frozen=True)
class OutboxEvent:
    """An event as kept in the outbox: what to publish, and the item that keeps it."""

    detail_type: str
    detail: dict[str, Any]  # with "event_id"
    key: dict[str, dict[str, str]]  # the item holding it

    @property
    def event_id(self) -> str:
        return str(self.detail["event_id"])

    def text(self) -> str:
        return json.dumps(
            {"detail_type": self.detail_type, "detail": self.detail}, sort_keys=True, separators=(",", ":")
        )

    @classmethod
    def of(cls, item: dict[str, Any]) -> OutboxEvent:
        stored = json.loads(item[OUTBOX]["S"])
        return cls(stored["detail_type"], stored["detail"], {"pk": item["pk"], "sk": item["sk"]})


class EventPublisher:
    def __init__(self, bus_name: str | None, clients: Clients, obs: Observability) -> None:
        self._bus = bus_name
        self._clients = clients
        self._obs = obs

    @property
    def enabled(self) -> bool:
        """No bus configured (tools, some tests): no events are kept or published."""
        return self._bus is not None

    def publish(self, events: list[OutboxEvent]) -> list[OutboxEvent]:
        """Publish; returns the events EventBridge accepted (the rest stay in the outbox)."""
        if not self.enabled or not events:
            return []
        accepted: list[OutboxEvent] = []
        for start in range(0, len(events), PUT_EVENTS_MAX):
            chunk = events[start : start + PUT_EVENTS_MAX]
            entries: list[Any] = [
                {
                    "Source": EVENT_SOURCE,
                    "DetailType": event.detail_type,
                    "Detail": json.dumps(event.detail, sort_keys=True),
                    "EventBusName": self._bus,
                }
                for event in chunk
            ]
            try:
                response = self._clients.events_client().put_events(Entries=entries)
            except (ClientError, BotoCoreError) as error:
                self._obs.count("EventsNotPublished", len(chunk))
                self._obs.logger.warning(
                    "could not publish events; the sweeper will", extra={"error": repr(error)}
                )
                continue
            results = response.get("Entries", [])
            for event, result in zip(chunk, results, strict=False):
                if result.get("EventId") and not result.get("ErrorCode"):
                    accepted.append(event)
            failed = len(chunk) - sum(1 for event in chunk if event in accepted)
            self._obs.count("EventsNotPublished", failed)
        self._obs.count("EventsPublished", len(accepted))
        return accepted
