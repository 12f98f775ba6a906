"""The report's sections and targets for issue 18's figures: plans, many kinds, units, two kinds at
once (results.json: ``kinds`` and ``two_kinds``). Shaping only: every figure comes from the run."""

from __future__ import annotations

from typing import Any

Row = dict[str, Any]


def targets(results: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []

    def judge(name: str, value: Any, goal: str, met: bool, note: str = "") -> None:
        rows.append({"target": name, "value": value, "goal": goal, "met": met, "note": note})

    kinds = results.get("kinds")
    if kinds:
        plans, many, units = kinds["plans"], kinds["many_kinds"], kinds["units"]
        extra = plans["extra_read_units_per_create_steady"]
        expired = plans["stored_plan"]["extra"]["expired"]
        judge(
            "extra read units per create with plans, steady state",
            extra,
            "0",
            extra == 0,
            f"{plans['creates']} creates on a stored plan vs the built-in default; first create after "
            f"the cache expired: +{expired['read_units']:g} read units ({expired['get_items']:g} GetItem)",
        )
        usage = many["as_made"]
        judge(
            f"usage of an account of {many['kinds']} kinds",
            f"{usage['requests']} request, {usage['read_units']:g} read units",
            "one Query (design: about 10 read units)",
            usage["requests"] == 1,
            f"counter items {usage['counter_items']['min_bytes']} to {usage['counter_items']['max_bytes']} B; "
            f"every range used: {many['widened']['read_units']:g} read units",
        )
        lifecycle = units["differences"]["lifecycle"]
        unchanged = all(value == 0 for value in lifecycle.values())
        judge(
            f"create+delete lifecycle with units = {units['units']} vs 1",
            " / ".join(f"{value:+g}" for value in lifecycle.values()),
            "unchanged",
            unchanged,
            "requests / read units / write units per lifecycle",
        )
    two = results.get("two_kinds")
    if two:
        ratios = [k["ratio"] for k in two["kinds"].values()]
        judge(
            "two kinds of one account at once: each kind's sustained / the one-item model",
            " / ".join(f"{r:g}" for r in ratios),
            ">= 0.90 each (not 0.5)",
            all(r >= 0.9 for r in ratios),
            f"model {two['model_per_second']}/s a kind; the account sustained "
            f"{two['account_sustained_per_second']}/s in all",
        )
    return rows


def markdown(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    kinds = results.get("kinds")
    if kinds:
        lines += _plans(kinds["plans"]) + _many_kinds(kinds["many_kinds"]) + _units(kinds["units"])
    two = results.get("two_kinds")
    if two:
        lines += _two_kinds(two, results.get("ceiling"))
    return lines


def _plans(plans: dict[str, Any]) -> list[str]:
    setups = (("built-in default plan", "builtin_default"), ("stored plan", "stored_plan"))
    lines = [
        f"## Plans: reads per create ({plans['creates']} creates through one service, "
        f"PlanCacheSeconds {plans['plan_cache_seconds']:g})",
        "",
        "| account on (no override) | requests / create | read units / create | write units / create | GetItem / create |",
        "|---|---|---|---|---|",
    ]
    for name, key in setups:
        warm = plans[key]["per_create"]["warm"]
        lines.append(
            f"| {name}, steady state | {warm['requests']} | {warm['read_units']} | "
            f"{warm['total_write_units']} | {warm['requests_by_operation'].get('GetItem', 0)} |"
        )
    lines += [
        "",
        "| one create beyond the steady state: extra requests / read units | built-in default plan | stored plan |",
        "|---|---|---|",
    ]
    for phase, label in (
        ("cold", "first create of the process (both caches cold)"),
        ("other_account", "first create of another account on the plan (plan cached)"),
        ("expired", "first create after the caches expired"),
    ):
        cells = [
            f"{plans[key]['extra'][phase]['requests']:+g} / {plans[key]['extra'][phase]['read_units']:+g}"
            for _, key in setups
        ]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    lines += [
        "",
        f"Steady state with a stored plan: {plans['extra_read_units_per_create_steady']:+g} read units per "
        "create against the built-in default. The account's plan is cached per account, the plan's "
        "limits per plan: each account's first create in a process, and again every "
        "PlanCacheSeconds, reads its plan item (also for the default plan, where the item is absent).",
        "",
    ]
    return lines


def _many_kinds(many: dict[str, Any]) -> list[str]:
    lines = [
        f"## An account of {many['kinds']} kinds: the usage read",
        "",
        "| usage of | requests | read units | kinds reported | counter items | bytes min / mean / max | total bytes | read units by size (4 KB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, label in (
        ("one_kind", "one kind"),
        ("as_made", f"{many['kinds']} kinds, as the API made them"),
        ("cold_cache", f"{many['kinds']} kinds, a new process (caches cold)"),
        ("widened", f"{many['kinds']} kinds, every range used"),
    ):
        row, items = many[key], many[key]["counter_items"]
        ops = ", ".join(f"{op} {n}" for op, n in row["requests_by_operation"].items())
        lines.append(
            f"| {label} | {row['requests']} ({ops}) | {row['read_units']:g} | {row['kinds_reported']} "
            f"| {items['items']} | {items['min_bytes']} / {items['mean_bytes']:g} / {items['max_bytes']} "
            f"| {items['total_bytes']} | {items['query_read_units_by_size']} |"
        )
    lines += [
        "",
        "Made through the API: per kind two creates, one resized to 5 units, the other deleted, "
        f"then counted by the stream path (exact on every kind: {many['exact']}). Every range used: "
        "each item given all 16 ranges' shares (1,000 units a range), the largest it gets.",
        "",
    ]
    return lines


def _units(units: dict[str, Any]) -> list[str]:
    n = units["units"]
    lines = [
        f"## Units: the lifecycle at {n} units against 1 ({units['operations']} of each)",
        "",
        f"| | 1 unit: requests | read units | write units | {n} units: requests | read units | write units |",
        "|---|---|---|---|---|---|---|",
    ]
    for phase in ("create", "stream_per_create", "delete", "stream_per_delete", "lifecycle"):
        one, many = units["one_unit"][phase], units["many_units"][phase]
        lines.append(
            f"| {phase.replace('_', ' ')} | {one['requests']} | {one['read_units']} | {one['total_write_units']} "
            f"| {many['requests']} | {many['read_units']} | {many['total_write_units']} |"
        )
    lines += [
        "",
        "| resize of a counted resource | API requests | read units | write units | stream path requests | read units | write units |",
        "|---|---|---|---|---|---|---|",
    ]
    for phase, label in (("up", f"{n} to {2 * n} units"), ("down", f"{2 * n} to {n} units")):
        api, stream = units["resize"][phase]["api"], units["resize"][phase]["stream"]
        lines.append(
            f"| {label} | {api['requests']} | {api['read_units']} | {api['total_write_units']} "
            f"| {stream['requests']} | {stream['read_units']} | {stream['total_write_units']} |"
        )
    lines += ["", f"Counts exact after the resizes: {units['resize']['exact']}.", ""]
    return lines


def _two_kinds(two: dict[str, Any], ceiling: dict[str, Any] | None) -> list[str]:
    alone = ceiling["ours_admissions"]["sustained_per_second"] if ceiling else None
    kinds = list(two["kinds"])
    lines = [
        f"## Two kinds of one account at once (simulator: {two['units_per_second']:g} write units/s per item)",
        "",
        "| kind | sustained /s | model /s (one item) | sustained / model | one kind alone (ceiling part) /s |",
        "|---|---|---|---|---|",
        *[
            f"| {kind} | {k['sustained_per_second']} | {two['model_per_second']} | {k['ratio']} | "
            f"{'' if alone is None else alone} |"
            for kind, k in two["kinds"].items()
        ],
        f"| the account, both kinds | {two['account_sustained_per_second']} | | | |",
        "",
        f"Steps of {two['step_seconds']:g} s, both kinds offered the same rate at once "
        "(admitted fraction, uncounted creates, kept up):",
        "",
        "| offered /s, each kind | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for index, step in enumerate(two["kinds"][kinds[0]]["steps"]):
        cells = [_step_cell(two["kinds"][kind]["steps"][index]) for kind in kinds]
        lines.append(f"| {step['offered_per_second']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"One stream consumer for the account: a counting transaction held "
        f"{two['actions_per_counting_transaction']:g} actions on average (a counter action per kind in "
        f"the batch, one per resource); {two['throttled_requests']} API requests throttled.",
        "",
    ]
    return lines


def _step_cell(step: dict[str, Any]) -> str:
    return f"{step['admitted_fraction']}, {step['uncounted_creates']}, {'yes' if step['kept_up'] else 'no'}"
