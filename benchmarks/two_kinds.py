"""Two kinds of one account loaded at once, in the throttling simulator (throttle.py, ceiling.py).

Each kind has a counter item of its own (keys.py), and the simulator gives every item its own C,
so each kind should sustain what one kind alone does (the model's one-item ceiling), not half of
it. The account has one stream consumer, as it has one item collection: a batch holds both kinds'
records, and a counting transaction carries one counter action per kind (2 units on each item),
so the two kinds wait for each other only where a transaction waits for both items to pay.

The ladder is ceiling.py's, with both kinds offered the same fraction of the model at once, each on
its own open-loop schedule and judged on its own counter item. It is kept short for the bench's
time budget: rungs at 0.8 to 1.1 of the model (a kind held to half would fall behind at the first;
one kind alone falls behind at 1.1), 20 s each as in ceiling.py; a rung either kind falls behind
on is run once more, and the ladder stops when one falls behind again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from statistics import mean
from typing import Any

from benchmarks.ceiling import (
    FULL,
    QUICK,
    Capacity,
    Schedule,
    Step,
    StreamConsumer,
    Uncounted,
    offered,
    ours_apply,
    without_waits,
)
from benchmarks.ceiling_model import ours_stream_units
from benchmarks.world import BenchWorld
from hybrid_counter.counting.eventual import ApplyReport
from hybrid_counter.resources import ResourceService

KINDS = ("servers", "volumes")
FRACTIONS = (0.8, 0.9, 1.0, 1.1)


def sustained(steps: list[dict[str, Any]]) -> float:
    """The highest offered rate a kind kept up at, judged on the last run of each rung (a rung
    that fell behind is run once more)."""
    last: dict[float, bool] = {}
    for step in steps:
        last[step["offered_per_second"]] = step["kept_up"]
    return max((rate for rate, kept_up in last.items() if kept_up), default=0.0)


def run(world: BenchWorld, *, quick: bool, units_per_second: float = 10.0) -> dict[str, Any]:
    capacity = Capacity(units_per_second, 16, (QUICK if quick else FULL).step)
    model = capacity.model().within_two_windows(ours_stream_units)
    service, account = world.service(without_waits()), world.account("two-kinds")
    for kind in KINDS:
        service.set_limit(account, 1_000_000, kind=kind)
    report, stream_clients = ApplyReport(), world.fresh_clients()
    steps: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    simulator = capacity.throttled(world.clients.dynamodb, world.clients.dynamodb_single_attempt)
    simulator.attach(stream_clients.dynamodb, stream_clients.dynamodb_single_attempt, wait=True)
    try:
        with StreamConsumer(world, account, ours_apply(world, report, stream_clients)):
            schedules = {kind: Schedule() for kind in KINDS}

            def kept_up(rate: float) -> bool:
                rung = _rung(service, account, rate, capacity.seconds, schedules)
                for kind, step in rung.items():
                    steps[kind].append(asdict(step) | {"kept_up": step.kept_up})
                return all(step.kept_up for step in rung.values())

            for fraction in FRACTIONS:
                # Once more when behind, inheriting the backlog, as ceiling._ladder does (and why).
                if not kept_up(fraction * model) and not kept_up(fraction * model):
                    break
    finally:
        simulator.detach()
    rates = {kind: sustained(kind_steps) for kind, kind_steps in steps.items()}
    per_kind = {
        kind: {"sustained_per_second": rate, "ratio": round(rate / model, 3), "steps": steps[kind]}
        for kind, rate in rates.items()
    }
    sizes = report.transaction_sizes
    return {
        "units_per_second": units_per_second,
        "model_per_second": round(model, 2),
        "step_seconds": capacity.seconds,
        "kinds": per_kind,
        "account_sustained_per_second": round(sum(rates.values()), 2),
        "throttled_requests": simulator.throttled,
        "actions_per_counting_transaction": round(mean(sizes), 1) if sizes else 0,
    }


def _rung(
    service: ResourceService, account: str, rate: float, seconds: float, schedules: dict[str, Schedule]
) -> dict[str, Step]:
    """Both kinds' steps at once, each on its own schedule (both started together)."""

    def step(kind: str) -> Step:
        def create(rid: str) -> None:
            service.create(account, "x", {}, resource_id=rid, kind=kind)

        return offered(create, _uncounted(service, account, kind), rate, seconds, schedules[kind])

    with ThreadPoolExecutor(len(KINDS)) as pool:
        return dict(zip(KINDS, pool.map(step, KINDS), strict=True))


def _uncounted(service: ResourceService, account: str, kind: str) -> Uncounted:
    def uncounted() -> int:
        state = service.counters.read(account, kind=kind)
        return max(0, state.best_effort - state.eventual)

    return uncounted
