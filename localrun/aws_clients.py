"""boto3 clients for the local endpoints (dummy credentials, fixed region)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from localrun.template import REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_sqs import SQSClient

DUMMY_ACCESS_KEY_ID = "localrun"
DUMMY_SECRET_ACCESS_KEY = "localrun"  # noqa: S105 - not a secret: the local endpoints accept anything

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=2,
    read_timeout=20,  # above SQS long polling's WaitTimeSeconds
    max_pool_connections=20,
)


def _session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        region_name=REGION,
    )


def client(service: str, endpoint_url: str, config: Config | None = None) -> Any:
    """Any service's client for a local endpoint: no region or credentials needed from the machine."""
    return _session().client(service, endpoint_url=endpoint_url, config=config or _CONFIG)  # type: ignore[call-overload]


def dynamodb_client(endpoint_url: str, config: Config | None = None) -> DynamoDBClient:
    return _session().client("dynamodb", endpoint_url=endpoint_url, config=config or _CONFIG)


def streams_client(endpoint_url: str, config: Config | None = None) -> DynamoDBStreamsClient:
    return _session().client("dynamodbstreams", endpoint_url=endpoint_url, config=config or _CONFIG)


def sqs_client(endpoint_url: str, config: Config | None = None) -> SQSClient:
    return _session().client("sqs", endpoint_url=endpoint_url, config=config or _CONFIG)
