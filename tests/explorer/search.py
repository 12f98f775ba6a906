"""How schedules are chosen: every one (with a state cache), at random (with faults), and shrunk.

Exhaustive search is a depth-first walk over the choice at every step, each schedule run again
from the start on a fresh account. Two schedules that reach the same point (same items, same
stream writes still undelivered, every operation having seen the same responses) have the same
futures, so a point already explored is not explored again: schedules that differ only in the
order of independent calls collapse, which is what keeps every pair of operations exhaustive.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.explorer.runs import Choice, Run, RunResult, Scenario, World
from tests.explorer.scheduler import Call

# Faults a step can be given, by what the call is.
WRITE_FAULTS = (
    "lost",
    "unsent",
    "ProvisionedThroughputExceededException",
    "TransactionConflictException",
    "crash",
)
THROTTLED = "ProvisionedThroughputExceededException"
READ_FAULTS = ("unsent", "ProvisionedThroughputExceededException", "crash")
TRANSACTION_FAULTS = (
    "lost",
    "TransactionCanceledException",
    "ProvisionedThroughputExceededException",
    "crash",
)


def faults_for(call: Call) -> tuple[str, ...]:
    """The faults a call of its kind can meet."""
    if call.operation == "TransactWriteItems":
        return TRANSACTION_FAULTS
    return WRITE_FAULTS if call.writes else READ_FAULTS


@dataclass
class Stats:
    scenarios: int = 0
    schedules: int = 0
    complete_schedules: int = 0
    states: int = 0
    steps: int = 0
    faults: int = 0
    violations: list[tuple[Scenario, RunResult]] = field(default_factory=list)

    def add(self, result: RunResult) -> None:
        self.schedules += 1
        self.complete_schedules += result.complete
        self.steps += result.steps
        self.faults += sum(1 for _, _, fault in result.choices if fault)
        if result.violations:
            self.violations.append((result.scenario, result))

    def merge(self, other: Stats) -> None:
        for name in ("scenarios", "schedules", "complete_schedules", "states", "steps", "faults"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.violations.extend(other.violations)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenarios": self.scenarios,
            "schedules": self.schedules,
            "complete_schedules": self.complete_schedules,
            "distinct_states": self.states,
            "steps": self.steps,
            "faults_injected": self.faults,
            "violations": len(self.violations),
        }


def state_key(run: Run, enabled: list[Choice]) -> str:
    ops = [
        (
            op.done,
            run.done[i].answer if i in run.done else None,
            [(c.operation, c.key, c.outcome, c.seen) for c in op.calls],
        )
        for i, op in enumerate(run.ops)
    ]
    text = json.dumps(
        [
            *run.state_view(),
            ops,
            run.writes_since_delivery,
            len(run.backlog),
            sorted(run.used),
            enabled,
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha1(run.redact(text).encode()).hexdigest()


def explore(
    world: World,
    scenario: Scenario,
    stats: Stats,
    *,
    max_schedules: int = 100_000,
    spread: random.Random | None = None,
) -> None:
    """Every schedule of ``scenario`` (every order of its calls, background steps at every
    point), each reachable point explored once. Capped by ``max_schedules`` (counted in
    ``stats``, so pass a fresh one per scenario); with ``spread``, the next schedule is drawn
    from the whole frontier instead of the newest branch, so a capped exploration samples every
    part of the tree rather than only the tail of the first schedule (uncapped, it explores the
    same points either way)."""
    stats.scenarios += 1
    seen: set[str] = set()
    pending: list[list[Choice]] = [[]]
    while pending and stats.schedules < max_schedules:
        prefix = pending.pop(spread.randrange(len(pending)) if spread else -1)

        def choose(run: Run, enabled: list[Choice], prefix: list[Choice] = prefix) -> Choice | None:
            if len(run.choices) < len(prefix):
                return prefix[len(run.choices)]
            key = state_key(run, enabled)
            if key in seen:
                return None
            seen.add(key)
            for alternative in enabled[1:]:
                pending.append([*run.choices, alternative])
            return enabled[0]

        stats.add(scenario.make_run(world, choose).execute())
    stats.states += len(seen)


def random_run(
    world: World,
    scenario: Scenario,
    rng: random.Random,
    fault_rate: float,
    spare: Callable[[Call, str], bool] | None = None,
) -> RunResult:
    """One random schedule; ``spare(call, fault)`` true: that call is not given that fault."""
    # A throttled call sticks half the time: every later attempt of that operation on that item is
    # throttled too (a hot item stays hot), which one-off faults at 0.25 a call almost never give.
    sticky: set[tuple[int, str, str]] = set()

    def choose(run: Run, enabled: list[Choice]) -> Choice:
        kind, what, _ = choice = rng.choice(enabled)
        if kind != "op":
            return choice
        call = run.ops[what].pending
        if call is None or call.pseudo:
            return choice
        where = (int(what), call.operation, call.key)
        if where in sticky:
            return (kind, what, THROTTLED)
        if rng.random() >= fault_rate:
            return choice
        fault = rng.choice(faults_for(call))
        if spare is not None and spare(call, fault):
            return choice
        if fault == THROTTLED and rng.random() < 0.5:
            sticky.add(where)
        return (kind, what, fault)

    return scenario.make_run(world, choose).execute()


def replay(world: World, scenario: Scenario, choices: list[Choice]) -> RunResult:
    """Run a schedule again; a choice that is not possible is skipped, and once the schedule
    runs out each operation is run to its end in turn (so shrinking can drop any part)."""
    queue = list(choices)

    def choose(run: Run, enabled: list[Choice]) -> Choice:
        while queue:
            choice = queue.pop(0)
            if choice[:2] in {c[:2] for c in enabled}:
                return _fitted(run, choice)
        return enabled[0]

    return scenario.make_run(world, choose).execute()


def _fitted(run: Run, choice: Choice) -> Choice:
    """``choice`` without its fault where the operation's pending call cannot meet it: a shrunk
    schedule can bring a fault chosen for one call (a transaction's cancellation) to another (an
    UpdateItem), which no DynamoDB call answers (before: the injector failed, and the shrunk trace
    showed that failure instead of the violation found)."""
    kind, what, fault = choice
    if kind != "op" or fault is None:
        return choice
    call = run.ops[int(what)].pending
    if call is None or call.pseudo or fault in faults_for(call):
        return choice
    return (kind, what, None)


def shrink(
    world: World, scenario: Scenario, result: RunResult, *, budget: int = 150
) -> tuple[Scenario, RunResult]:
    """A smaller schedule that still breaks an invariant: fewer faults, fewer background
    steps, fewer operations, fewer switches between operations (greedy, first that works)."""
    best_scenario, best = scenario, result
    tries, improved = 0, True
    while improved and tries < budget:
        improved = False
        for candidate_scenario, choices in _simpler(best_scenario, best.choices):
            if tries >= budget:
                break
            tries += 1
            outcome = replay(world, candidate_scenario, choices)
            if outcome.violations and outcome.complete:
                best_scenario, best, improved = candidate_scenario, outcome, True
                break
    return best_scenario, best


def _simpler(scenario: Scenario, choices: list[Choice]) -> Iterator[tuple[Scenario, list[Choice]]]:
    for index, (kind, what, fault) in enumerate(choices):
        if fault is not None:
            yield scenario, [*choices[:index], (kind, what, None), *choices[index + 1 :]]
        if kind == "bg":
            yield scenario, choices[:index] + choices[index + 1 :]
    for drop in range(len(scenario.ops) if len(scenario.ops) > 1 else 0):
        renumbered = [
            (kind, what - (what > drop) if kind == "op" else what, fault)
            for kind, what, fault in choices
            if not (kind == "op" and what == drop)
        ]
        kept = [
            dataclasses.replace(op, after=None if op.after == drop else op.after - (op.after > drop))
            if op.after is not None
            else op
            for op in scenario.ops[:drop] + scenario.ops[drop + 1 :]
        ]
        yield _with_ops(scenario, tuple(kept)), renumbered
    # Fewer switches: move a step to right after the previous step of the same operation.
    for index in range(1, len(choices)):
        if choices[index][:2] == choices[index - 1][:2]:
            continue
        earlier = next((j for j in range(index - 1, -1, -1) if choices[j][:2] == choices[index][:2]), None)
        if earlier is not None:
            yield (
                scenario,
                [
                    *choices[: earlier + 1],
                    choices[index],
                    *choices[earlier + 1 : index],
                    *choices[index + 1 :],
                ],
            )


def _with_ops(scenario: Scenario, ops: tuple[Any, ...]) -> Scenario:
    return dataclasses.replace(scenario, ops=ops)


def report(scenario: Scenario, result: RunResult) -> str:
    setup = "no override" if scenario.limit is None else f"override {scenario.limit}"
    if scenario.overrides:
        setup += f", overrides {dict(scenario.overrides)}"
    if scenario.plan or scenario.other_plan:
        setup += f", plan a {dict(scenario.plan)}, plan b {dict(scenario.other_plan)}"
    if scenario.counted or scenario.uncounted:
        setup += f", counted {list(scenario.counted)}, uncounted {list(scenario.uncounted)}"
    setup += scenario.described()
    if scenario.stuck:
        setup += f", left by dead requests {list(scenario.stuck)}"
        setup += ", stream records lost" if scenario.records_lost else ""
    lines = [
        f"scenario {scenario.name}: {setup}; operations {', '.join(str(op) for op in scenario.ops)}",
        *result.trace,
        "violations:",
        *(f"  - {v}" for v in result.violations),
    ]
    return "\n".join(lines)
