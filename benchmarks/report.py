"""The bench's outputs: the targets judged, a markdown table (README), PNG plots (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

from benchmarks import (
    report_dead_deletes,
    report_governance,
    report_holds,
    report_kinds,
    report_orgs,
    report_usage_over,
)
from benchmarks.ceiling_model import aws_ours, aws_reference

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 7 with the measured value and whether it is met."""
    rows: list[dict[str, Any]] = []

    def judge(name: str, value: Any, target: str, met: bool, note: str = "") -> None:
        rows.append({"target": name, "value": value, "goal": target, "met": met, "note": note})

    cost = results.get("cost")
    if cost:
        ours = cost["ours"]["lifecycle"]
        judge(
            "write units per create+delete lifecycle",
            ours["total_write_units"],
            "<= 8 (reference: about 12)",
            ours["total_write_units"] <= 8,
            f"reference measured {cost['reference']['lifecycle']['total_write_units']}",
        )
        judge(
            "counter-item writes per counted resource, stream path",
            cost["ours"]["stream_counter_item_writes_per_resource"],
            "<= 0.02",
            cost["ours"]["stream_counter_item_writes_per_resource"] <= 0.02,
        )
    growth = results.get("growth")
    if growth:
        units = [row["admission_write_units"] for row in growth["admission_vs_deletes_in_flight"]]
        backlog = max(row["deletes_in_flight"] for row in growth["admission_vs_deletes_in_flight"])
        judge(
            "admission write units at any backlog",
            max(units),
            "1.0",
            max(units) == 1.0,
            f"0 to {backlog} deletes in flight",
        )
        drained = growth["admission_vs_deletes_in_flight"]
        judge(
            "counts exact after a burst of deletes drains; heal works after",
            all(r["exact_after_drain"] and r["healed_after_drain"] for r in drained),
            "exact",
            all(r["exact_after_drain"] and r["healed_after_drain"] for r in drained),
            f"up to {backlog} deletes in one burst, stream stopped",
        )
        busy = growth["recount_under_traffic"]
        judge(
            "recount converges under steady traffic",
            f"{busy['census_attempts']} censuses / 16 ranges",
            "converged, exact",
            busy["converged"] and busy["exact_after"],
            f"{busy['resources']} resources, {busy['pairs_per_second_achieved']:g} pairs/s",
        )
    ceiling = results.get("ceiling")
    if ceiling:
        ratio = ceiling["ours_admissions"]["ratio"]
        exact = ceiling["exact_limit_under_throttling"]["exact"]
        machine = ceiling["machine_check"]["kept_up"]
        judge(
            "sustained admissions / model ceiling (simulator), exact limits",
            ratio,
            ">= 0.90, exact",
            ratio >= 0.9 and exact and machine,
            f"limit {ceiling['exact_limit_under_throttling']['limit']}: "
            f"{ceiling['exact_limit_under_throttling']['admitted']} admitted; the machine alone "
            f"{'kept up' if machine else 'did NOT keep up'} at the top step",
        )
        ours, reference = ceiling["ours_admissions"], ceiling["reference_admissions"]
        judge(
            "sustained admissions vs the model's ceiling, ours and the reference",
            f"{ours['ratio']} / {reference['ratio']}",
            "within 15 %",
            abs(ours["ratio"] - 1) <= 0.15 and abs(reference["ratio"] - 1) <= 0.15,
            f"models {ours['model_per_second']} / {reference['model_per_second']} per s "
            f"(capacity alone {ours['capacity_model_per_second']} / {reference['capacity_model_per_second']}), "
            f"burst {ceiling['burst_seconds']:g} s",
        )
        counting = ceiling["counting"]
        off = abs(counting["measured_ratio"] / counting["model_ratio"] - 1)
        judge(
            "batched / per-record counting rate vs the model's ratio",
            f"{counting['measured_ratio']} vs {counting['model_ratio']}",
            "within 15 %",
            off <= 0.15,
            f"C = {counting['units_per_second']:g}, P = {counting['partitions']}; the machine alone "
            f"counted {counting['counts_per_second']['batched_no_simulated_capacity']}/s batched",
        )
    return (
        rows
        + report_kinds.targets(results)
        + report_governance.targets(results)
        + report_orgs.targets(results)
        + report_holds.targets(results)
        + report_dead_deletes.targets(results)
        + report_usage_over.targets(results)
    )


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Run {results['started']}, {results['seconds']} s{' (quick sizes)' if results['quick'] else ''}.",
        "",
    ]
    if results.get("part_seconds"):
        spent = ", ".join(f"{part} {seconds}" for part, seconds in results["part_seconds"].items())
        lines += [f"Seconds by part: {spent}.", ""]
    cost = results.get("cost")
    if cost:
        lines += [
            f"## Cost per operation ({cost['operations']} creates then deletes, DynamoDB Local's ConsumedCapacity)",
            "",
            "| | ours: requests | ours: read units | ours: write units (index) | reference: requests | reference: read units | reference: write units (index) |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in ("create", "stream_per_create", "delete", "stream_per_delete", "lifecycle"):
            o, r = cost["ours"][row], cost["reference"][row]
            lines.append(
                f"| {row.replace('_', ' ')} | {o['requests']} | {o['read_units']} | {o['total_write_units']} ({o['index_write_units']}) "
                f"| {r['requests']} | {r['read_units']} | {r['total_write_units']} ({r['index_write_units']}) |"
            )
        lines += [
            "",
            f"Item sizes: counter item {cost['ours']['item_sizes']['counter_item_bytes']} B, resource {cost['ours']['item_sizes']['resource_item_bytes']} B "
            f"(reference: {cost['reference']['item_sizes']['counter_item_bytes']} B and {cost['reference']['item_sizes']['resource_item_bytes']} B). "
            f"Counter-item writes per resource on the stream path: ours {cost['ours']['stream_counter_item_writes_per_resource']}, "
            f"reference {cost['reference']['stream_counter_item_writes_per_resource']}.",
            "",
        ]
    growth = results.get("growth")
    if growth:
        lines += [
            "## How cost grows",
            "",
            "| deletes in flight | counter item bytes | admission write units | exact after the stream caught up | heal works after |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['deletes_in_flight']} | {r['counter_item_bytes']} | {r['admission_write_units']} | {r['exact_after_drain']} | {r['healed_after_drain']} |"
            for r in growth["admission_vs_deletes_in_flight"]
        ]
        lines += [
            "",
            "| recount of an account of | requests | read units | write units | census attempts |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['resources']} resources | {r['requests']} | {r['read_units']} | {r['write_units']} | {r['census_attempts']} |"
            for r in growth["recount_vs_account_size"]
        ]
        busy = growth["recount_under_traffic"]
        lines += [
            "",
            f"Recount with --fix of an account of {busy['resources']} resources while "
            f"create+delete pairs ran on it ({busy['pairs_per_second_offered']:g}/s offered, "
            f"{busy['pairs_per_second_achieved']:g}/s achieved, {busy['pairs_during_recount']} "
            f"during the recount): drift found "
            f"{busy['drift_found']}, {busy['census_attempts']} range censuses for 16 ranges, "
            f"converged: {busy['converged']}, exact afterwards: {busy['exact_after']}.",
        ]
        lines += ["", "| sweep of | requests | read units | write units |", "|---|---|---|---|"]
        lines += [
            f"| {r['entries']} PendingIndex entries | {r['requests']} | {r['read_units']} | {r['write_units']} |"
            for r in growth["sweep_vs_entries"]
        ]
        lines += [
            "",
            "| heal --all over | requests | read units | write units | healed |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['accounts_read']} accounts | {r['requests']} | {r['read_units']} | {r['write_units']} | {r['healed']} |"
            for r in growth["heal_all_vs_accounts"]
        ]
        lines.append("")
    ceiling = results.get("ceiling")
    if ceiling:
        c = ceiling
        lines += [
            f"## Per-account ceilings (simulator: {c['units_per_second']:g} write units/s per item and partition, {c['partitions']} partitions; AWS: 1,000)",
            "",
            "| | sustained /s | model /s (mean wait 2 W) | sustained / model | capacity alone /s |",
            "|---|---|---|---|---|",
            f"| ours: admissions | {c['ours_admissions']['sustained_per_second']} | {c['ours_admissions']['model_per_second']} | {c['ours_admissions']['ratio']} | {c['ours_admissions']['capacity_model_per_second']} |",
            f"| reference: admissions | {c['reference_admissions']['sustained_per_second']} | {c['reference_admissions']['model_per_second']} | {c['reference_admissions']['ratio']} | {c['reference_admissions']['capacity_model_per_second']} |",
            f"| counting a backlog, batched (C = {c['counting']['units_per_second']:g}, P = {c['counting']['partitions']}) | {c['counting']['counts_per_second']['batched']} | {c['counting']['model_counts_per_second']['batched']} | {round(c['counting']['counts_per_second']['batched'] / c['counting']['model_counts_per_second']['batched'], 3)} | |",
            f"| counting a backlog, per record (same) | {c['counting']['counts_per_second']['per_record']} | {c['counting']['model_counts_per_second']['per_record']} | {round(c['counting']['counts_per_second']['per_record'] / c['counting']['model_counts_per_second']['per_record'], 3)} | |",
            "",
            f"Offered-load steps of {c['ours_admissions']['step_seconds']:g} s, back to back (a step keeps up when >= 98 % of creates are admitted and the "
            "creates the eventual counter does not count yet, read off the table every quarter second through "
            "the step's second half, average under two windows of admissions; a step that falls behind is run once more):",
            "",
            "| design | offered /s | admitted | uncounted creates | kept up |",
            "|---|---|---|---|---|",
            *[
                f"| {name} | {step['offered_per_second']} | {step['admitted_fraction']} | {step['uncounted_creates']} | {step['kept_up']} |"
                for name, key in (("ours", "ours_admissions"), ("reference", "reference_admissions"))
                for step in c[key]["steps"]
            ],
            f"| ours, no simulated capacity | {c['machine_check']['offered_per_second']} | {c['machine_check']['admitted_fraction']} | {c['machine_check']['uncounted_creates']} | {c['machine_check']['kept_up']} |",
            "",
            f"Bucket: {c['burst_seconds']:g} s of capacity. On AWS (C = 1,000; an account at its ceiling fills "
            f"batches back to back, so capacity binds) the model gives ours {aws_ours():.0f} admissions/s "
            f"per account and the reference {aws_reference():.0f}. Exact limit under throttling: "
            f"{c['exact_limit_under_throttling']['admitted']} of {c['exact_limit_under_throttling']['creates']} creates admitted against a limit of {c['exact_limit_under_throttling']['limit']}.",
            "",
        ]
    bursts = results.get("ceiling_bursts")
    if bursts:
        lines += [
            f"## The reference's ceiling at other bursts (simulator, C = 10, steps of {next(iter(bursts.values()))['step_seconds']:g} s)",
            "",
            "| bucket (s of capacity) | sustained /s | model /s (mean wait 2 W) | sustained / model | capacity alone /s | steps (offered /s: uncounted creates) |",
            "|---|---|---|---|---|---|",
            *[
                f"| {burst} | {r['sustained_per_second']} | {r['model_per_second']} | {r['ratio']} | {r['capacity_model_per_second']} | "
                + ", ".join(
                    f"{s['offered_per_second']}: {s['uncounted_creates']}{'' if s['kept_up'] else ' (behind)'}"
                    for s in r["steps"]
                )
                + " |"
                for burst, r in bursts.items()
            ],
            "",
        ]
    lines += report_kinds.markdown(results)
    lines += report_governance.markdown(results)
    lines += report_orgs.markdown(results)
    lines += report_holds.markdown(results)
    lines += report_dead_deletes.markdown(results)
    lines += report_usage_over.markdown(results)
    latency = results.get("latency")
    if latency:
        lines += [
            "## Latency and convergence over HTTP (local runtime; times on this machine)",
            "",
            latency.get("table", ""),
            "",
        ]
    lines += ["## Targets", "", "| target | measured | goal | met | note |", "|---|---|---|---|---|"]
    lines += [
        f"| {t['target']} | {t['value']} | {t['goal']} | {_met(t['met'])} | {t['note']} |"
        for t in results.get("targets", [])
    ]
    return "\n".join(lines) + "\n"


def _met(met: bool | None) -> str:
    """A target met, missed, or not run (None: the run could not measure it)."""
    return "not run" if met is None else "yes" if met else "**no**"


def plots(results: dict[str, Any], out: Path) -> None:
    for name, draw in (
        ("cost", _plot_cost),
        ("growth", _plot_growth),
        ("ceiling", _plot_ceiling),
        ("latency", _plot_latency),
    ):
        if results.get(name):
            draw(results[name], out)


def _plot_cost(cost: dict[str, Any], out: Path) -> None:
    phases = ["create", "stream_per_create", "delete", "stream_per_delete"]
    figure, axis = plt.subplots(figsize=(7, 4))
    for offset, design in ((-0.2, "ours"), (0.2, "reference")):
        values = [cost[design][phase]["total_write_units"] for phase in phases]
        axis.bar([i + offset for i in range(len(phases))], values, width=0.4, label=design)
    axis.set_xticks(range(len(phases)), [p.replace("_", " ") for p in phases])
    axis.set_ylabel("write units per resource")
    axis.set_title("Write units per operation (same workload, same run)")
    axis.legend()
    _save(figure, out / "cost_per_operation.png")


def _plot_growth(growth: dict[str, Any], out: Path) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    rows = growth["admission_vs_deletes_in_flight"]
    backlog = [max(r["deletes_in_flight"], 1) for r in rows]
    axes[0].plot(
        backlog, [r["admission_write_units"] for r in rows], marker="o", label="admission write units"
    )
    axes[0].plot(backlog, [r["counter_item_bytes"] / 1024 for r in rows], marker="s", label="counter item KB")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("deletes in flight")
    axes[0].set_ylim(0, 2)
    axes[0].legend()
    axes[0].set_title("Admission vs deletes in flight")
    for key, x, y, label, marker in (
        ("recount_vs_account_size", "resources", "read_units", "recount read units (x resources)", "o"),
        ("heal_all_vs_accounts", "accounts_read", "read_units", "heal --all read units (x accounts)", "s"),
        ("sweep_vs_entries", "entries", "write_units", "sweep write units (x entries)", "^"),
    ):
        axes[1].plot([r[x] for r in growth[key]], [r[y] for r in growth[key]], marker=marker, label=label)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("resources / accounts / entries")
    axes[1].legend(fontsize=8)
    axes[1].set_title("Maintenance cost vs size")
    _save(figure, out / "growth.png")


def _plot_ceiling(ceiling: dict[str, Any], out: Path) -> None:
    measured = [
        ceiling["ours_admissions"]["sustained_per_second"],
        ceiling["reference_admissions"]["sustained_per_second"],
    ]
    model = [
        ceiling["ours_admissions"]["model_per_second"],
        ceiling["reference_admissions"]["model_per_second"],
    ]
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.bar([-0.2, 0.8], model, width=0.4, label="model")
    axis.bar([0.2, 1.2], measured, width=0.4, label="simulator")
    axis.set_xticks([0, 1], ["ours", "reference"])
    axis.set_ylabel(f"admissions/s per account at {ceiling['units_per_second']:g} WU/s")
    axis.set_title("Per-account admission ceiling")
    axis.legend()
    _save(figure, out / "ceiling.png")


def _plot_latency(latency: dict[str, Any], out: Path) -> None:
    rates = latency.get("rates") or []
    if not rates:
        return
    figure, axis = plt.subplots(figsize=(7, 4))
    for op in ("create", "delete"):
        for q in ("p50", "p99"):
            axis.plot(
                [r["pairs_per_second"] for r in rates],
                [r[op][q] for r in rates],
                marker="o",
                label=f"{op} {q}",
            )
    axis.set_xlabel("create+delete pairs per second (open loop)")
    axis.set_ylabel("ms from the scheduled send")
    axis.set_yscale("log")
    axis.legend()
    axis.set_title("HTTP latency through the local runtime")
    _save(figure, out / "latency.png")


def _save(figure: Any, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
