"""Configuration read from the function's environment when a handler first needs it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hybrid_counter.keys import DEFAULT_KIND, ID_PATTERN, is_valid_id

CountingMode = Literal["batched", "per_record"]


@dataclass(frozen=True)
class Settings:
    table_name: str
    default_limit: int = 100
    counting_mode: CountingMode = "batched"
    pending_grace_seconds: int = 300
    default_kind: str = DEFAULT_KIND
    plan_cache_seconds: float = 60.0

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
        plan_cache_seconds = float(env.get("PLAN_CACHE_SECONDS", "60"))
        if plan_cache_seconds < 0:
            raise RuntimeError("PLAN_CACHE_SECONDS must be >= 0")
        return cls(
            table_name=table_name,
            default_limit=default_limit,
            counting_mode="batched" if mode == "batched" else "per_record",
            pending_grace_seconds=int(env.get("PENDING_GRACE_SECONDS", "300")),
            default_kind=default_kind,
            plan_cache_seconds=plan_cache_seconds,
        )
