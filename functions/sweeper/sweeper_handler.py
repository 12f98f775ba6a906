"""Sweeper function (scheduled): finishes counting work the stream path left behind, then heals
best-effort counters that drifted below the eventual counter."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from hybrid_counter.runtime import Components


@cache
def components() -> Components:
    return Components.from_env()


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parts = components()
    outcome = parts.sweeper.sweep()
    parts.obs.count("PendingSwept", outcome.found)
    summary = {
        "pending_found": outcome.found,
        "counted": outcome.report.counted,
        "uncounted": outcome.report.uncounted,
        "hard_deleted_uncounted": outcome.report.hard_deleted_uncounted,
        "already_done": outcome.report.already_done,
    }
    healed = [outcome for outcome in parts.healer.heal_all() if outcome.healed]
    summary["best_effort_healed"] = len(healed)
    parts.obs.logger.info("sweep finished", extra=summary)
    return summary
