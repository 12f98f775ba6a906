"""The near-limit part of the benchmark report (benchmarks/report_usage_over.py): its section and
targets come from the run's figures, and a figure that misses its goal is reported as missed."""

from __future__ import annotations

import copy
from typing import Any

from benchmarks import report_usage_over


def per(
    requests: float, by: dict[str, float], reads: float = 0.0, writes: float = 0.0, **more: Any
) -> dict[str, Any]:
    return {
        "requests": requests,
        "requests_by_operation": by,
        "read_units": reads,
        "write_units": writes,
        "index_write_units": 0.0,
        "transaction_index_write_units": 0.0,
        **more,
    }


def answer(rows: int, reads: float) -> dict[str, Any]:
    return {
        "crossing": per(2.1, {"TransactWriteItems": 1, "UpdateItem": 1.1}, 0, 5.3),
        "kind_one_page": per(2, {"Query": 2}, reads, rows=rows, more=False),
        "every_kind_one_page": per(8, {"Query": 8}, 2 * reads, rows=rows, partitions=8),
    }


RESULTS: dict[str, Any] = {
    "usage_over": {
        "accounts": 10_000,
        "kind": "k",
        "thresholds": [80, 100],
        "answers": {
            "10": answer(10, 1),
            "100": {**answer(100, 2), "kind_in_pages": per(20, {"Query": 20}, 10, rows=100, pages=10)},
        },
        "counter_write_in_the_index": per(1, {"UpdateItem": 1}, 0, 1),
    }
}


def test_the_section_shows_each_listing_of_each_answer():
    text = "\n".join(report_usage_over.markdown(RESULTS))
    assert "of 10,000 accounts" in text
    assert "| 10 | one kind, one page of N rows | 10 | 2 | 1 |" in text
    assert "| 100 | one kind, N rows in pages of 10 | 100 | 20 | 10 |" in text
    assert report_usage_over.markdown({}) == []


def test_the_targets_are_met_by_a_listing_that_costs_by_its_answer_and_missed_otherwise():
    assert all(row["met"] for row in report_usage_over.targets(RESULTS))
    worse = copy.deepcopy(RESULTS)
    worse["usage_over"]["answers"]["100"]["kind_one_page"]["requests"] = 12  # grew with N
    worse["usage_over"]["counter_write_in_the_index"]["index_write_units"] = 1.0
    met = [row["met"] for row in report_usage_over.targets(worse)]
    assert met == [False, False]
    short = copy.deepcopy(RESULTS)
    short["usage_over"]["answers"]["10"]["kind_one_page"]["rows"] = 9  # an answer missing a row
    assert report_usage_over.targets(short)[0]["met"] is False
    scanned = copy.deepcopy(RESULTS)
    scanned["usage_over"]["answers"]["10"]["every_kind_one_page"]["requests_by_operation"] = {"Scan": 1}
    assert report_usage_over.targets(scanned)[0]["met"] is False
