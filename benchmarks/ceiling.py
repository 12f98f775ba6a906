"""Per-account ceilings: the model (ceiling_model.py), checked by a throttling simulator on DynamoDB Local.

**Simulator.** throttle.py, at C = `units_per_second` (10: low enough that this machine is not what
binds, which `machine_check` shows by running the top step with no simulated capacity). Load is
open loop: creates offered at fractions of the model's ceiling (a mean wait of two windows to be
counted), each step for a fixed time; a step keeps up when at least 98 % of its creates were
admitted (a throttled create is an answer the caller must retry) and the creates the eventual
counter has not counted yet, read off the table through the step's second half, average under
two windows of admissions. Steps follow one another with no pause, so a backlog carries over; a
step that falls behind is run once more, and the ladder stops when it falls behind again. The
sustained rate is the highest step that kept up. The API path is throttled (its single-attempt
admission answers 429); the stream consumer's writes wait for capacity instead (throttle.py says
why), and it retries a failed batch at once, as the mapping does. A bucket holds `burst_seconds`
of capacity (half a second by default): what the counter item banks while the consumer waits out
a window, the model's B. `burst_check` runs the reference's ladder at other buckets, where the
model predicts a different ceiling.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from statistics import mean
from typing import Any

from benchmarks.ceiling_model import ItemCapacity, Units, ours_stream_units, reference_stream_units
from benchmarks.reference import ReferenceDesign
from benchmarks.throttle import CapacitySimulator
from benchmarks.world import BenchWorld
from hybrid_counter.aws import Clients
from hybrid_counter.counting.eventual import ApplyReport
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.effects import Effects
from hybrid_counter.errors import LimitExceeded, StoreUnavailable, Throttled
from hybrid_counter.resources.service import ResourceService
from hybrid_counter.settings import CountingMode

WINDOW = 1.0  # the mapping's MaximumBatchingWindowInSeconds
FRACTIONS = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3)  # of the model's ceiling, in turn


@dataclass(frozen=True)
class Durations:
    step: float  # a step of a ladder
    run: float  # the machine check and each counting run


# A step's cycles settle (or fall behind) by a factor 2x / (C - x) a cycle for the reference, near 1
# at its ceiling: 10-second steps passed it 20 % above its capacity with a one-second bucket.
FULL, QUICK = Durations(step=20.0, run=10.0), Durations(step=10.0, run=6.0)


class StreamConsumer:
    """The event source mapping in a thread: every window, the new records in batches of BatchSize."""

    def __init__(self, world: BenchWorld, account: str, apply: Any) -> None:
        self.world, self.account, self.apply = world, account, apply
        self.backlog: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StreamConsumer:
        with self._lock:
            # The reader catches up with what earlier parts left in the stream (the growth part
            # seeds 10^5 items) now, not in the first step's first window.
            self._pull()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _pull(self) -> None:
        self.backlog += self.world.stream.records_for(self.account)

    def _run(self) -> None:
        pause = WINDOW
        while not self._stop.wait(pause):
            with self._lock:
                self._pull()
                batch = self.backlog[: self.world.batch_size]
            failed = self.apply(batch) if batch else []
            with self._lock:
                self.backlog = failed + self.backlog[len(batch) :]
            pause = 0.05 if failed else WINDOW  # the mapping retries a failed batch at once


def ours_apply(world: BenchWorld, consumer_report: ApplyReport, clients: Clients) -> Any:
    counter = world.counter("batched", clients)

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


Uncounted = Callable[[], int]  # creates written that eventual does not count yet


@dataclass
class Step:
    offered_per_second: float
    admitted_fraction: float
    uncounted_creates: float  # the mean of samples over the step's second half

    @property
    def kept_up(self) -> bool:
        """Admitted (nearly) all it was offered, and the counting stayed within two windows."""
        admitted_per_second = self.offered_per_second * self.admitted_fraction
        return self.admitted_fraction >= 0.98 and self.uncounted_creates <= 2 * WINDOW * admitted_per_second


class Sampler:
    """Reads the uncounted creates every quarter second from `since` on, in a thread.

    The mean, not one reading: by Little's law the mean of the creates not yet counted is the
    admission rate times the mean wait to be counted, the model's measure (ceiling_model.py), so
    the mean over half a step judged against two windows of admissions puts a measured ceiling
    where the model's is. A cycle of the mapping (a window, then processing) swings the count by a
    batch; one reading lands anywhere in it, and is taken when the last create has answered,
    which a throttled create's retries move."""

    def __init__(self, uncounted: Uncounted, since: float) -> None:
        self.uncounted, self.since = uncounted, since
        self.readings: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        if not self.readings:
            self.readings.append(self.uncounted())

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            if time.monotonic() >= self.since:
                self.readings.append(self.uncounted())

    def mean(self) -> float:
        return round(mean(self.readings), 1)


