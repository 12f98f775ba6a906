"""What the explorer's test modules (tests/integration/test_interleavings.py and
test_org_interleavings.py) share around their runs: a world of their own, botocore's retries
without their sleeps, a readable failure, and the figures written for docs/reliability.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import botocore.endpoint
import pytest

from hybrid_counter.settings import Settings
from localrun.stack.aws_clients import domain_clients
from tests.explorer.catalogue import profile
from tests.explorer.runs import World
from tests.explorer.search import Stats, report, shrink


def explorer_world(stack: Any, stream: Any) -> World:
    # Clients of its own: the explorer's scheduling hooks must not reach other tests' clients.
    clients = domain_clients(stack.dynamodb_url)
    return World(Settings(table_name=stack.table_name), clients, stream)


@contextmanager
def retries_without_backoff() -> Iterator[None]:
    """Botocore still retries every call as its config says, but does not sleep between
    attempts: the explorer orders each attempt itself and runs the domain on its own clock, so a
    throttled call's backoff (up to 1 + 2 + 4 + 8 s in standard mode) only cost wall time; it was
    most of the random schedules' minutes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=lambda _seconds: None))
        yield


def fail_with(world: World, stats: Stats) -> None:
    scenario, result = stats.violations[0]
    small_scenario, small = shrink(world, scenario, result)
    pytest.fail(
        f"{len(stats.violations)} schedule(s) broke an invariant; the smallest found:\n{report(small_scenario, small)}"
        # (to pin it: search.replay(world, scenario, choices) runs this schedule again)
        f"\nscenario: {small_scenario!r}\nchoices: {small.choices!r}"
    )


def write_figures(path: Path, figures: dict[str, dict[str, object]]) -> None:
    """The run's figures, for docs/reliability.md (make test prints the file after the run)."""
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"profile": profile().name, **figures}, indent=1) + "\n")
