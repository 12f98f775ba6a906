"""`make bench`: cost, growth, ceilings and latency, written to bench-results/.

    python -m benchmarks                 # everything (about 14 minutes here, 17 on a busy machine)
    python -m benchmarks --quick         # smaller sizes, to try it out
    python -m benchmarks --parts cost,growth
    python -m benchmarks --parts kinds,two_kinds  # plans, many kinds, units; two kinds' ceilings
    python -m benchmarks --parts governance     # what threshold events and limit history cost
    python -m benchmarks --parts orgs   # organizations: membership's cost, org usage, the org's ceiling
    python -m benchmarks --parts dead_deletes  # a dead delete's takeover: known, or by the census
    python -m benchmarks --parts usage_over  # who is near a limit: an answer of N rows of 10,000 accounts
    python -m benchmarks --parts bursts  # the reference's ceiling at other bursts (not in the default run)

Figures are counts (requests, read and write units, item sizes) and ratios measured in one run;
the only times are the latency figures, reported with the machine they ran on.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import (
    ceiling,
    cost,
    dead_deletes,
    docs_page,
    governance,
    growth,
    holds,
    kinds,
    latency,
    org_ceiling,
    orgs,
    plans,
    report,
    two_kinds,
    units,
    usage_over,
)
from benchmarks.world import bench_world

PARTS = (
    "cost",
    "kinds",
    "governance",
    "growth",
    "ceiling",
    "two_kinds",
    "orgs",
    "holds",
    "dead_deletes",
    "usage_over",
    "latency",
)
BURSTS = (0.25, 1.0)  # seconds of capacity a bucket holds; the default run uses 0.5


@dataclass(frozen=True)
class Sizes:
    cost_operations: int
    backlogs: list[int]
    account_sizes: list[int]
    sweep_entries: list[int]
    accounts: list[int]
    busy_account: int  # one of account_sizes: the size at which it is also recounted under traffic
    # The kinds part (figures per operation, which do not depend on how many): the creates of a
    # plan's steady state, the operations of each units lifecycle; and the kinds of one account.
    plan_creates: int = 40
    unit_operations: int = 25
    kinds: int = 100
    # The orgs part: the steady creates of each account compared (member or not); the sizes of the
    # organizations whose usage is read; the accounts loading one organization in its ladder, and
    # the numbers of counter items its counter is split over (S > 1 where the split is built).
    org_creates: int = 40
    org_usage_members: tuple[int, ...] = orgs.USAGE_SIZES
    org_accounts: int = 50
    org_shards: tuple[int, ...] = org_ceiling.SHARDS
    # The takeover of a dead delete, at accounts of these sizes (the census reads one range).
    dead_delete_sizes: tuple[int, ...] = dead_deletes.SIZES


FULL = Sizes(
    200,
    [0, 200, 1_000, 10_000],
    [1_000, 10_000, 100_000],
    [100, 1_000, 10_000],
    [100, 1_000, 10_000],
    busy_account=10_000,
)
QUICK = Sizes(
    50,
    [0, 200, 1_000],
    [1_000, 5_000],
    [100, 500],
    [100, 500],
    busy_account=1_000,
    plan_creates=20,
    unit_operations=10,
    org_creates=20,
    dead_delete_sizes=(100, 1_000),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="bench-results")
    parser.add_argument(
        "--docs", default=None, help="also write <docs>/benchmarks.md and its plots (make bench: docs)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # The domain's info logs and metric lines (one per heal, per count) would bury the report.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    sizes = QUICK if args.quick else FULL
    parts = [p for p in args.parts.split(",") if p]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    started = time.monotonic()
    clock = _PartClock(started)
    results["part_seconds"] = clock.seconds
    with bench_world() as world:
        _in_world(world, parts, sizes, quick=args.quick, clock=clock, results=results)
    if "latency" in parts:
        results["latency"] = latency.run(quick=args.quick)
        clock.done("latency")
    results["seconds"] = round(time.monotonic() - started)
    results["targets"] = report.targets(results)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "results.md").write_text(report.markdown(results))
    report.plots(results, out)
    print((out / "results.md").read_text())
    if args.docs:
        print(f"wrote {docs_page.write(results, (out / 'results.md').read_text(), out, Path(args.docs))}")
    return 0


def _in_world(
    world: Any, parts: list[str], sizes: Sizes, *, quick: bool, clock: _PartClock, results: dict[str, Any]
) -> None:
    """The parts that run in one DynamoDB Local and runtime, in order, into ``results``."""
    clock.done("start")  # DynamoDB Local and the runtime
    if "cost" in parts:
        results["cost"] = cost.run(world, sizes.cost_operations)
        clock.done("cost")
    if "kinds" in parts:
        results["kinds"] = {
            "plans": plans.run(world, sizes.plan_creates),
            "many_kinds": kinds.run(world, sizes.kinds),
            "units": units.run(world, sizes.unit_operations),
        }
        clock.done("kinds")
    if "governance" in parts:
        results["governance"] = governance.run(world)
        clock.done("governance")
    if "growth" in parts:
        admission = growth.admission_vs_deletes_in_flight(world, sizes.backlogs)
        sweeps = growth.sweep_vs_entries(world, sizes.sweep_entries)
        heals = growth.heal_all_vs_accounts(world, sizes.accounts)
        recounts, busy = growth.recount_growth(
            world, sizes.account_sizes, sizes.busy_account, pairs_per_second=20.0
        )
        results["growth"] = {
            "admission_vs_deletes_in_flight": admission,
            "sweep_vs_entries": sweeps,
            "heal_all_vs_accounts": heals,
            "recount_vs_account_size": recounts,
            "recount_under_traffic": busy,
        }
        clock.done("growth")
    if "ceiling" in parts:
        results["ceiling"] = ceiling.run(world, quick=quick)
        clock.done("ceiling")
    if "two_kinds" in parts:
        results["two_kinds"] = two_kinds.run(world, quick=quick)
        clock.done("two_kinds")
    if "orgs" in parts:
        results["orgs"] = {
            "cost": orgs.cost(world, sizes.org_creates),
            "usage": orgs.usage(world, sizes.org_usage_members),
            "ceiling": org_ceiling.run(
                world, quick=quick, shards=sizes.org_shards, accounts=sizes.org_accounts
            ),
        }
        clock.done("orgs")
    if "holds" in parts:
        results["holds"] = holds.run(world, sizes.org_creates)
        clock.done("holds")
    if "dead_deletes" in parts:
        results["dead_deletes"] = dead_deletes.run(world, sizes.dead_delete_sizes)
        clock.done("dead_deletes")
    if "usage_over" in parts:
        results["usage_over"] = usage_over.run(world)
        clock.done("usage_over")
    if "bursts" in parts:
        results["ceiling_bursts"] = ceiling.burst_check(world, quick=quick, bursts=BURSTS)
        clock.done("bursts")


class _PartClock:
    """Where the run's time went, part by part (results.json: part_seconds)."""

    def __init__(self, started: float) -> None:
        self.started = self.last = started
        self.seconds: dict[str, int] = {}

    def done(self, part: str) -> None:
        now = time.monotonic()
        self.seconds[part] = round(now - self.last)
        self.last = now
        print(f"[bench] {part} done after {now - self.started:.0f} s ({self.seconds[part]} s)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