@dataclass
class Schedule:
    """Where the ladder's open-loop schedule has got to: each step's creates follow the last
    step's on the same clock, so the time taken to wait for answers and to sample the backlog
    between steps does not lower the offered rate (it did, by about 7 %)."""

    at: float = field(default_factory=time.monotonic)


def offered(create: Any, uncounted: Uncounted, rate: float, seconds: float, schedule: Schedule) -> Step:
    """Open loop: a create every 1/rate seconds whatever the answers (late ones go at once). The
    creates not yet counted are read off the table (consistently) through the step's second half,
    until the last create has answered. The next step follows with no pause to drain: a step
    above capacity leaves a backlog its successor inherits, so a deficit too small to show within
    one step (10 % over capacity for 10 s is about a window's creates) adds up over the ladder
    instead of being forgiven between steps."""
    total = max(1, int(rate * seconds))
    started = schedule.at
    schedule.at = started + total / rate
    with Sampler(uncounted, since=started + seconds / 2) as sampler, ThreadPoolExecutor(32) as pool:
        futures = []
        for n in range(total):
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
            futures.append(pool.submit(_admitted, create, n))
        admitted = sum(f.result() for f in futures)
    return Step(
        offered_per_second=round(rate, 2),
        admitted_fraction=round(admitted / total, 3),
        uncounted_creates=sampler.mean(),
    )


def _admitted(create: Any, n: int) -> int:
    try:
        create(f"o{n}-{uuid.uuid4().hex[:6]}")
    except (Throttled, StoreUnavailable):
        return 0
    return 1


@dataclass(frozen=True)
class Capacity:
    units_per_second: float
    partitions: int
    seconds: float
    burst_seconds: float = 0.5

    def simulator(self) -> CapacitySimulator:
        return CapacitySimulator(self.units_per_second, self.partitions, self.burst_seconds)

    def throttled(self, *clients: Any) -> CapacitySimulator:
        return self.simulator().attach(*clients)

    def model(self) -> ItemCapacity:
        """The same capacity as the model sees it: C, the bucket B, the mapping's window."""
        return ItemCapacity(self.units_per_second, self.units_per_second * self.burst_seconds, WINDOW)


def _ladder(
    world: BenchWorld,
    account: str,
    apply: Any,
    create: Any,
    uncounted: Uncounted,
    *,
    stream_units: Units,
    capacity: Capacity,
    stream_clients: Clients,
) -> dict[str, Any]:
    """Offered load at fractions of the model's ceiling, simulated capacity on (the API path
    throttled, the stream path held until it can pay); the highest step that kept up."""
    steps, sustained = [], 0.0
    model = capacity.model().within_two_windows(stream_units)
    simulator = capacity.throttled(world.clients.dynamodb, world.clients.dynamodb_single_attempt)
    simulator.attach(stream_clients.dynamodb, stream_clients.dynamodb_single_attempt, wait=True)
    try:
        with StreamConsumer(world, account, apply):
            schedule = Schedule()
            for fraction in FRACTIONS:
                step = offered(create, uncounted, fraction * model, capacity.seconds, schedule)
                steps.append(step)
                if not step.kept_up:
                    # Once more, inheriting the backlog: near the ceiling the backlog swings by a
                    # window's creates within a cycle, and one sample can catch its peak; a backlog
                    # that grows fails again.
                    step = offered(create, uncounted, fraction * model, capacity.seconds, schedule)
                    steps.append(step)
                    if not step.kept_up:
                        break
                sustained = step.offered_per_second
    finally:
        simulator.detach()
    return {
        "sustained_per_second": sustained,
        "model_per_second": round(model, 2),
        "capacity_model_per_second": round(capacity.model().by_capacity(stream_units), 2),
        "ratio": round(sustained / model, 3),
        "step_seconds": capacity.seconds,
        "throttled_requests": simulator.throttled,
        "steps": [asdict(step) | {"kept_up": step.kept_up} for step in steps],
    }


