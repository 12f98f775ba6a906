"""boto3 clients for the local endpoints (dummy credentials, fixed region)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import botocore.session
from botocore.config import Config

from hybrid_counter.aws import RETRYING, SINGLE_ATTEMPT, Clients
from localrun.stack.template import REGION

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


_LOADER: list[Any] = []  # one botocore data loader for every session made here (below)


def _session() -> boto3.Session:
    """A session of its own for each client (a boto3 Session is not safe to share across
    threads), sharing one data loader: a fresh loader scans botocore's data directories and parses
    the service's model again, about 0.1 s of CPU a client (0.016 s shared), and tests make
    thousands."""
    core = botocore.session.get_session()
    if not _LOADER:
        _LOADER.append(core.get_component("data_loader"))
    core.register_component("data_loader", _LOADER[0])
    return boto3.Session(
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        region_name=REGION,
        botocore_session=core,
    )


def client(service: str, endpoint_url: str, config: Config | None = None) -> Any:
    """Any service's client for a local endpoint: no region or credentials needed from the machine."""
    return _session().client(service, endpoint_url=endpoint_url, config=config or _CONFIG)  # type: ignore[call-overload]


def dynamodb_client(endpoint_url: str, config: Config | None = None) -> DynamoDBClient:
    return client("dynamodb", endpoint_url, config)  # type: ignore[no-any-return]


def streams_client(endpoint_url: str, config: Config | None = None) -> DynamoDBStreamsClient:
    return client("dynamodbstreams", endpoint_url, config)  # type: ignore[no-any-return]


def sqs_client(endpoint_url: str, config: Config | None = None) -> SQSClient:
    return client("sqs", endpoint_url, config)  # type: ignore[no-any-return]


def events_client(endpoint_url: str, config: Config | None = None) -> Any:
    """EventBridge (moto): untyped, the project installs no stubs for it."""
    return client("events", endpoint_url, config)


def domain_clients(endpoint_url: str, extra: Config | None = None) -> Clients:
    """The domain's clients for a local DynamoDB (retrying, single attempt, streams), each
    configured as in Lambda; ``extra`` is merged into the two DynamoDB ones (a bigger pool)."""

    def merged(config: Config) -> Config:
        return config.merge(extra) if extra is not None else config

    return Clients(
        dynamodb=dynamodb_client(endpoint_url, merged(RETRYING)),
        dynamodb_single_attempt=dynamodb_client(endpoint_url, merged(SINGLE_ATTEMPT)),
        streams=streams_client(endpoint_url, RETRYING),
    )
