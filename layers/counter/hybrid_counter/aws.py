"""boto3 clients, and what a failed DynamoDB call tells us about whether it took effect.

Every write is classified after a failure as *not applied* (throttling, a conflict with a
transaction in progress on the item, a connection that was never made: retrying is safe),
*unknown* (a timeout or reset after the request left, a 5xx: it may have taken effect) or a
condition failure the caller interprets. The counter writes that are not idempotent (the
admission and the release) run on a client without botocore retries and are retried here only
when the failure proves nothing was written; the idempotent writes (each conditional on the
state it changes) use botocore's retries plus a retry of transaction conflicts, which botocore's
standard mode does not retry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.exceptions import ConnectionError as NotConnectedError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

RETRYING = Config(retries={"mode": "standard", "total_max_attempts": 5}, connect_timeout=2, read_timeout=5)
SINGLE_ATTEMPT = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=2, read_timeout=5
)

CONDITION_FAILED = "ConditionalCheckFailedException"
THROTTLING_ERRORS = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)
# A single-item write that meets a transaction in progress on the same item is refused whole.
CONFLICT_ERRORS = frozenset({"TransactionConflictException", "TransactionInProgressException"})
NOT_APPLIED_ERRORS = THROTTLING_ERRORS | CONFLICT_ERRORS


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class Effect(Enum):
    NOT_APPLIED = "not_applied"
    UNKNOWN = "unknown"
    CONDITION_FAILED = "condition_failed"
    REFUSED = "refused"  # a 4xx that is neither: a bug, not a state of the world


def effect_of(error: Exception) -> Effect:
    """Whether a failed DynamoDB write may have taken effect."""
    if isinstance(error, ClientError):
        code = error_code(error)
        if code == CONDITION_FAILED:
            return Effect.CONDITION_FAILED
        if code in NOT_APPLIED_ERRORS:
            return Effect.NOT_APPLIED
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return Effect.UNKNOWN if status >= 500 or status == 0 else Effect.REFUSED
    if isinstance(error, NotConnectedError):
        return Effect.NOT_APPLIED  # no connection was made, so nothing was sent
    if isinstance(error, BotoCoreError):
        return Effect.UNKNOWN
    raise TypeError(f"not an AWS error: {error!r}")


@dataclass(frozen=True)
class Attempted:
    """What came of a write tried until it applied or could be known not to have."""

    effect: Effect | None  # None: applied
    response: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None

    @property
    def applied(self) -> bool:
        return self.effect is None

    @property
    def throttled(self) -> bool:
        return (
            self.effect is Effect.NOT_APPLIED
            and isinstance(self.error, ClientError)
            and error_code(self.error) in NOT_APPLIED_ERRORS
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often a write refused without effect is tried again, and how long to pause."""

    attempts: int = 6
    first_delay: float = 0.02
    max_delay: float = 0.5
    sleep: Callable[[float], None] = time.sleep


def attempt_write(call: Callable[[], Any], policy: RetryPolicy) -> Attempted:
    """Run ``call`` until it applies, retrying only failures that prove it did not.

    A condition failure is returned to the caller (with the response's error), never retried.
    """
    delay = policy.first_delay
    last: Exception | None = None
    for attempt in range(policy.attempts):
        try:
            return Attempted(None, dict(call() or {}))
        except (ClientError, BotoCoreError) as error:
            effect = effect_of(error)
            if effect is Effect.REFUSED:
                raise
            if effect is not Effect.NOT_APPLIED:
                return Attempted(effect, error=error)
            last = error
        if attempt < policy.attempts - 1:
            policy.sleep(delay)
            delay = min(delay * 2, policy.max_delay)
    return Attempted(Effect.NOT_APPLIED, error=last)


def retry_conflicts[T](call: Callable[[], T], policy: RetryPolicy) -> T:
    """An idempotent write on a retrying client, also retried on transaction conflicts."""
    delay = policy.first_delay
    for attempt in range(policy.attempts):
        try:
            return call()
        except ClientError as error:
            if error_code(error) not in CONFLICT_ERRORS or attempt == policy.attempts - 1:
                raise
        policy.sleep(delay)
        delay = min(delay * 2, policy.max_delay)
    raise AssertionError("unreachable")


@dataclass
class Clients:
    """The AWS clients a component uses; pass your own to inject stubs or wrapped clients."""

    dynamodb: DynamoDBClient = field(default_factory=lambda: boto3.client("dynamodb", config=RETRYING))
    dynamodb_single_attempt: DynamoDBClient = field(
        default_factory=lambda: boto3.client("dynamodb", config=SINGLE_ATTEMPT)
    )
    streams: DynamoDBStreamsClient | None = None

    def streams_client(self) -> DynamoDBStreamsClient:
        if self.streams is None:
            self.streams = boto3.client("dynamodbstreams", config=RETRYING)
        return self.streams