def without_waits() -> Effects:
    """Effects whose waits for another request's write poll once, not for a second."""
    effects = Effects()
    effects.waiter.attempts = 1
    return effects


def run(
    world: BenchWorld,
    *,
    quick: bool,
    units_per_second: float = 10.0,
    partitions: int = 16,
    burst_seconds: float = 0.5,
) -> dict[str, Any]:
    durations = QUICK if quick else FULL
    capacity = Capacity(units_per_second, partitions, durations.step, burst_seconds)
    ours_model = capacity.model().within_two_windows(ours_stream_units)
    return {
        "units_per_second": units_per_second,
        "partitions": partitions,
        "window_seconds": WINDOW,
        "burst_seconds": burst_seconds,
        "ours_admissions": _ours(world, capacity),
        "machine_check": _machine_check(world, FRACTIONS[-1] * ours_model, durations.run),
        "reference_admissions": _reference(world, capacity),
        "exact_limit_under_throttling": _exact_limit(world, capacity),
        "counting": _counting_rates(world, durations.run, quick),
    }


def burst_check(world: BenchWorld, *, quick: bool, bursts: tuple[float, ...]) -> dict[str, Any]:
    """The reference's ladder at other bursts: the lag term of the model predicts how its ceiling
    moves with B (ours does not move), which the capacity term alone does not."""
    seconds = (QUICK if quick else FULL).step
    return {f"{burst:g}": _reference(world, Capacity(10.0, 16, seconds, burst)) for burst in bursts}


def _ours(world: BenchWorld, capacity: Capacity) -> dict[str, Any]:
    """One account's creates at rising offered rates, the stream counting alongside."""
    service, account = world.service(without_waits()), world.account("ceiling")
    service.set_limit(account, 1_000_000)
    report, stream_clients = ApplyReport(), world.fresh_clients()

    def create(rid: str) -> None:
        service.create(account, "x", {}, resource_id=rid)

    result = _ladder(
        world,
        account,
        ours_apply(world, report, stream_clients),
        create,
        _uncounted_ours(service, account),
        stream_units=ours_stream_units,
        capacity=capacity,
        stream_clients=stream_clients,
    )
    sizes = report.transaction_sizes
    result["counts_per_counting_transaction"] = round(mean(n - 1 for n in sizes), 1) if sizes else 0
    return result


def _machine_check(world: BenchWorld, rate: float, seconds: float) -> dict[str, Any]:
    """The machine is not what binds: the top step with no simulated capacity at all."""
    service, account = world.service(without_waits()), world.account("ceiling-free")
    service.set_limit(account, 1_000_000)
    with StreamConsumer(world, account, ours_apply(world, ApplyReport(), world.clients)):
        step = offered(
            lambda rid: service.create(account, "x", {}, resource_id=rid),
            _uncounted_ours(service, account),
            rate,
            seconds,
            Schedule(),
        )
    return asdict(step) | {"kept_up": step.kept_up}


def _uncounted_ours(service: ResourceService, account: str) -> Uncounted:
    def uncounted() -> int:
        usage = service.usage(account)
        return max(0, usage.best_effort - usage.eventual)

    return uncounted


def _reference(world: BenchWorld, capacity: Capacity) -> dict[str, Any]:
    """The reference under the same capacity: 1 counter unit per create, 2 per counted record."""
    reference, account = ReferenceDesign(world.table, world.clients), world.account("ceiling-ref")
    reference.set_limit(account, 1_000_000)
    stream_clients = world.fresh_clients()
    return _ladder(
        world,
        account,
        _reference_apply(ReferenceDesign(world.table, stream_clients)),
        lambda _: _reference_create(reference, account),
        lambda: reference.uncounted(account),
        stream_units=reference_stream_units,
        capacity=capacity,
        stream_clients=stream_clients,
    )


