"""The holds part of the benchmark report (benchmarks/report_holds.py): its section and targets
come from the run's figures, and a figure that misses its goal is reported as missed."""

from __future__ import annotations

import copy
from typing import Any

from benchmarks import report_holds


def per(requests: float, by: dict[str, float], reads: float = 0.0, writes: float = 0.0) -> dict[str, Any]:
    return {
        "requests": requests,
        "requests_by_operation": by,
        "read_units": reads,
        "total_write_units": writes,
        "index_write_units": 0.0,
    }


RESULTS: dict[str, Any] = {
    "holds": {
        "operations": 10,
        "plain": {
            "create": per(4, {"GetItem": 1, "PutItem": 1, "UpdateItem": 2}, 1, 3),
            "stream": per(0.1, {"TransactWriteItems": 0.1}, 0, 2),
            "delete": per(3, {"DeleteItem": 1, "UpdateItem": 2}, 0, 3),
        },
        "confirmed": {
            "create": per(4, {"GetItem": 1, "PutItem": 1, "UpdateItem": 2}, 1, 5),
            "confirm": per(2, {"GetItem": 1, "UpdateItem": 1}, 1, 2),
            "stream": per(0.1, {"TransactWriteItems": 0.1}, 0, 2),
        },
        "expired": {
            "create": per(4, {"PutItem": 1}, 1, 5),
            "sweep": per(4.1, {"Scan": 0.1, "UpdateItem": 2, "DeleteItem": 1, "PutItem": 1}, 0.1, 6),
            "stream": per(0, {}),
            "expired": 10,
            "counters_after": [0, 0],
        },
        "reclaim": {
            "accounts": 5,
            "refused_with_nothing_to_reclaim": 10,
            "admitted_after_reclaiming": 5,
            "never": per(1, {"GetItem": 1}, 1, 0),
            "nothing": per(2, {"GetItem": 1, "Query": 1}, 1, 0),
            "expired": per(10, {"Query": 1, "UpdateItem": 4}, 2.5, 9),
        },
    }
}


def test_the_section_shows_each_operations_figures() -> None:
    text = "\n".join(report_holds.markdown(RESULTS))
    assert "| confirm | 2 | 1 | 2 | GetItem 1, UpdateItem 1 |" in text
    assert "10 refused with nothing to reclaim (half of them never held), 5 admitted after expiring" in text
    assert "| refused, the account never held | 1 | 1 | 0 | GetItem 1 |" in text
    assert report_holds.markdown({}) == []


def test_targets_are_met_only_by_the_figures_that_meet_them() -> None:
    assert all(row["met"] for row in report_holds.targets(RESULTS))
    worse = copy.deepcopy(RESULTS)
    worse["holds"]["confirmed"]["create"]["requests"] = 5
    worse["holds"]["expired"]["counters_after"] = [1, 0]
    worse["holds"]["reclaim"]["never"]["requests_by_operation"]["Query"] = 1
    met = {row["target"]: row["met"] for row in report_holds.targets(worse)}
    assert met["a hold's create against a plain create: extra requests"] is False
    assert met["expired holds released exactly, by the sweeper"] is False
    assert met["a refused create, account that never held: extra requests"] is False
