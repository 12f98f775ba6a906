"""Powertools Logger/Tracer and metric helpers, built on first use (never at import)."""

from __future__ import annotations

from functools import cached_property

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric


class Observability:
    """One per process. Metrics go out as single EMF lines so concurrent invocations in one
    process (the local runtime) never share a metric set."""

    @cached_property
    def logger(self) -> Logger:
        return Logger()

    @cached_property
    def tracer(self) -> Tracer:
        return Tracer()

    def count(self, name: str, value: int = 1) -> None:
        if value <= 0:
            return
        with single_metric(name=name, unit=MetricUnit.Count, value=value) as metric:
            metric.add_dimension(name="service", value=self.logger.service)


_DEFAULT: Observability | None = None


def default_observability() -> Observability:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Observability()
    return _DEFAULT
