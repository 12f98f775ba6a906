"""The benchmark's world: DynamoDB Local provisioned from template.yaml, metered clients, the stream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.config import Config

from benchmarks.meter import CapacityMeter
from hybrid_counter.aws import RETRYING, Clients
from hybrid_counter.counting.eventual import ApplyReport, EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.effects import Effects
from hybrid_counter.governance.thresholds import ThresholdWatcher
from hybrid_counter.keys import account_pk, org_pk
from hybrid_counter.observability import Observability
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import CountingMode, Settings
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.sources.stream_reader import StreamReader
from localrun.stack.aws_clients import client as local_client
from localrun.stack.aws_clients import domain_clients
from localrun.stack.endpoints import FULL_JIT, LocalEndpoints
from localrun.stack.template import DynamoDBStreamEvent

QUIET = Observability(emit_metrics=False)


@dataclass
class BenchWorld:
    runtime: LocalRuntime
    clients: Clients
    meter: CapacityMeter
    stream: StreamReader
    settings: Settings = field(init=False)

    def __post_init__(self) -> None:
        self.settings = Settings(table_name=self.runtime.table_name, default_limit=1_000_000)

    @property
    def table(self) -> str:
        return self.settings.table_name

    def account(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    def service(self, effects: Effects | None = None) -> ResourceService:
        return ResourceService(self.settings, self.clients, QUIET, effects)

    def counter(self, mode: CountingMode = "batched", clients: Clients | None = None) -> EventualCounter:
        return EventualCounter(self.table, mode, clients or self.clients, QUIET)

    def fresh_clients(self) -> Clients:
        """Clients of their own (unmetered), for a writer the simulator treats apart."""
        return _clients(self.runtime.dynamodb_url)

    @property
    def batch_size(self) -> int:
        """The stream mapping's BatchSize in template.yaml."""
        return next(
            event.batch_size
            for function in self.runtime.template.functions.values()
            for event in function.events
            if isinstance(event, DynamoDBStreamEvent)
        )

    def deliver(
        self, account_id: str, counter: EventualCounter, watcher: ThresholdWatcher | None = None
    ) -> ApplyReport:
        """Everything the stream holds for the account, in batches of BatchSize as the mapping
        sends them when records are waiting (with ``watcher``, judging threshold crossings too)."""
        return self.deliver_partition(account_pk(account_id), counter, watcher)

    def deliver_org(self, org_id: str, counter: EventualCounter) -> ApplyReport:
        """Everything the stream holds for an organization's partition (its counter items, whose
        admissions the stream path counts at the organization's level)."""
        return self.deliver_partition(org_pk(org_id), counter)

    def deliver_partition(
        self, pk: str, counter: EventualCounter, watcher: ThresholdWatcher | None = None
    ) -> ApplyReport:
        report, size = ApplyReport(), self.batch_size
        while records := self.stream.records_of(pk):
            for start in range(0, len(records), size):
                outcome = process_stream_batch(records[start : start + size], counter, watcher)
                if outcome.failed_sequence_numbers:
                    raise RuntimeError(f"stream batch failed: {outcome.error}")
                report.merge(outcome.report)
        return report

    def client(self, service: str, config: Any = RETRYING) -> Any:
        return local_client(service, self.runtime.dynamodb_url, config)


@contextmanager
def bench_world() -> Iterator[BenchWorld]:
    # Seeding 10^5 items is most of the growth part: DynamoDB Local with C2 writes them about a
    # third faster once warm (seeding 20,000 items: 26.6 s with C1 only, 14.8 s with C2).
    with (
        LocalEndpoints(jvm_options=FULL_JIT) as endpoints,
        LocalRuntime(RuntimeOptions.driven("hybrid-counter-bench", endpoints=endpoints)) as runtime,
    ):
        yield world_on(runtime)


def world_on(runtime: LocalRuntime, stream: StreamReader | None = None) -> BenchWorld:
    """A bench world on a running stack (the bench's own, or the integration tests')."""
    clients = _clients(runtime.dynamodb_url)
    meter = CapacityMeter()
    meter.attach(clients.dynamodb, clients.dynamodb_single_attempt)
    return BenchWorld(runtime, clients, meter, stream or StreamReader(clients.streams, runtime.stream_arn))


def _clients(url: str) -> Clients:
    return domain_clients(url, Config(max_pool_connections=64))  # the open-loop steps run up to 32 at once
