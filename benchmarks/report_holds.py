"""The report's section and targets for holds (results.json: ``holds``; holds.py). Shaping
only: every figure comes from the run."""

from __future__ import annotations

from typing import Any

Row = dict[str, Any]
ROWS = (
    ("plain", "create", "plain create (no hold)"),
    ("confirmed", "create", "create with a hold"),
    ("confirmed", "confirm", "confirm"),
    ("confirmed", "stream", "stream path per held create"),
    ("plain", "stream", "stream path per plain create"),
    ("plain", "delete", "plain delete"),
    ("expired", "sweep", "expiry by the sweeper, per hold (Scan, claim, releases, removal, tombstone)"),
    ("expired", "stream", "stream path per expiry"),
)


def cells(per: dict[str, Any]) -> str:
    """One operation's figures as table cells: requests, read units, write units, by operation."""
    by_op = ", ".join(f"{op} {count:g}" for op, count in per["requests_by_operation"].items())
    return f"{per['requests']:g} | {per['read_units']:g} | {per['total_write_units']:g} | {by_op}"


def markdown(results: dict[str, Any]) -> list[str]:
    holds = results.get("holds")
    if not holds:
        return []
    lines = [
        f"## Holds: requests and units per operation ({holds['operations']} of each, one run)",
        "",
        "| operation | requests | read units | write units (with index) | requests by operation |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {label} | {cells(holds[part][phase])} |" for part, phase, label in ROWS]
    reclaim = holds["reclaim"]
    lines += [
        "",
        f"A refused create's reclaim ({reclaim['accounts']} accounts at their limit each way): "
        f"{reclaim['refused_with_nothing_to_reclaim']} refused with nothing to reclaim (half of them "
        "never held), "
        f"{reclaim['admitted_after_reclaiming']} admitted after expiring an expired hold.",
        "",
        "| create at the limit | requests | read units | write units (with index) | requests by operation |",
        "|---|---|---|---|---|",
        f"| refused, the account never held | {cells(reclaim['never'])} |",
        f"| refused, the account held before, nothing expired | {cells(reclaim['nothing'])} |",
        f"| admitted after reclaiming one expired hold | {cells(reclaim['expired'])} |",
        "",
        f"After the expiries the counters were {holds['expired']['counters_after']} "
        f"(best_effort, eventual) for {holds['expired']['expired']} holds expired.",
        "",
    ]
    return lines


def targets(results: dict[str, Any]) -> list[Row]:
    holds = results.get("holds")
    if not holds:
        return []
    plain, held = holds["plain"]["create"], holds["confirmed"]["create"]
    extra = round(held["requests"] - plain["requests"], 3)
    expired = holds["expired"]
    reclaim = holds["reclaim"]
    return [
        {
            "target": "a hold's create against a plain create: extra requests",
            "value": extra,
            "goal": "0 (the hold's keys ride on the pending item)",
            "met": extra == 0,
            "note": f"index write units {held['index_write_units']} vs {plain['index_write_units']}",
        },
        {
            "target": "expired holds released exactly, by the sweeper",
            "value": f"{expired['expired']} of {holds['operations']}; counters {expired['counters_after']}",
            "goal": "all, counters 0",
            "met": expired["expired"] == holds["operations"] and expired["counters_after"] == [0, 0],
            "note": "",
        },
        {
            "target": "a refused create, account that never held: extra requests",
            "value": reclaim["never"]["requests_by_operation"].get("Query", 0),
            "goal": "none",
            "met": reclaim["never"]["requests_by_operation"].get("Query", 0) == 0,
            "note": "its counter item says no hold was ever admitted (holds_used)",
        },
        {
            "target": "a refused create, account that held before: extra requests",
            "value": reclaim["nothing"]["requests_by_operation"].get("Query", 0),
            "goal": "one Query of the HoldIndex",
            "met": reclaim["refused_with_nothing_to_reclaim"] == 2 * reclaim["accounts"],
            "note": "paid only when an admission is refused",
        },
    ]
