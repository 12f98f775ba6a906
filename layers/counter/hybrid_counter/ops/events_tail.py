"""`hybrid-counter-ops events tail`: print the quota events QuotaEventsQueue received, and delete them.

The stack's rule QuotaEventsToQueue sends every event with source "hybrid-counter" on the bus to
QuotaEventsQueue, each message an EventBridge event (the envelope: "detail-type", "time",
"detail", ...). `tail()` receives them with long polling, prints one JSON line per event, and
deletes each batch once it is printed: an event is printed at least once (a tail stopped between
printing and deleting prints those again next time), and never deleted unseen. A message that
is not an EventBridge event is printed as {"body": ...} and deleted too. The queue is a standard
queue: events arrive roughly, not strictly, in order.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

MAX_WAIT_SECONDS = 20  # SQS long polling's longest wait
# Received messages stay hidden this long: longer than printing a batch takes, short enough that
# a tail killed before it deleted them hands them on soon.
VISIBILITY_SECONDS = 30


@dataclass(frozen=True)
class TailOptions:
    max_events: int | None = None  # stop after printing this many; None = no limit
    wait_seconds: int = 2  # each receive's long poll
    follow: bool = False  # keep receiving after the queue is empty (until Ctrl-C or max_events)

    def __post_init__(self) -> None:
        if not 0 <= self.wait_seconds <= MAX_WAIT_SECONDS:
            raise ValueError(f"wait_seconds must be between 0 and {MAX_WAIT_SECONDS}")
        if self.max_events is not None and self.max_events < 1:
            raise ValueError("max_events must be at least 1")
        if self.follow and self.wait_seconds < 1:
            raise ValueError("following needs a wait of at least 1 second (long polling)")


def event_line(body: str) -> dict[str, Any]:
    """What is printed for one message: the event's detail-type, time and detail."""
    try:
        event = json.loads(body)
    except json.JSONDecodeError:
        return {"body": body}
    if not isinstance(event, dict) or "detail-type" not in event:
        return {"body": event}
    return {"detail-type": event["detail-type"], "time": event.get("time"), "detail": event.get("detail")}


def tail(
    sqs: Any,
    queue_url: str,
    options: TailOptions,
    out: TextIO | None = None,
    warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
) -> int:
    """Print and delete events until the queue is empty (or, following, until Ctrl-C); returns how many.

    Ctrl-C (KeyboardInterrupt) ends the tail quietly; what was received and not yet printed becomes
    visible again after VISIBILITY_SECONDS. `out`: default sys.stdout (as it is when called).
    """
    out = out or sys.stdout
    printed = 0
    try:
        while options.max_events is None or printed < options.max_events:
            wanted = 10 if options.max_events is None else min(10, options.max_events - printed)
            messages = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=wanted,
                WaitTimeSeconds=options.wait_seconds,
                VisibilityTimeout=VISIBILITY_SECONDS,
            ).get("Messages", [])
            if not messages:
                if options.follow:
                    continue
                break
            for message in messages:
                out.write(json.dumps(event_line(message["Body"]), default=str) + "\n")
            out.flush()
            printed += len(messages)
            _delete(sqs, queue_url, messages, warn)
    except KeyboardInterrupt:
        pass
    return printed


def _delete(sqs: Any, queue_url: str, messages: list[dict[str, Any]], warn: Callable[[str], None]) -> None:
    answer = sqs.delete_message_batch(
        QueueUrl=queue_url,
        Entries=[{"Id": str(index), "ReceiptHandle": m["ReceiptHandle"]} for index, m in enumerate(messages)],
    )
    for failure in answer.get("Failed", []):
        message = messages[int(failure["Id"])]
        warn(f"not deleted (it will be printed again): {message['MessageId']}: {failure.get('Message')}")
