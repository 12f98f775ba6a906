"""The shaping of the benchmark's events-and-history figures (benchmarks/governance.py and
report_governance.py): pure, on figures made up here."""

from __future__ import annotations

from typing import Any

from benchmarks.governance import COMPARED, PHASES, extra
from benchmarks.report_governance import markdown, targets


def phases(**overrides: dict[str, float]) -> dict[str, dict[str, float]]:
    base = dict.fromkeys(COMPARED, 1.0)
    return {phase: {**base, **overrides.get(phase, {})} for phase in PHASES}


def results(on: dict[str, dict[str, float]]) -> dict[str, Any]:
    off = phases()
    return {
        "governance": {
            "creates": 20,
            "thresholds": [80, 100],
            "events_off": {"per_phase": off, "events_published": {}, "put_events_requests": 0},
            "events_on": {
                "per_phase": on,
                "events_published": {"on_the_way_up": 2, "after_the_limit_change": 2},
                "put_events_requests": 2,
            },
            "extra": extra(off, on),
        }
    }


def test_the_extra_is_what_events_on_cost_beyond_events_off_phase_by_phase():
    on = phases(stream_per_create={"total_write_units": 1.4, "requests": 1.1})
    found = extra(phases(), on)
    assert found["stream_per_create"] == {"requests": 0.1, "read_units": 0.0, "total_write_units": 0.4}
    assert found["create"] == {"requests": 0.0, "read_units": 0.0, "total_write_units": 0.0}


def test_the_target_is_met_only_when_creates_cost_nothing_more():
    assert targets(results(phases()))[0]["met"] is True
    assert targets(results(phases(create={"total_write_units": 1.05})))[0]["met"] is False
    assert targets(results(phases(create={"requests": 1.5})))[0]["met"] is False


def test_no_figures_no_section_and_no_target():
    assert targets({}) == []
    assert markdown({}) == []


def test_the_section_has_a_row_per_phase_with_its_extra():
    lines = markdown(results(phases(limit_change={"total_write_units": 3.0})))
    rows = [line for line in lines if line.startswith("| ") and "phase" not in line]
    assert len(rows) == len(PHASES)
    assert any(
        row.startswith("| override change (API path)") and row.endswith("+0 / +0 / +2 |") for row in rows
    )
