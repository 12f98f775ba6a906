"""Configuration read from the function's environment when a handler first needs it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

CountingMode = Literal["batched", "per_record"]


@dataclass(frozen=True)
class Settings:
    table_name: str
    default_limit: int = 100
    counting_mode: CountingMode = "batched"
    pending_grace_seconds: int = 300

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
        return cls(
            table_name=table_name,
            default_limit=default_limit,
            counting_mode="batched" if mode == "batched" else "per_record",
            pending_grace_seconds=int(env.get("PENDING_GRACE_SECONDS", "300")),
        )
