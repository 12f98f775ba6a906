"""`hybrid-counter-ops events tail`: print the quota events QuotaEventsQueue received, and delete them.

The stack's rule QuotaEventsToQueue sends every event with source "hybrid-counter" on the bus to
QuotaEventsQueue, each message an EventBridge event (the envelope: "detail-type", "time",
"detail", ...). `tail()` receives them with long polling, prints one JSON line per event, and
deletes each batch once it is printed: an event is printed at least once (a tail stopped between
printing and deleting prints those again next time), and never deleted unseen. A message that
is not an EventBridge event is printed as {"body": ...} and deleted too. The queue is a standard
queue: events arrive roughly, not strictly, in order.

Following (`follow=True`) runs until Ctrl-C or `max_events`, for hours, with or without traffic:
each receive long-polls on a client whose read timeout outlasts the poll (`LONG_POLLING`), and a
failure botocore's standard retry mode calls transient or throttling (connection refused or reset,
a read timeout, throttling, a 5xx) is noted on stderr and tried again after a capped backoff,
instead of ending the tail. With `reopen`, each retry first makes the client and queue URL anew
(`--local`: from `make dev`'s state file, since a restarted `make dev` listens on new ports).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker, TransientRetryableChecker

MAX_WAIT_SECONDS = 20  # SQS long polling's longest wait
# The client for long polls: a read timeout shorter than the poll would cut every empty poll short
# (botocore retries that as a read timeout, then gives up).
LONG_POLLING = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=2,
    read_timeout=MAX_WAIT_SECONDS + 10,
)
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 10.0
_RETRYABLE = (TransientRetryableChecker(), ThrottledRetryableChecker())
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


class QueueUnavailable(Exception):
    """The queue cannot be reached for now (for --local: `make dev` is not running); try again later."""


Reopen = Callable[[], tuple[Any, str]]  # -> (an SQS client, the queue URL), made anew


def is_transient(error: Exception) -> bool:
    """Whether a failed call may succeed if tried again later: what botocore's standard retry mode
    calls transient or throttling (it has already spent its own attempts), or a 5xx."""
    if isinstance(error, QueueUnavailable):
        return True
    if isinstance(error, ClientError):
        context = RetryContext(attempt_number=1, parsed_response=error.response)
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if status >= 500:
            return True
    else:
        context = RetryContext(attempt_number=1, caught_exception=error)
    return any(checker.is_retryable(context) for checker in _RETRYABLE)


@dataclass
class Backoff:
    """Doubling pauses between retries, capped; back to the first after a success."""

    first: float = FIRST_RETRY_SECONDS
    cap: float = MAX_RETRY_SECONDS
    _next: float = 0.0

    def pause(self) -> float:
        delay = self._next or self.first
        self._next = min(delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        self._next = 0.0


def tail(
    sqs: Any,
    queue_url: str,
    options: TailOptions,
    out: TextIO | None = None,
    warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    *,
    reopen: Reopen | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print and delete events until the queue is empty (or, following, until Ctrl-C); returns how many.

    Ctrl-C (KeyboardInterrupt) ends the tail quietly; what was received and not yet printed becomes
    visible again after VISIBILITY_SECONDS. `out`: default sys.stdout (as it is when called).
    Following, transient failures are noted through `warn` and retried (see the module's docstring);
    any other failure, and any failure when not following, is raised.
    """
    out = out or sys.stdout
    printed = 0
    backoff = Backoff()
    try:
        while options.max_events is None or printed < options.max_events:
            wanted = 10 if options.max_events is None else min(10, options.max_events - printed)
            try:
                messages = sqs.receive_message(
                    QueueUrl=queue_url,
                    MaxNumberOfMessages=wanted,
                    WaitTimeSeconds=options.wait_seconds,
                    VisibilityTimeout=VISIBILITY_SECONDS,
                ).get("Messages", [])
            except (BotoCoreError, ClientError) as error:
                if not (options.follow and is_transient(error)):
                    raise
                sqs, queue_url = _wait_and_retry(
                    error, (sqs, queue_url), backoff=backoff, warn=warn, sleep=sleep, reopen=reopen
                )
                continue
            backoff.reset()
            if not messages:
                if options.follow:
                    continue
                break
            for message in messages:
                out.write(json.dumps(event_line(message["Body"]), default=str) + "\n")
            out.flush()
            printed += len(messages)
            _delete(sqs, queue_url, messages, warn, following=options.follow)
    except KeyboardInterrupt:
        pass
    return printed


def _wait_and_retry(
    error: Exception,
    current: tuple[Any, str],
    *,
    backoff: Backoff,
    warn: Callable[[str], None],
    sleep: Callable[[float], None],
    reopen: Reopen | None,
) -> tuple[Any, str]:
    """Note the failure, pause, and (with `reopen`) make the client and queue URL anew."""
    delay = backoff.pause()
    warn(f"events tail: cannot receive ({_describe(error)}); retrying in {delay:g} s")
    sleep(delay)
    if reopen is None:
        return current
    try:
        return reopen()
    except (QueueUnavailable, BotoCoreError, ClientError) as reopening:
        warn(f"events tail: {_describe(reopening)}")
        return current


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if not isinstance(error, QueueUnavailable) else str(error)


def _delete(
    sqs: Any, queue_url: str, messages: list[dict[str, Any]], warn: Callable[[str], None], *, following: bool
) -> None:
    try:
        answer = sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": m["ReceiptHandle"]} for index, m in enumerate(messages)
            ],
        )
    except (BotoCoreError, ClientError) as error:
        if not (following and is_transient(error)):
            raise
        warn(
            f"events tail: {len(messages)} events not deleted (they will be printed again): {_describe(error)}"
        )
        return
    for failure in answer.get("Failed", []):
        message = messages[int(failure["Id"])]
        warn(f"not deleted (it will be printed again): {message['MessageId']}: {failure.get('Message')}")
