"""Metrics are telemetry: emitting one never fails the operation that counted."""

from __future__ import annotations

import json

import pytest

from hybrid_counter.observability import DEFAULT_NAMESPACE, Observability


def test_a_metric_without_a_configured_namespace_goes_to_the_templates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a process with no namespace configured (a script, the benchmark)
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    # When it counts
    Observability().count("BestEffortHealed")
    # Then one EMF line goes out under the template's namespace
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == DEFAULT_NAMESPACE
    assert line["BestEffortHealed"] == [1.0]


def test_the_configured_namespace_wins(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Elsewhere")
    Observability().count("ResourcesCreated", 2)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Elsewhere"
    assert line["ResourcesCreated"] == [2.0]
