"""Settings every test shares: no real AWS account, Powertools quiet and local."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

PROJECT = Path(__file__).resolve().parent.parent
EVENTS = PROJECT / "events"

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "hybrid-counter")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "HybridCounter")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


def load_event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return data


@pytest.fixture
def event() -> Any:
    return load_event
