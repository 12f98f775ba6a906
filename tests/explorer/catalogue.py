"""The scenarios the explorer runs, and its two profiles.

Every pair of API operations on one account and one id (a create by POST, a create by PUT of
the id, a delete of it, a limit change), from the starting points where they can meet: the id
absent with one slot left, the id live and counted at the limit, the id live but not yet
counted by the stream path. A pair of the same PUT is a client retrying its request while the
first attempt still runs; a pair of deletes, a retried delete.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from tests.explorer.runs import BACKGROUNDS, OpSpec, Scenario

POST, PUT, DELETE = OpSpec("post"), OpSpec("put", "x"), OpSpec("delete", "x")


def limit(n: int) -> OpSpec:
    return OpSpec("limit", n)


# (name, limit, counted before, uncounted before)
ABSENT_ONE_SLOT = ("x absent, one slot left", 1, (), ())
ABSENT_OTHER_HOLDS_ONE = ("x absent, o holds one of two slots", 2, ("o",), ())
LIVE_AT_LIMIT = ("x live and counted, at the limit", 1, ("x",), ())
LIVE_UNCOUNTED = ("x live, not yet counted, one slot left", 2, (), ("x",))

PAIRS: list[tuple[tuple[OpSpec, OpSpec], tuple[tuple[str, int, tuple[str, ...], tuple[str, ...]], ...]]] = [
    ((POST, POST), (ABSENT_ONE_SLOT, ABSENT_OTHER_HOLDS_ONE)),
    ((POST, PUT), (ABSENT_ONE_SLOT, LIVE_AT_LIMIT)),
    ((POST, DELETE), (LIVE_AT_LIMIT, LIVE_UNCOUNTED)),
    ((POST, limit(2)), (ABSENT_ONE_SLOT,)),
    ((PUT, PUT), (ABSENT_ONE_SLOT, LIVE_AT_LIMIT, LIVE_UNCOUNTED)),
    ((PUT, DELETE), (ABSENT_ONE_SLOT, LIVE_AT_LIMIT, LIVE_UNCOUNTED)),
    ((PUT, limit(0)), (ABSENT_ONE_SLOT,)),
    ((DELETE, DELETE), (LIVE_AT_LIMIT, LIVE_UNCOUNTED)),
    ((DELETE, limit(0)), (LIVE_AT_LIMIT,)),
    ((limit(2), limit(0)), (ABSENT_ONE_SLOT,)),
]


# Repairs and TTL meeting API operations, from what requests that died long ago left behind:
# (name, limit, counted before, stuck (id, how), stream records lost)
AUDIT, RECOUNT, TTL = OpSpec("audit", "x"), OpSpec("recount", "x"), OpSpec("ttl", "x")
X_CLAIMED = ("x claimed by a delete that died long ago, y live", 2, ("y",), (("x", "claimed"),), False)
X_RELEASED = ("x deleted (204) but its item left behind, y live", 2, ("y",), (("x", "released"),), False)
X_ADMITTED = (
    "x admitted and left pending by a create that died, its records lost, at the limit",
    1,
    (),
    (("x", "admitted"),),
    True,
)
X_UNADMITTED = (
    "x left pending by a create that died before its admission",
    1,
    (),
    (("x", "unadmitted"),),
    True,
)

REPAIR_SCENARIOS: list[
    tuple[tuple[OpSpec, ...], tuple[tuple[str, int, tuple[str, ...], tuple[tuple[str, str], ...], bool], ...]]
] = [
    # A repair acts on the incarnation it read, never on the id (the client retries and re-creates)
    ((AUDIT, DELETE, PUT), (X_CLAIMED,)),
    ((RECOUNT, DELETE, PUT), (X_CLAIMED,)),
    # A PUT after a delete that released its slot creates, or answers 503; never "exists"
    ((PUT, PUT), (X_RELEASED,)),
    ((PUT, DELETE), (X_RELEASED,)),
    # An admitted create left pending is finished or rolled back with its slot, whatever was lost
    ((AUDIT, PUT), (X_ADMITTED, X_UNADMITTED)),
    ((RECOUNT, PUT), (X_ADMITTED,)),
    ((AUDIT, POST), (X_ADMITTED,)),
    ((TTL, AUDIT), (X_ADMITTED, X_UNADMITTED)),
    ((TTL, RECOUNT), (X_ADMITTED,)),
]


def repair_scenarios(backgrounds: tuple[str, ...] = ()) -> list[Scenario]:
    scenarios = []
    for ops, starts in REPAIR_SCENARIOS:
        for name, cap, counted, stuck, lost in starts:
            label = " + ".join(str(op) for op in ops)
            scenarios.append(
                Scenario(
                    f"{label}, {name}",
                    cap,
                    ops,
                    counted,
                    backgrounds=backgrounds,
                    stuck=stuck,
                    records_lost=lost,
                )
            )
    return scenarios


def pair_scenarios(backgrounds: tuple[str, ...] = ()) -> list[Scenario]:
    scenarios = []
    for (first, second), starts in PAIRS:
        for name, cap, counted, uncounted in starts:
            scenarios.append(
                Scenario(f"{first} + {second}, {name}", cap, (first, second), counted, uncounted, backgrounds)
            )
    return scenarios


@dataclass(frozen=True)
class Profile:
    name: str
    # Every pair exhaustively, once with each of these: () = no background step, ("stream",) =
    # a stream delivery placed at every point of every interleaving, and so on.
    background_sets: tuple[tuple[str, ...], ...]
    # Random schedules of every pair with every background step (when not exhaustive above).
    background_samples: int
    # Random schedules of 3 to 6 operations, with faults at any call.
    random_runs: int
    fault_rate: float
    seed: int
    # Schedules explored per repair scenario (three operations can have many).
    repair_schedules: int = 100_000


PROFILES = {
    # make test: every pair exhaustively; background steps and faults sampled.
    "ci": Profile(
        "ci",
        ((),),
        background_samples=3,
        random_runs=60,
        fault_rate=0.25,
        seed=20261122,
        repair_schedules=150,
    ),
    # The long run (docs/reliability.md): each background step at every point of every
    # interleaving of every pair, and thousands of random schedules with faults.
    "long": Profile(
        "long",
        ((), *((name,) for name in BACKGROUNDS)),
        background_samples=0,
        random_runs=3000,
        fault_rate=0.25,
        seed=1,
    ),
}


def profile() -> Profile:
    """The chosen profile; HC_EXPLORER_SEED and HC_EXPLORER_RANDOM_RUNS override its random part
    (to go on from where a long run was cut off with schedules it has not tried)."""
    chosen = PROFILES[os.environ.get("HC_EXPLORER_PROFILE", "ci")]
    seed = int(os.environ.get("HC_EXPLORER_SEED") or chosen.seed)
    runs = int(os.environ.get("HC_EXPLORER_RANDOM_RUNS") or chosen.random_runs)
    return dataclasses.replace(chosen, seed=seed, random_runs=runs)


RANDOM_OPS = (POST, PUT, DELETE, OpSpec("put", "y"), OpSpec("delete", "y"), limit(1), limit(3))


def random_scenario(rng: object, index: int, backgrounds: tuple[str, ...] = BACKGROUNDS) -> Scenario:
    import random

    assert isinstance(rng, random.Random)
    count = rng.randint(3, 6)
    ops = tuple(rng.choice(RANDOM_OPS) for _ in range(count))
    counted = tuple(rid for rid in ("x", "y") if rng.random() < 0.4)
    uncounted = tuple(rid for rid in ("x", "y") if rid not in counted and rng.random() < 0.3)
    cap = rng.randint(max(1, len(counted) + len(uncounted)), 3)
    return Scenario(f"random #{index}", cap, ops, counted, uncounted, backgrounds)
