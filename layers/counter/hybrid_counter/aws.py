"""boto3 clients with the retry behaviour each kind of write can tolerate.

Idempotent writes (conditional on state, or guarded by a token) may be retried
blindly by botocore. The best-effort increment may not: a retry after a timeout
whose first attempt took effect would count one resource twice, so it gets a
client with a single attempt and retries only errors that prove nothing was
written (throttling).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

RETRYING = Config(retries={"mode": "standard", "total_max_attempts": 5}, connect_timeout=2, read_timeout=5)
SINGLE_ATTEMPT = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=2, read_timeout=5
)

# Error codes that DynamoDB returns only when the request was not applied.
NOT_APPLIED_ERRORS = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


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
