"""The report's section and target for what events and history cost (results.json:
``governance``). Shaping only: every figure comes from the run."""

from __future__ import annotations

from typing import Any

from benchmarks.governance import COMPARED, PHASES

LABELS = {
    "create": "create (API path)",
    "stream_per_create": "stream path per create",
    "limit_change": "override change (API path)",
    "stream_after_limit_change": "stream path after the override change",
}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    governance = results.get("governance")
    if not governance:
        return []
    create = governance["extra"]["create"]
    stream = governance["extra"]["stream_per_create"]
    return [
        {
            "target": "extra write units per create on the API path with threshold events on",
            "value": create["total_write_units"],
            "goal": "0",
            "met": create["total_write_units"] == 0 and create["requests"] == 0,
            "note": f"stream path per counted record: {stream['total_write_units']:+g} write units, "
            f"{stream['requests']:+g} requests ({governance['creates']} creates, two crossings)",
        }
    ]


def markdown(results: dict[str, Any]) -> list[str]:
    governance = results.get("governance")
    if not governance:
        return []
    off, on, extra = governance["events_off"], governance["events_on"], governance["extra"]
    thresholds = ", ".join(f"{t} %" for t in governance["thresholds"])
    lines = [
        "## Threshold events and limit history",
        "",
        f"{governance['creates']} creates up to an override of {governance['creates']}, counted by the "
        f"stream path, then the override raised fourfold: with events off (no bus) and on "
        f"(thresholds {thresholds}). Creates and the stream path are per create; the override change "
        "and what the stream path does after it are for the one change.",
        "",
        "| phase | events off: requests / RU / WU | events on | extra |",
        "|---|---|---|---|",
    ]
    for phase in PHASES:
        cells = [
            " / ".join(f"{mode['per_phase'][phase][figure]:g}" for figure in COMPARED) for mode in (off, on)
        ]
        lines.append(
            f"| {LABELS[phase]} | {cells[0]} | {cells[1]} | "
            + " / ".join(f"{extra[phase][figure]:+g}" for figure in COMPARED)
            + " |"
        )
    published = on["events_published"]
    lines += [
        "",
        f"Events published with events on: {published['on_the_way_up']} on the way up, "
        f"{published['after_the_limit_change']} after the override change, in "
        f"{on['put_events_requests']} PutEvents requests (not DynamoDB units). The override change "
        "writes its history item with events off too.",
        "",
    ]
    return lines
