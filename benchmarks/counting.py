"""Counting benchmark on DynamoDB Local: `make bench`.

Reports machine-independent counts (DynamoDB requests and write units per create/delete,
counter-item writes per counted record) and ratios measured in one run (batched vs per-record
counting, service create rate vs the emulator's raw PutItem rate). Write units follow AWS's
published rules for items under 1 KB (1 per standard write, 2 per item in a transaction);
DynamoDB Local does not apply the transactional doubling in its own ConsumedCapacity.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3

from hybrid_counter.aws import RETRYING, SINGLE_ATTEMPT, Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.keys import COUNTER_SK, account_pk
from hybrid_counter.observability import Observability
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings
from localrun.endpoints import LocalEndpoints
from localrun.provision import provision
from localrun.template import load_template

WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem"}


class RequestMeter:
    """Counts requests, write units and counter-item writes from the requests a client sends."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.write_units = 0
        self.counter_item_writes = 0
        self._lock = threading.Lock()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("provide-client-params.dynamodb.*", self._seen)
        return client

    def _seen(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        with self._lock:
            self.requests[name] += 1
            if name in WRITE_OPS:
                self.write_units += 1
                self.counter_item_writes += _is_counter(params.get("Key") or params.get("Item"))
            elif name == "TransactWriteItems":
                actions = params["TransactItems"]
                self.write_units += 2 * len(actions)
                for action in actions:
                    (body,) = action.values()
                    self.counter_item_writes += _is_counter(body.get("Key") or body.get("Item"))

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "write_units": self.write_units,
                "counter_item_writes": self.counter_item_writes,
            }

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.write_units = 0
            self.counter_item_writes = 0


def _is_counter(key: Any) -> int:
    return int(bool(key) and key.get("sk", {}).get("S") == COUNTER_SK)


def stream_records(streams: Any, arn: str, pk: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(r for r in page["Records"] if r["dynamodb"]["Keys"]["pk"]["S"] == pk)
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


def run(creates: int, workers: int) -> dict[str, Any]:
    with LocalEndpoints() as endpoints:
        region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
        dynamodb = boto3.client(
            "dynamodb", endpoint_url=endpoints.dynamodb_url, config=RETRYING, region_name=region
        )
        sqs = boto3.client("sqs", endpoint_url=endpoints.sqs_url, region_name=region)
        template = load_template(stack_name="hybrid-counter-bench")
        table = next(iter(provision(template, dynamodb, sqs).tables.values()))
        meter = RequestMeter()
        clients = Clients(
            dynamodb=meter.attach(dynamodb),
            dynamodb_single_attempt=meter.attach(
                boto3.client(
                    "dynamodb", endpoint_url=endpoints.dynamodb_url, config=SINGLE_ATTEMPT, region_name=region
                )
            ),
            streams=boto3.client("dynamodbstreams", endpoint_url=endpoints.dynamodb_url, region_name=region),
        )
        settings = Settings(table_name=table.name, default_limit=10**6)
        quiet = Observability(emit_metrics=False)
        service = ResourceService(settings, clients, quiet)
        results: dict[str, Any] = {"creates": creates, "workers": workers}

        # API path: requests and write units per create and per delete.
        accounts = {"batched": f"bench-{uuid.uuid4().hex[:8]}", "per_record": f"bench-{uuid.uuid4().hex[:8]}"}
        ids: dict[str, list[str]] = {}
        meter.reset()
        started = time.perf_counter()
        for mode, account in accounts.items():
            with ThreadPoolExecutor(workers) as pool:
                ids[mode] = list(
                    pool.map(
                        lambda n, a=account: service.create(a, f"r{n}", {})[0].resource_id, range(creates)
                    )
                )
        create_seconds = time.perf_counter() - started
        api_create = meter.snapshot()
        meter.reset()
        for mode, account in accounts.items():
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda rid, a=account: service.delete(a, rid), ids[mode][: creates // 2]))
        api_delete = meter.snapshot()
        total_creates = creates * len(accounts)
        total_deletes = (creates // 2) * len(accounts)
        results["api_path"] = {
            "per_create": {
                "requests": {k: v / total_creates for k, v in api_create["requests"].items()},
                "write_units": api_create["write_units"] / total_creates,
                "transactions": api_create["requests"].get("TransactWriteItems", 0),
            },
            "per_delete": {
                "requests": {k: v / total_deletes for k, v in api_delete["requests"].items()},
                "write_units": api_delete["write_units"] / total_deletes,
                "transactions": api_delete["requests"].get("TransactWriteItems", 0),
            },
            "creates_per_second": total_creates / create_seconds,
        }

        # Stream path: the same workload counted in batches of 100, batched vs per-record.
        streams = clients.streams_client()
        for mode, account in accounts.items():
            records = stream_records(streams, table.stream_arn or "", account_pk(account))
            counter = EventualCounter(settings.table_name, mode, clients, quiet)  # type: ignore[arg-type]
            meter.reset()
            started = time.perf_counter()
            for start in range(0, len(records), 100):
                outcome = process_stream_batch(records[start : start + 100], counter)
                if outcome.failed_sequence_numbers:
                    raise RuntimeError(outcome.error)
            seconds = time.perf_counter() - started
            snap = meter.snapshot()
            operations = creates + creates // 2
            results[f"stream_{mode}"] = {
                "stream_records": len(records),
                "counting_operations": operations,
                "transactions": snap["requests"].get("TransactWriteItems", 0),
                "write_units_per_operation": snap["write_units"] / operations,
                "counter_item_writes_per_operation": snap["counter_item_writes"] / operations,
                "operations_per_second": operations / seconds,
            }
            usage = service.usage(account)
            live = creates - creates // 2
            if (usage.eventual, usage.best_effort) != (live, live):
                raise RuntimeError(f"{mode}: counters {usage} do not match {live} live resources")

        batched, per_record = results["stream_batched"], results["stream_per_record"]
        results["ratios"] = {
            "batched_vs_per_record_throughput": batched["operations_per_second"]
            / per_record["operations_per_second"],
            "batched_vs_per_record_write_units": batched["write_units_per_operation"]
            / per_record["write_units_per_operation"],
            "batched_vs_per_record_counter_item_writes": batched["counter_item_writes_per_operation"]
            / per_record["counter_item_writes_per_operation"],
        }

        raw_rate = _raw_put_rate(dynamodb, table.name, creates, workers)
        results["ratios"]["service_creates_vs_raw_putitem_rate"] = (
            results["api_path"]["creates_per_second"] / raw_rate
        )
        return results


def _raw_put_rate(dynamodb: Any, table_name: str, count: int, workers: int) -> float:
    """The emulator's raw single-item write rate, for scale (same workers, same run)."""
    ids = [uuid.uuid4().hex for _ in range(count)]
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(
            pool.map(
                lambda rid: dynamodb.put_item(
                    TableName=table_name, Item={"pk": {"S": "RAW"}, "sk": {"S": rid}}
                ),
                ids,
            )
        )
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--creates", type=int, default=400, help="creates per account (two accounts)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("bench-results/counting.json"))
    args = parser.parse_args()
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "HybridCounterBench")
    results = run(args.creates, args.workers)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
