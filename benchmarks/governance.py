"""What threshold events and limit history cost: the same creates and limit change on an account
with events off (no bus: nothing judged, nothing kept to publish) and on (thresholds 80 and 100,
published to the stack's bus), measured in one run.

Per phase: the API path's creates (the target: nothing extra, as crossings are judged by the
stream path), the stream path's counting of them with its threshold judgement (two crossings on
the way to the limit: 80 % and 100 %), and an override change, which writes its history item
either way and, with events on, its outbox event, then moves the counter item so the stream path
judges the account again (both thresholds cleared). PutEvents calls and entries are counted
apart: they are not DynamoDB units.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from benchmarks.world import QUIET, BenchWorld
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.resources import ResourceService
from hybrid_counter.runtime import Components
from localrun.stack.aws_clients import events_client

MODES = ("events_off", "events_on")
PHASES = ("create", "stream_per_create", "limit_change", "stream_after_limit_change")
COMPARED = ("requests", "read_units", "total_write_units")


def extra(off: dict[str, Any], on: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per phase, what events on cost beyond events off."""
    return {
        phase: {figure: round(on[phase][figure] - off[phase][figure], 3) for figure in COMPARED}
        for phase in PHASES
    }


def run(world: BenchWorld, creates: int = 20) -> dict[str, Any]:
    figures = {mode: _mode(world, mode, creates) for mode in MODES}
    return {
        "creates": creates,
        "thresholds": list(world.settings.usage_thresholds),
        **figures,
        "extra": extra(figures["events_off"]["per_phase"], figures["events_on"]["per_phase"]),
    }


def _mode(world: BenchWorld, mode: str, creates: int) -> dict[str, Any]:
    bus = next(iter(world.runtime.event_bus_arns)) if mode == "events_on" else None
    settings = replace(world.settings, event_bus_name=bus)
    clients = replace(world.clients, events=events_client(world.runtime.events_url))
    published: Counter[str] = Counter()
    clients.events.meta.events.register(  # type: ignore[union-attr]
        "provide-client-params.events.PutEvents",
        lambda params, **_: published.update(requests=1, entries=len(params["Entries"])),
    )
    components = Components(settings, clients, QUIET)
    service: ResourceService = components.resources
    watcher, counter = components.watcher, world.counter()
    account = world.account(f"governance-{mode}")
    service.set_limit(account, creates, force=True)
    world.deliver(account, counter)  # the override's own counter write, judged before we measure

    def stream(label: str) -> int:
        events_before = published["entries"]
        with world.meter.labeled(label):
            while records := world.stream.records_for(account):
                for start in range(0, len(records), world.batch_size):
                    outcome = process_stream_batch(
                        records[start : start + world.batch_size], counter, watcher
                    )
                    if outcome.failed_sequence_numbers:
                        raise RuntimeError(f"stream batch failed: {outcome.error}")
        return published["entries"] - events_before

    with world.meter.labeled(f"{mode}:create"):
        for n in range(creates):
            service.create(account, f"r{n}", {})
    crossings_up = stream(f"{mode}:stream_per_create")
    with world.meter.labeled(f"{mode}:limit_change"):
        service.set_limit(account, creates * 4, force=True)
    crossings_down = stream(f"{mode}:stream_after_limit_change")

    tallies = {phase: world.meter.tally(f"{mode}:{phase}") for phase in PHASES}
    per_phase = {
        phase: tally.per(creates if phase in ("create", "stream_per_create") else 1)
        for phase, tally in tallies.items()
    }
    return {
        "per_phase": per_phase,
        "events_published": {"on_the_way_up": crossings_up, "after_the_limit_change": crossings_down},
        "put_events_requests": published["requests"],
    }
