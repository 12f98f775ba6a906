"""Powertools Logger/Tracer and metric helpers, built on first use (never at import)."""

from __future__ import annotations

import os
from functools import cached_property
from typing import IO

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric

DEFAULT_NAMESPACE = "HybridCounter"  # template.yaml's POWERTOOLS_METRICS_NAMESPACE


class Observability:
    """One per process. Metrics go out as single EMF lines so concurrent invocations in one
    process (the local runtime) never share a metric set. Command-line tools turn metrics off so
    their stdout stays theirs."""

    def __init__(self, emit_metrics: bool = True, log_stream: IO[str] | None = None) -> None:
        self.emit_metrics = emit_metrics
        self._log_stream = log_stream

    @cached_property
    def logger(self) -> Logger:
        return Logger(stream=self._log_stream) if self._log_stream is not None else Logger()

    @cached_property
    def tracer(self) -> Tracer:
        return Tracer()

    def count(self, name: str, value: int = 1) -> None:
        if value <= 0 or not self.emit_metrics:
            return
        # Read per call, not at import; a process with no namespace configured (a script, the
        # benchmark) still emits instead of failing the operation that counted.
        namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
        with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=namespace) as metric:
            metric.add_dimension(name="service", value=self.logger.service)


_DEFAULT: Observability | None = None


def default_observability() -> Observability:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Observability()
    return _DEFAULT
