"""Sweeper function (scheduled): finishes what the stream path left for the table (the sweep),
and goes on with a requested audit, within the run's time budget; the next run continues."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from hybrid_counter.runtime import Components

# Stop starting new pages this long before the function's timeout.
SAFETY_MARGIN_MS = 20_000


@cache
def components() -> Components:
    return Components.from_env()


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parts = components()

    def out_of_time() -> bool:
        return context.get_remaining_time_in_millis() < SAFETY_MARGIN_MS

    sweep = parts.sweeper.sweep(until=out_of_time)
    parts.obs.count("PendingSwept", sweep.found)
    summary: dict[str, Any] = {"sweep": sweep.summary()}
    if sweep.finished and parts.sweeper.audit_requested():
        audit = parts.sweeper.audit(until=out_of_time)
        summary["audit"] = audit.summary()
    parts.obs.logger.info("sweeper run", extra=summary)
    return summary
