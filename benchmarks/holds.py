"""What holds cost (resources/holds.py): requests, read units and write units of a hold that is
confirmed and of one that expires (released by the sweeper), each against a plain create and
delete in the same run; and what a refused create pays to reclaim expired holds first.

- **confirmed**: the create with ``hold_seconds`` (the pending item carries the HoldIndex's
  keys: an index write), the confirm (a GetItem and one conditional UpdateItem that takes it out
  of the index), the stream path's count.
- **expired**: the same create, then the sweeper's run once the deadline passed: its Scan of the
  HoldIndex, the expiry's claim (conditional on the deadline), the delete's release and removal,
  the tombstone; the stream path after it.
- **reclaim**: an account at its limit. A create refused on an account that never held pays
  nothing more (its counter item says so: ``holds_used``); on one that held before, with nothing
  expired, one Query of the HoldIndex more; one refused with expired holds expires them and is
  judged again (admitted).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.world import BenchWorld
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects
from hybrid_counter.errors import LimitExceeded

HOLD_SECONDS = 60


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def run(world: BenchWorld, n: int) -> dict[str, Any]:
    return {
        "operations": n,
        "plain": _plain(world, n),
        "confirmed": _confirmed(world, n),
        "expired": _expired(world, n),
        "reclaim": _reclaim(world, max(5, n // 10)),
    }


def _plain(world: BenchWorld, n: int) -> dict[str, Any]:
    service, account = world.service(), world.account("plain")
    service.set_limit(account, 10 * n)
    counter = world.counter()
    with world.meter.labeled("holds:plain:create"):
        ids = [service.create(account, f"p{i}", {})[0].resource_id for i in range(n)]
    with world.meter.labeled("holds:plain:stream"):
        world.deliver(account, counter)
    with world.meter.labeled("holds:plain:delete"):
        for rid in ids:
            service.delete(account, rid)
    return {
        phase: world.meter.tally(f"holds:plain:{phase}").per(n) for phase in ("create", "stream", "delete")
    }


def _confirmed(world: BenchWorld, n: int) -> dict[str, Any]:
    service, account = world.service(), world.account("held")
    service.set_limit(account, 10 * n)
    counter = world.counter()
    with world.meter.labeled("holds:confirmed:create"):
        ids = [
            service.create(account, f"h{i}", {}, hold_seconds=HOLD_SECONDS)[0].resource_id for i in range(n)
        ]
    with world.meter.labeled("holds:confirmed:confirm"):
        for rid in ids:
            service.confirm(account, rid)
    with world.meter.labeled("holds:confirmed:stream"):
        world.deliver(account, counter)
    return {
        phase: world.meter.tally(f"holds:confirmed:{phase}").per(n)
        for phase in ("create", "confirm", "stream")
    }


def _expired(world: BenchWorld, n: int) -> dict[str, Any]:
    clock = Clock(time.time())
    service, account = world.service(Effects(clock=clock)), world.account("expiring")
    service.set_limit(account, 10 * n)
    counter = world.counter()
    with world.meter.labeled("holds:expired:create"):
        for i in range(n):
            service.create(account, f"e{i}", {}, hold_seconds=HOLD_SECONDS)
    world.deliver(account, counter)
    clock.now += HOLD_SECONDS + 1
    sweeper = Sweeper(world.table, counter, world.settings.pending_grace_seconds, world.clients, clock=clock)
    with world.meter.labeled("holds:expired:sweep"):
        expired = sweeper.sweep().holds_expired
    with world.meter.labeled("holds:expired:stream"):
        world.deliver(account, counter)
    figures = {
        phase: world.meter.tally(f"holds:expired:{phase}").per(n) for phase in ("create", "sweep", "stream")
    }
    state = service.counters.read(account)
    return figures | {"expired": expired, "counters_after": [state.best_effort, state.eventual]}


def _reclaim(world: BenchWorld, n: int) -> dict[str, Any]:
    """n accounts at their limit (1) that never held, n whose hold was confirmed (nothing to
    reclaim either way), then n with an expired hold."""
    clock = Clock(time.time())
    service = world.service(Effects(clock=clock))
    never = [world.account("full") for _ in range(n)]
    confirmed = [world.account("confirmed") for _ in range(n)]
    expiring = [world.account("reclaim") for _ in range(n)]
    for account in never + confirmed + expiring:
        service.set_limit(account, 1)
    for account in never:
        service.create(account, "kept", {})
    for account in confirmed + expiring:
        service.create(account, "held", {}, "held", hold_seconds=HOLD_SECONDS)
    for account in confirmed:
        service.confirm(account, "held")
    clock.now += HOLD_SECONDS + 1
    refused = 0
    for label, accounts in (("never", never), ("nothing", confirmed)):
        with world.meter.labeled(f"holds:reclaim:{label}"):
            for account in accounts:
                try:
                    service.create(account, "more", {})
                except LimitExceeded:
                    refused += 1
    admitted = 0
    with world.meter.labeled("holds:reclaim:expired"):
        for account in expiring:
            service.create(account, "more", {})
            admitted += 1
    return {
        "accounts": n,
        "refused_with_nothing_to_reclaim": refused,
        "admitted_after_reclaiming": admitted,
        "never": world.meter.tally("holds:reclaim:never").per(n),
        "nothing": world.meter.tally("holds:reclaim:nothing").per(n),
        "expired": world.meter.tally("holds:reclaim:expired").per(n),
    }
