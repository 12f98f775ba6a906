"""The plan caches (plans/limits.py) look an entry up once, with one reading of the clock: an entry
that expires between two readings was a KeyError, a 500 on usage, create and resize (issue 23,
item 10). No network: the plans are a stand-in for the store, the clock a list of readings."""

from __future__ import annotations

import pytest

from hybrid_counter.counters import CounterState
from hybrid_counter.plans import Limits, Plan
from hybrid_counter.plans.store import AccountProfile


class Plans:
    """The two reads Limits makes of the plan store, counted."""

    def __init__(self) -> None:
        self.reads = 0

    def profile_of(self, account_id: str) -> AccountProfile:
        self.reads += 1
        return AccountProfile("pro")

    def get(self, plan_id: str) -> Plan:
        self.reads += 1
        return Plan(plan_id, {"seats": 10})


class Clock:
    """Each reading moves time on by ``step`` seconds: an entry 59.5 s old at one reading is past
    its 60 s at the next."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(0.0)


def test_a_cache_entry_that_expires_between_two_reads_is_no_error(clock: Clock) -> None:
    # Given a plan cached at 0 s under a cache time of 60 s (it expires at 60 s), read on a clock
    # that moves a second at every reading: the account's plan is read at 58.95 s, the plan's
    # entry looked at 59.95 s (fresh) and read at 60.95 s (expired: the old two-step lookup's
    # KeyError)
    plans = Plans()
    limits = Limits(plans, cache_seconds=60, clock=clock)  # type: ignore[arg-type]
    assert limits.judge("acme", "seats")(CounterState()).limit == 10
    clock.now, clock.step = 57.95, 1.0
    # When the limit is read again (and judged, as a create judges it)
    judged = limits.judge("acme", "seats")(CounterState())
    # Then it is read afresh (or served from the cache), never a KeyError
    assert (judged.limit, judged.source) == (10, "plan")
    assert plans.reads >= 2


def test_a_fresh_entry_is_served_from_the_cache(clock: Clock) -> None:
    plans = Plans()
    limits = Limits(plans, cache_seconds=60, clock=clock)  # type: ignore[arg-type]
    limits.judge("acme", "seats")(CounterState())  # (cached)
    clock.now += 30
    assert limits.judge("acme", "seats")(CounterState()).limit == 10
    assert plans.reads == 2  # the account's plan and the plan, once each
