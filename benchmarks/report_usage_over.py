"""The report's section and targets for who is near a limit (results.json: ``usage_over``;
usage_over.py). Shaping only: every figure comes from the run."""

from __future__ import annotations

from typing import Any

LISTINGS = (
    ("kind_one_page", "one kind, one page of N rows"),
    ("every_kind_one_page", "every kind, one page of N rows"),
    ("kind_in_pages", "one kind, N rows in pages of 10"),
)


def _cells(figures: dict[str, Any]) -> str:
    return f"{figures['rows']} | {figures['requests']:g} | {figures['read_units']:g}"


def markdown(results: dict[str, Any]) -> list[str]:
    over = results.get("usage_over")
    if not over:
        return []
    lines = [
        f"## Who is near a limit (GET /usage/over): an answer of N rows of {over['accounts']:,} accounts",
        "",
        "Counter items of one kind written directly for every account (under every threshold), N of "
        "them moved over 80 % and judged by the stream path's threshold watcher, whose transaction "
        f"puts them in the near-limit indexes (thresholds {', '.join(map(str, over['thresholds']))}). "
        "Requests and read units per listing (indexes are read eventually consistent).",
        "",
        "| N | listing | rows | requests | read units |",
        "|---|---|---|---|---|",
    ]
    for size, answer in over["answers"].items():
        lines += [f"| {size} | {label} | {_cells(answer[key])} |" for key, label in LISTINGS if key in answer]
    lines += [
        "",
        "| write | requests | write units | index write units (transaction's, as DynamoDB Local reports) |",
        "|---|---|---|---|",
    ]
    for size, answer in over["answers"].items():
        crossing = answer["crossing"]
        lines.append(
            f"| a crossing's record (N = {size}: the transaction, the outbox's removal) | "
            f"{crossing['requests']:g} | {crossing['write_units']:g} | "
            f"{crossing['index_write_units']:g} ({crossing['transaction_index_write_units']:g}) |"
        )
    write = over["counter_write_in_the_index"]
    lines += [
        f"| a counter write of an item in the indexes | {write['requests']:g} | {write['write_units']:g} | "
        f"{write['index_write_units']:g} |",
        "",
    ]
    return lines


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    over = results.get("usage_over")
    if not over:
        return []
    answers = over["answers"]
    sizes = sorted(answers, key=int)
    small, large = answers[sizes[0]]["kind_one_page"], answers[sizes[-1]]["kind_one_page"]
    complete = all(answer["kind_one_page"]["rows"] == int(size) for size, answer in answers.items())
    write = over["counter_write_in_the_index"]
    return [
        {
            "target": "who is near a limit: one kind's listing costs by its answer, not the table",
            "value": f"{small['requests']:g} Queries / {small['read_units']:g} RU for {sizes[0]} rows, "
            f"{large['requests']:g} / {large['read_units']:g} for {sizes[-1]}",
            "goal": "no Scan; requests independent of N and of the table",
            "met": complete
            and small["requests"] == large["requests"]
            and all(
                "Scan" not in answer[key]["requests_by_operation"]
                for answer in answers.values()
                for key, _ in LISTINGS
                if key in answer
            ),
            "note": f"{over['accounts']:,} accounts in the table; each listing read all its rows",
        },
        {
            "target": "a counter write of an item in the near-limit indexes: index writes",
            "value": write["index_write_units"],
            "goal": "0 (only the threshold transaction writes them)",
            "met": write["index_write_units"] == 0,
            "note": "",
        },
    ]
