"""Integration fixtures: the template's table on DynamoDB Local, and a deterministic stream driver.

The embedded runtime provisions the stack from template.yaml; its pollers are off here so each
test decides when and how stream records are delivered (twice, reordered, by two workers).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest

from hybrid_counter.aws import RETRYING, Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.healing import Healer
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, counter_key, org_pk
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from hybrid_counter.settings import Settings
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.sources.stream_reader import StreamReader
from localrun.stack.aws_clients import domain_clients


@pytest.fixture(scope="session")
def stack() -> Iterator[LocalRuntime]:
    # These tests call the domain; the gateway is up (cold) for the few that go through it.
    options = RuntimeOptions.driven("hybrid-counter-it", start_http=True)
    with LocalRuntime(options) as runtime:
        yield runtime


@pytest.fixture
def clients(stack: LocalRuntime) -> Clients:
    return domain_clients(stack.dynamodb_url)


@pytest.fixture
def settings(stack: LocalRuntime) -> Settings:
    return Settings(table_name=stack.table_name, default_limit=100, pending_grace_seconds=300)


@pytest.fixture
def new_account() -> Callable[[], str]:
    return lambda: f"acct-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def account(new_account: Callable[[], str]) -> str:
    return new_account()


@pytest.fixture
def service(settings: Settings, clients: Clients) -> ResourceService:
    return ResourceService(settings, clients)


@pytest.fixture
def counter(settings: Settings, clients: Clients) -> EventualCounter:
    return EventualCounter(settings.table_name, "batched", clients)


@pytest.fixture
def sweeper_now(settings: Settings, clients: Clients, counter: EventualCounter) -> Sweeper:
    return Sweeper(settings.table_name, counter, grace_seconds=0, clients=clients)


@pytest.fixture(scope="session")
def stream(stack: LocalRuntime) -> StreamReader:
    streams = boto3.client("dynamodbstreams", endpoint_url=stack.dynamodb_url, config=RETRYING)
    return StreamReader(streams, stack.stream_arn)


@pytest.fixture
def drain(stream: StreamReader, counter: EventualCounter) -> Callable[..., None]:
    """Deliver every pending record of the account to the stream path, until nothing is left."""

    def run(account_id: str, settle: bool = True) -> None:
        quiet = 0
        while quiet < (2 if settle else 1):
            records = stream.records_for(account_id)
            if not records:
                quiet += 1
                time.sleep(0.02)
                continue
            quiet = 0
            for start in range(0, len(records), 100):
                outcome = process_stream_batch(records[start : start + 100], counter)
                assert outcome.failed_sequence_numbers == [], outcome.error

    return run


@pytest.fixture
def drain_org(stream: StreamReader, counter: EventualCounter) -> Callable[[str], None]:
    """Deliver every pending record of an organization's partition (its counter items)."""

    def run(org_id: str) -> None:
        while records := stream.records_of(org_pk(org_id)):
            for start in range(0, len(records), 100):
                outcome = process_stream_batch(records[start : start + 100], counter)
                assert outcome.failed_sequence_numbers == [], outcome.error

    return run


@pytest.fixture
def live_count(settings: Settings, clients: Clients) -> Callable[[str], int]:
    """Resources a client can see (items.visible: live, or claimed by a delete that is neither
    released at its account nor left to the census of its range)."""

    def count(account_id: str) -> int:
        paginator = clients.dynamodb.get_paginator("query")
        total = 0
        for page in paginator.paginate(
            TableName=settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": RESOURCE_PREFIX},
            },
            ConsistentRead=True,
        ):
            total += sum(1 for item in page["Items"] if resource_items.visible(item))
        return total

    return count


@pytest.fixture
def settle(
    settings: Settings, clients: Clients, counter: EventualCounter, drain: Callable[..., None]
) -> Callable[[str], None]:
    """Let the system drain: the stream delivered, the grace period passed (sweep), healed."""

    def run(account_id: str) -> None:
        drain(account_id)
        later = time.time() + 10 * settings.pending_grace_seconds
        Sweeper(
            settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
        ).sweep()
        drain(account_id)
        Healer(settings.table_name, clients).heal_account(account_id)

    return run


@pytest.fixture
def set_counter(settings: Settings, clients: Clients) -> Callable[..., None]:
    """Stage drift or corruption: set a counter to a value, moving its share in range 0 by the
    same amount so the shares still sum to the total (as every real write keeps them)."""

    def write(account_id: str, **values: int) -> None:
        item = clients.dynamodb.get_item(
            TableName=settings.table_name, Key=counter_key(account_id), ConsistentRead=True
        ).get("Item", {})
        share = {"best_effort": "b0", "eventual": "e0"}
        updates: dict[str, int] = {}
        for name, value in values.items():
            delta = value - int(item.get(name, {"N": "0"})["N"])
            updates[name] = value
            updates[share[name]] = int(item.get(share[name], {"N": "0"})["N"]) + delta
        clients.dynamodb.update_item(
            TableName=settings.table_name,
            Key=counter_key(account_id),
            UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in updates) + " ADD v0 :one",
            ExpressionAttributeNames={f"#{k}": k for k in updates},
            ExpressionAttributeValues={
                **{f":{k}": {"N": str(v)} for k, v in updates.items()},
                ":one": {"N": "1"},
            },
        )

    return write