def _exact_limit(world: BenchWorld, capacity: Capacity, cap: int = 40) -> dict[str, Any]:
    """Every create of a burst far past the limit retried until admitted or refused, under
    throttling: exactly the limit is admitted."""
    service, limited = world.service(without_waits()), world.account("ceiling-limit")
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

    simulator = capacity.throttled(world.clients.dynamodb, world.clients.dynamodb_single_attempt)
    try:
        admitted = sum(pool_map(decided, range(3 * cap)))
    finally:
        simulator.detach()
    live = len(service.list(limited, page_size=100).items)
    return {
        "limit": cap,
        "creates": 3 * cap,
        "admitted": admitted,
        "live": live,
        "throttled_requests": simulator.throttled,
        "exact": admitted == cap == live,
    }


def pool_map(fn: Any, items: Any) -> list[Any]:
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(fn, items))


def _reference_create(reference: ReferenceDesign, account: str) -> None:
    try:
        reference.create(account, "x", time.time())
    except Exception as error:  # the reference has no retry of its own: a throttled create fails
        raise StoreUnavailable(str(error)) from error


def _counting_rates(world: BenchWorld, seconds: float, quick: bool) -> dict[str, Any]:
    """Counting a backlog of admissions, batched against per-record, under the same capacity.

    Its own scale: C = 40 over P = 4 partitions with a one-second bucket, so that one batched
    transaction's share of a partition (k / P counts, 2 units each) stays well under a bucket, as
    it does on AWS (a 100-action transaction is 200 units against 1,000). At C = 10 over 16
    partitions a transaction would wait for its busiest partition, a scale artefact. The model's
    ratio is then min(k, P) and batched counting is partition-bound."""
    scale = Capacity(40.0, 4, seconds, burst_seconds=1.0)
    measured: dict[str, float] = {}
    sizes: dict[str, float] = {}
    # Each backlog outlasts its run at the model's rate (batched 80/s, per-record 20/s); the one
    # with no simulated capacity runs dry first, which leaves its rate (counted / time) right. It
    # counts about 370/s here, so 600 creates are 8 batches (1,200 were 600 more creates to make,
    # at about 40/s on this machine).
    runs: tuple[tuple[str, CountingMode, bool, int], ...] = (
        ("batched", "batched", True, 1200),
        ("per_record", "per_record", True, 400),
        ("batched_no_simulated_capacity", "batched", False, 600),
    )
    for name, mode, simulated, full_backlog in runs:
        backlog = full_backlog // 2 if quick else full_backlog
        service, account = world.service(), world.account(f"count-{mode}")
        service.set_limit(account, 1_000_000)
        pool_map(
            lambda n, service=service, account=account: service.create(account, "x", {}, resource_id=f"b{n}"),
            range(backlog),
        )
        records = world.stream.records_for(account)
        clients = world.fresh_clients()
        counter = world.counter(mode, clients)
        simulator = scale.simulator().attach(clients.dynamodb, wait=True) if simulated else None
        report, started, position = ApplyReport(), time.monotonic(), 0
        try:
            while position < len(records) and time.monotonic() - started < scale.seconds:
                batch = records[position : position + world.batch_size]
                outcome = process_stream_batch(batch, counter)
                report.merge(outcome.report)
                position += len(batch) - len(outcome.failed_sequence_numbers)
        finally:
            if simulator:
                simulator.detach()
        measured[name] = report.counted / (time.monotonic() - started)
        sizes[name] = mean(s - 1 for s in report.transaction_sizes) if report.transaction_sizes else 1.0
    k, rate, partitions = sizes["batched"], scale.units_per_second, scale.partitions
    model = {
        "batched": min(rate * k / 2, partitions * rate / 2),
        "per_record": min(rate / 2, partitions * rate / 2),
    }
    return {
        "units_per_second": rate,
        "partitions": partitions,
        "counts_per_second": {mode: round(value, 2) for mode, value in measured.items()},
        "model_counts_per_second": {mode: round(value, 2) for mode, value in model.items()},
        "counts_per_batched_transaction": round(k, 1),
        "measured_ratio": round(measured["batched"] / measured["per_record"], 2),
        "model_ratio": round(model["batched"] / model["per_record"], 2),
    }
