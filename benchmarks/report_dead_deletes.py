"""The report's section and targets for the takeover of a dead delete (results.json:
``dead_deletes``; dead_deletes.py). Shaping only: every figure comes from the run."""

from __future__ import annotations

from typing import Any

from benchmarks.report_holds import cells

Row = dict[str, Any]
LABELS = {
    "takeover_known": "a retried DELETE taking over a dead claim whose release `last_release` names",
    "takeover_by_census": "... whose release nothing names: the census of its range",
    "plain_delete": "a delete (for comparison)",
}


def _figures(per: dict[str, Any]) -> str:
    return f"{per['answer']} | {cells(per)}"


def markdown(results: dict[str, Any]) -> list[str]:
    dead = results.get("dead_deletes")
    if not dead:
        return []
    lines = [
        "## A delete whose process died: its takeover, by the account's size (one run)",
        "",
        "A takeover never releases on a guess (design §4): where `last_release` cannot tell whether "
        "the dead request's release applied, the census of the claim's range (a sixteenth of the "
        "account's resources of the kind) decides.",
        "",
        "| resources | what | answer | requests | read units | write units (with index) | requests by operation |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in dead["sizes"]:
        figures = dead["by_size"][str(size)]
        for case, label in LABELS.items():
            lines.append(f"| {size:,} | {label} | {_figures(figures[case])} |")
    lines += [
        "",
        "Items in the census's range: "
        + ", ".join(f"{dead['by_size'][str(s)]['range_items']:,} of {s:,}" for s in dead["sizes"])
        + ". Counters exact afterwards: "
        + ", ".join(str(dead["by_size"][str(s)]["exact"]) for s in dead["sizes"])
        + ".",
        "",
    ]
    return lines


def targets(results: dict[str, Any]) -> list[Row]:
    dead = results.get("dead_deletes")
    if not dead:
        return []
    by = dead["by_size"]
    largest = str(max(dead["sizes"]))
    census = by[largest]["takeover_by_census"]
    return [
        {
            "target": "a dead delete's takeover by census: released exactly once, counters exact",
            "value": all(by[str(s)]["exact"] for s in dead["sizes"]),
            "goal": "True at every size",
            "met": all(by[str(s)]["exact"] for s in dead["sizes"]),
            "note": f"at {int(largest):,} resources: {census['requests']:g} requests, "
            f"{census['read_units']:g} read units (one range of {by[largest]['range_items']:,} items)",
        }
    ]
