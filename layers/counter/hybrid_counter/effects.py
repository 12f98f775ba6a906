"""The inputs of a flow that are not in the table: time, fresh ids, and how to wait for another flow.

Production uses the defaults; the interleaving explorer and tests replace them to make a run
deterministic (fixed ids and clock) and to turn a wait into a scheduling point.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from hybrid_counter.aws import RetryPolicy


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Waiter:
    """Bounded polling for another request's write to land (a create's admission, a delete's
    release): ``until`` calls ``probe`` until it returns something, at most ``attempts`` times."""

    attempts: int = 20
    delay: float = 0.05
    sleep: Callable[[float], None] = time.sleep

    def until[T](self, probe: Callable[[], T | None]) -> T | None:
        for attempt in range(self.attempts):
            found = probe()
            if found is not None:
                return found
            if attempt < self.attempts - 1:
                self.sleep(self.delay)
        return None


@dataclass
class Effects:
    clock: Callable[[], float] = time.time
    new_id: Callable[[], str] = _new_id
    waiter: Waiter = field(default_factory=Waiter)
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def incarnation(self) -> str:
        # 64 random bits tell the incarnations of one id apart; a short token keeps the counter item small.
        return self.new_id()[:16]
