"""What a plan costs a create: the reads of an account's plan and of the plan's limits, through the
caches of one ResourceService (one process: plans/limits.py keeps both for PlanCacheSeconds).

Two accounts on the built-in default plan (no plan written, no override) and two on a stored plan
(put_plan, assign_plan). For each: the first create (both caches cold), many creates after it
(steady state), the first create of the other account (the plan cached, the account's plan not),
and the first create after the caches expired. The clock the caches read is moved past
PlanCacheSeconds instead of waiting for it: the service's Effects clock is wall time plus a shift.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from benchmarks.world import BenchWorld
from hybrid_counter.effects import Effects


@dataclass
class ShiftedClock:
    shift: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


def extra_reads(per_create: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each phase's requests and read units per create beyond the steady state's (``warm``)."""
    warm = per_create["warm"]
    return {
        phase: {
            "requests": round(figures["requests"] - warm["requests"], 3),
            "read_units": round(figures["read_units"] - warm["read_units"], 3),
            "get_items": round(
                figures["requests_by_operation"].get("GetItem", 0.0)
                - warm["requests_by_operation"].get("GetItem", 0.0),
                3,
            ),
        }
        for phase, figures in per_create.items()
        if phase != "warm"
    }


def run(world: BenchWorld, creates: int) -> dict[str, Any]:
    default = _setup(world, creates, stored=False)
    stored = _setup(world, creates, stored=True)
    return {
        "creates": creates,
        "plan_cache_seconds": world.settings.plan_cache_seconds,
        "builtin_default": default,
        "stored_plan": stored,
        "extra_read_units_per_create_steady": round(
            stored["per_create"]["warm"]["read_units"] - default["per_create"]["warm"]["read_units"], 3
        ),
    }


def _setup(world: BenchWorld, creates: int, *, stored: bool) -> dict[str, Any]:
    name = "stored" if stored else "default"
    clock = ShiftedClock()
    service = world.service(Effects(clock=clock))
    first, other = world.account(f"plan-{name}"), world.account(f"plan-{name}")
    if stored:
        plan_id = f"bench-{uuid.uuid4().hex[:8]}"
        service.put_plan(plan_id, {world.settings.default_kind: 1_000_000})
        for account in (first, other):
            service.assign_plan(account, plan_id)  # each drops what the service cached of it

    def measured(phase: str, account: str, count: int) -> dict[str, Any]:
        with world.meter.labeled(f"plans:{name}:{phase}") as tally:
            for n in range(count):
                service.create(account, f"p{n}", {})
        return tally.per(count)

    per_create = {
        "cold": measured("cold", first, 1),
        "warm": measured("warm", first, creates),
        "other_account": measured("other_account", other, 1),
    }
    clock.shift += world.settings.plan_cache_seconds + 1.0
    per_create["expired"] = measured("expired", first, 1)
    return {"per_create": per_create, "extra": extra_reads(per_create)}
