"""Configuration read from the function's environment when a handler first needs it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hybrid_counter.keys import DEFAULT_KIND, ID_PATTERN, check_kind, is_valid_id

CountingMode = Literal["batched", "per_record"]


@dataclass(frozen=True)
class Settings:
    table_name: str
    default_limit: int = 100
    counting_mode: CountingMode = "batched"
    pending_grace_seconds: int = 300
    default_kind: str = DEFAULT_KIND
    plan_cache_seconds: float = 60.0
    event_bus_name: str | None = None  # None: no events are published (or kept to publish)
    usage_thresholds: tuple[int, ...] = (80, 100)
    threshold_hysteresis_percent: int = 5
    history_retention_days: int = 0  # 0: keep every history record for ever
    hold_max_seconds: int = 86_400  # the longest hold a create may ask for (holds.py)
    event_log_days: int = 7  # how far back GET /events reads, and how long EVENT# items stay

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        table_name = env.get("TABLE_NAME", "")
        if not table_name:
            raise RuntimeError("TABLE_NAME is not set; it comes from template.yaml's Globals")
        mode = env.get("COUNTING_MODE", "batched")
        if mode not in ("batched", "per_record"):
            raise RuntimeError(f"COUNTING_MODE must be batched or per_record, not {mode!r}")
        default_limit = int(env.get("DEFAULT_RESOURCE_LIMIT", "100"))
        if default_limit < 0:
            raise RuntimeError("DEFAULT_RESOURCE_LIMIT must be >= 0")
        default_kind = env.get("DEFAULT_KIND") or DEFAULT_KIND
        if not is_valid_id(default_kind):
            raise RuntimeError(f"DEFAULT_KIND must match {ID_PATTERN}, not {default_kind!r}")
        try:
            check_kind(default_kind)
        except ValueError as error:
            raise RuntimeError(f"DEFAULT_KIND: {error}") from error
        plan_cache_seconds = float(env.get("PLAN_CACHE_SECONDS", "60"))
        if plan_cache_seconds < 0:
            raise RuntimeError("PLAN_CACHE_SECONDS must be >= 0")
        thresholds = _thresholds(env.get("USAGE_THRESHOLDS", "80,100"))
        hysteresis = int(env.get("THRESHOLD_HYSTERESIS_PERCENT", "5"))
        if not 0 <= hysteresis <= 50:
            raise RuntimeError("THRESHOLD_HYSTERESIS_PERCENT must be between 0 and 50")
        retention = int(env.get("HISTORY_RETENTION_DAYS", "0"))
        if retention < 0:
            raise RuntimeError("HISTORY_RETENTION_DAYS must be >= 0 (0: for ever)")
        hold_max = int(env.get("HOLD_MAX_SECONDS", "86400"))
        if hold_max < 1:
            raise RuntimeError("HOLD_MAX_SECONDS must be >= 1")
        log_days = int(env.get("EVENT_LOG_DAYS", "7"))
        if log_days < 1:
            raise RuntimeError("EVENT_LOG_DAYS must be >= 1")
        return cls(
            table_name=table_name,
            default_limit=default_limit,
            counting_mode="batched" if mode == "batched" else "per_record",
            pending_grace_seconds=int(env.get("PENDING_GRACE_SECONDS", "300")),
            default_kind=default_kind,
            plan_cache_seconds=plan_cache_seconds,
            event_bus_name=env.get("EVENT_BUS_NAME") or None,
            usage_thresholds=thresholds,
            threshold_hysteresis_percent=hysteresis,
            history_retention_days=retention,
            hold_max_seconds=hold_max,
            event_log_days=log_days,
        )


def _thresholds(text: str) -> tuple[int, ...]:
    """ "80,100" -> (80, 100): percentages of a limit, each 1..1000, strictly increasing."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as error:
        raise RuntimeError(f"USAGE_THRESHOLDS must be comma-separated integers, not {text!r}") from error
    if not values or any(not 1 <= v <= 1000 for v in values) or list(values) != sorted(set(values)):
        raise RuntimeError(
            f"USAGE_THRESHOLDS must be increasing percentages between 1 and 1000, not {text!r}"
        )
    return values
