"""Per-account ceilings on AWS: a model, checked by a throttling simulator on DynamoDB Local.

**Model.** Every item and every partition takes C write units per second (1,000 on AWS). One
account's counter item is one item (on a partition of its own once DynamoDB has split for heat);
its resource items are spread by sort-key range over P partitions (16 here: one per range). So an
account's sustained rate is the lowest of C / (counter-item units per operation) and
P x C / (resource units per operation). Per create:

| | counter item | resource items |
|---|---|---|
| ours | 1 (admission) + 2/k (one counting transaction per k counts) | 1 (put) + 1 (make live) + 2 (counted in a transaction) |
| reference | 1 (increment) + 2 (one counting transaction per record) | 1 (put) + 2 (counted) |

k, the counts per counting transaction, is a property of the stream's batching: the records that
arrive in one batching window (1 s) of a run at rate x hold about x counts, so k = x and ours is
counter-bound at x = C - 2. Counting a backlog (no creates meanwhile): per-record mode writes the
counter item in every transaction (2 units), so C/2 counts/s; batched mode k counts per 2 counter
units, so the resource partitions bind first: P x C / 2.

**Simulator.** throttle.py, at C = `units_per_second`; the rates below are what it let through,
with the domain's own retries, over a measured window. The model is evaluated with the k measured
in the same run.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from statistics import mean
from typing import Any

from benchmarks.reference import ReferenceDesign
from benchmarks.throttle import CapacitySimulator
from benchmarks.world import BenchWorld
from hybrid_counter.counting.eventual import ApplyReport
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.effects import Effects
from hybrid_counter.errors import LimitExceeded, StoreUnavailable, Throttled
from hybrid_counter.settings import CountingMode

WINDOW = 1.0  # the mapping's MaximumBatchingWindowInSeconds


class StreamConsumer:
    """The event source mapping in a thread: every window, the new records in batches of 100."""

    def __init__(self, world: BenchWorld, account: str, apply: Any) -> None:
        self.world, self.account, self.apply = world, account, apply
        self.backlog: list[dict[str, Any]] = []
        self.report = ApplyReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StreamConsumer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(WINDOW):
            self.backlog += self.world.stream.records_for(self.account)
            batch, self.backlog = self.backlog[:100], self.backlog[100:]
            if batch:
                self.backlog = self.apply(batch) + self.backlog


def _ours_apply(world: BenchWorld, consumer_report: ApplyReport) -> Any:
    counter = world.counter("batched")

    def apply(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        outcome = process_stream_batch(batch, counter)
        consumer_report.merge(outcome.report)
        failed = set(outcome.failed_sequence_numbers)
        return [r for r in batch if r["dynamodb"]["SequenceNumber"] in failed]

    return apply


def _reference_apply(reference: ReferenceDesign) -> Any:
    def apply(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        done = 0
        try:
            for record in batch:
                reference.process([record])
                done += 1
        except Exception:  # throttled: the mapping retries from the failed record
            return batch[done:]
        return []

    return apply


def _sustained(create: Any, seconds: float, workers: int, warmup: float = 2.0) -> float:
    stop_at = time.monotonic() + warmup + seconds
    counted_from = time.monotonic() + warmup
    admitted: list[float] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        i = 0
        while time.monotonic() < stop_at:
            try:
                create(f"w{n}-{i}")
            except (Throttled, StoreUnavailable):
                pass
            else:
                with lock:
                    admitted.append(time.monotonic())
            i += 1

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(worker, range(workers)))
    return sum(1 for at in admitted if at >= counted_from) / seconds


def _effects() -> Effects:
    effects = Effects()
    effects.waiter.attempts = 1
    return effects


def run(
    world: BenchWorld, *, quick: bool, units_per_second: float = 20.0, partitions: int = 16
) -> dict[str, Any]:
    seconds = 8.0 if quick else 20.0
    clients = (world.clients.dynamodb, world.clients.dynamodb_single_attempt)
    results: dict[str, Any] = {
        "units_per_second": units_per_second,
        "partitions": partitions,
        "window_seconds": WINDOW,
    }

    # Ours: sustained admissions of one account, the stream counting alongside.
    service, account = world.service(_effects()), world.account("ceiling")
    service.set_limit(account, 1_000_000)
    report = ApplyReport()
    simulator = CapacitySimulator(units_per_second, partitions).attach(*clients)
    try:
        with StreamConsumer(world, account, _ours_apply(world, report)):
            rate = _sustained(
                lambda rid: service.create(account, "x", {}, resource_id=rid), seconds, workers=8
            )
    finally:
        simulator.detach()
    k = mean(size - 1 for size in report.transaction_sizes) if report.transaction_sizes else 1.0
    ours_model = min(units_per_second / (1 + 2 / k), partitions * units_per_second / 4)
    results["ours_admissions"] = {
        "measured_per_second": round(rate, 2),
        "model_per_second": round(ours_model, 2),
        "counts_per_counting_transaction": round(k, 1),
        "ratio": round(rate / ours_model, 3),
        "throttled_requests": simulator.throttled,
    }

    # The reference: the same account-level load.
    reference, ref_account = ReferenceDesign(world.table, world.clients), world.account("ceiling-ref")
    reference.set_limit(ref_account, 1_000_000)
    simulator = CapacitySimulator(units_per_second, partitions).attach(*clients)
    try:
        with StreamConsumer(world, ref_account, _reference_apply(reference)):
            ref_rate = _sustained(lambda _: _reference_create(reference, ref_account), seconds, workers=8)
    finally:
        simulator.detach()
    ref_model = min(units_per_second / 3, partitions * units_per_second / 3)
    results["reference_admissions"] = {
        "measured_per_second": round(ref_rate, 2),
        "model_per_second": round(ref_model, 2),
        "ratio": round(ref_rate / ref_model, 3),
    }

    # Exact limits under throttling: every create of a burst far past the limit retried until it is
    # admitted or refused; exactly the limit is admitted.
    limited, cap = world.account("ceiling-limit"), 40
    service.set_limit(limited, cap)

    def decided(n: int) -> int:
        while True:
            try:
                service.create(limited, "x", {}, resource_id=f"l{n}")
            except LimitExceeded:
                return 0
            except (Throttled, StoreUnavailable):
                continue
            return 1

    simulator = CapacitySimulator(units_per_second, partitions).attach(*clients)
    try:
        admitted = sum(pool_map(decided, range(3 * cap)))
    finally:
        simulator.detach()
    live = len(service.list(limited, page_size=100).items)
    results["exact_limit_under_throttling"] = {
        "limit": cap,
        "creates": 3 * cap,
        "admitted": admitted,
        "live": live,
        "exact": admitted == cap == live,
    }

    results["counting"] = _counting_rates(world, units_per_second, partitions, seconds, quick)
    return results


def pool_map(fn: Any, items: Any) -> list[Any]:
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(fn, items))


def _reference_create(reference: ReferenceDesign, account: str) -> None:
    try:
        reference.create(account, "x", time.time())
    except Exception as error:  # the reference has no retry of its own: a throttled create fails
        raise StoreUnavailable(str(error)) from error


def _counting_rates(
    world: BenchWorld, rate: float, partitions: int, seconds: float, quick: bool
) -> dict[str, Any]:
    """Counting a backlog of admissions: batched against per-record, under the same capacity."""
    backlog = 600 if quick else 1500
    measured: dict[str, float] = {}
    sizes: dict[str, float] = {}
    modes: tuple[CountingMode, ...] = ("batched", "per_record")
    for mode in modes:
        service, account = world.service(), world.account(f"count-{mode}")
        service.set_limit(account, 1_000_000)
        pool_map(
            lambda n, service=service, account=account: service.create(account, "x", {}, resource_id=f"b{n}"),
            range(backlog),
        )
        records = world.stream.records_for(account)
        counter = world.counter(mode)
        simulator = CapacitySimulator(rate, partitions).attach(world.clients.dynamodb)
        report, started, position = ApplyReport(), time.monotonic(), 0
        try:
            while position < len(records) and time.monotonic() - started < seconds:
                batch = records[position : position + 100]
                outcome = process_stream_batch(batch, counter)
                report.merge(outcome.report)
                position += len(batch) - len(outcome.failed_sequence_numbers)
        finally:
            simulator.detach()
        measured[mode] = report.counted / (time.monotonic() - started)
        sizes[mode] = mean(s - 1 for s in report.transaction_sizes) if report.transaction_sizes else 1.0
    k = sizes["batched"]
    model = {
        "batched": min(rate * k / 2, partitions * rate / 2),
        "per_record": min(rate / 2, partitions * rate / 2),
    }
    return {
        "counts_per_second": {mode: round(value, 2) for mode, value in measured.items()},
        "model_counts_per_second": {mode: round(value, 2) for mode, value in model.items()},
        "counts_per_batched_transaction": round(k, 1),
        "measured_ratio": round(measured["batched"] / measured["per_record"], 2),
        "model_ratio": round(model["batched"] / model["per_record"], 2),
    }
