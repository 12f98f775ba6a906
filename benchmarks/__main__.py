"""`make bench`: cost, growth, ceilings and latency, written to bench-results/.

    python -m benchmarks                 # everything (about 13 minutes here)
    python -m benchmarks --quick         # smaller sizes, to try it out
    python -m benchmarks --parts cost,growth
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

from benchmarks import ceiling, cost, growth, latency, report
from benchmarks.world import bench_world

PARTS = ("cost", "growth", "ceiling", "latency")
BURSTS = (0.25, 1.0)  # seconds of capacity a bucket holds; the default run uses 0.5


@dataclass(frozen=True)
class Sizes:
    cost_operations: int
    backlogs: list[int]
    account_sizes: list[int]
    sweep_entries: list[int]
    accounts: list[int]
    busy_account: int  # one of account_sizes: the size at which it is also recounted under traffic


FULL = Sizes(
    200,
    [0, 200, 1_000, 10_000],
    [1_000, 10_000, 100_000],
    [100, 1_000, 10_000],
    [100, 1_000, 10_000],
    busy_account=10_000,
)
QUICK = Sizes(50, [0, 200, 1_000], [1_000, 5_000], [100, 500], [100, 500], busy_account=1_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="bench-results")
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
    with bench_world() as world:
        if "cost" in parts:
            results["cost"] = cost.run(world, sizes.cost_operations)
            _progress("cost", started)
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
            _progress("growth", started)
        if "ceiling" in parts:
            results["ceiling"] = ceiling.run(world, quick=args.quick)
            _progress("ceiling", started)
        if "bursts" in parts:
            results["ceiling_bursts"] = ceiling.burst_check(world, quick=args.quick, bursts=BURSTS)
            _progress("bursts", started)
    if "latency" in parts:
        results["latency"] = latency.run(quick=args.quick)
        _progress("latency", started)
    results["seconds"] = round(time.monotonic() - started)
    results["targets"] = report.targets(results)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "results.md").write_text(report.markdown(results))
    report.plots(results, out)
    print((out / "results.md").read_text())
    return 0


def _progress(part: str, started: float) -> None:
    print(f"[bench] {part} done after {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
