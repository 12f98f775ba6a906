"""Integration fixtures: the template's table on DynamoDB Local, and a deterministic stream driver.

The embedded runtime provisions the stack from template.yaml; its pollers are off here so each
test decides when and how stream records are delivered (twice, reordered, by two workers).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from hybrid_counter.aws import RETRYING, SINGLE_ATTEMPT, Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, counter_key
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings
from localrun.runtime import LocalRuntime, RuntimeOptions


@pytest.fixture(scope="session")
def stack() -> Iterator[LocalRuntime]:
    options = RuntimeOptions(
        port=0,
        stack_name="hybrid-counter-it",
        start_stream_pollers=False,
        start_queue_pollers=False,
        start_schedules=False,
    )
    with LocalRuntime(options) as runtime:
        yield runtime


@pytest.fixture
def clients(stack: LocalRuntime) -> Clients:
    url = stack.dynamodb_url
    return Clients(
        dynamodb=boto3.client("dynamodb", endpoint_url=url, config=RETRYING),
        dynamodb_single_attempt=boto3.client("dynamodb", endpoint_url=url, config=SINGLE_ATTEMPT),
        streams=boto3.client("dynamodbstreams", endpoint_url=url, config=RETRYING),
    )


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


class StreamReader:
    """Reads the table's stream (all shards) and hands out each account's new records once."""

    def __init__(self, streams: Any, arn: str) -> None:
        self.arn = arn
        self._streams = streams
        self._iterators: dict[str, str | None] = {}
        self._by_account: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._cursor: dict[str, int] = defaultdict(int)
        self._shard: dict[str, str] = {}
        self._lock = threading.Lock()

    def _poll(self) -> None:
        shards = self._streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self.arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
        for shard_id, start in list(self._iterators.items()):
            iterator = start
            while iterator:
                page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                iterator = page.get("NextShardIterator")
                for record in page["Records"]:
                    pk = record["dynamodb"]["Keys"]["pk"]["S"]
                    self._by_account[pk].append(record)
                    self._shard[record["dynamodb"]["SequenceNumber"]] = shard_id
                if not page["Records"]:
                    break
            self._iterators[shard_id] = iterator

    def records_for(self, account_id: str) -> list[dict[str, Any]]:
        with self._lock:
            self._poll()
            pk = account_pk(account_id)
            records = self._by_account[pk][self._cursor[pk] :]
            self._cursor[pk] = len(self._by_account[pk])
            return records

    def shard_of(self, record: dict[str, Any]) -> str:
        return self._shard[record["dynamodb"]["SequenceNumber"]]


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
def live_count(settings: Settings, clients: Clients) -> Callable[[str], int]:
    def count(account_id: str) -> int:
        paginator = clients.dynamodb.get_paginator("query")
        total = 0
        for page in paginator.paginate(
            TableName=settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            FilterExpression="deleted = :false",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": RESOURCE_PREFIX},
                ":false": {"BOOL": False},
            },
            ConsistentRead=True,
            Select="COUNT",
        ):
            total += page["Count"]
        return total

    return count


@pytest.fixture
def set_counter(settings: Settings, clients: Clients) -> Callable[..., None]:
    """Overwrite counter attributes directly, to stage drift or corruption."""

    def write(account_id: str, **values: int) -> None:
        clients.dynamodb.update_item(
            TableName=settings.table_name,
            Key=counter_key(account_id),
            UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in values),
            ExpressionAttributeNames={f"#{k}": k for k in values},
            ExpressionAttributeValues={f":{k}": {"N": str(v)} for k, v in values.items()},
        )

    return write
