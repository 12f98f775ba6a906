"""The step-level interleaving explorer (tests/explorer): concurrent API operations interleaved
DynamoDB call by DynamoDB call, with background work at any point and faults at any call, every
invariant checked after every step (docs/reliability.md).

Profiles (HC_EXPLORER_PROFILE): ``ci`` (make test) explores every pair of API operations
exhaustively and samples the rest; ``long`` places every background step at every point of
every pair and runs thousands of random schedules with faults, for hours (run it with
``--timeout 0``). Figures are printed (``-s``) and written to ``.local/explorer-figures.json``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from tests.explorer.catalogue import (
    hold_scenarios,
    kind_pair_scenarios,
    pair_scenarios,
    profile,
    random_scenario,
    repair_scenarios,
    resize_repair_scenarios,
    selected,
)
from tests.explorer.pytest_glue import explorer_world, fail_with, retries_without_backoff, write_figures
from tests.explorer.runs import BACKGROUNDS, STALLS, Choice, OpSpec, Scenario
from tests.explorer.search import Stats, explore, random_run, replay, report

pytestmark = pytest.mark.integration

FIGURES: dict[str, dict[str, object]] = {}
FIGURES_FILE = Path(__file__).resolve().parents[2] / ".local" / "explorer-figures.json"


@pytest.fixture(scope="module", autouse=True)
def figures_on_file():
    yield
    write_figures(FIGURES_FILE, FIGURES)


@pytest.fixture(scope="module", autouse=True)
def without_backoff():
    with retries_without_backoff():
        yield


@pytest.fixture(scope="module")
def world(stack, stream):
    return explorer_world(stack, stream)


# Every schedule of every pair is about 8 minutes on a quiet machine (the ci profile caps each
# pair): the suite's 10-minute limit per test (a hang's) would fail a slow machine's uncapped run,
# not a hang; 20 minutes still catches one.
@pytest.mark.timeout(1200)
def test_every_pair_of_api_operations_in_every_order(world):
    chosen = profile()
    stats, started = Stats(), time.monotonic()
    spread = random.Random(chosen.seed)
    for backgrounds in chosen.background_sets:
        for scenario in selected(pair_scenarios(backgrounds)):
            one = Stats()
            explore(world, scenario, one, max_schedules=chosen.pair_schedules, spread=spread)
            stats.merge(one)
    FIGURES["pairs"] = {
        **stats.to_json(),
        "background_sets": [list(b) for b in chosen.background_sets],
        "schedules_per_pair": chosen.pair_schedules,
        "seconds": round(time.monotonic() - started),
    }
    print(f"\nexplorer {chosen.name}, every pair: {json.dumps(FIGURES['pairs'])}")
    if stats.violations:
        fail_with(world, stats)
    assert stats.complete_schedules > 0


def test_units_resizes_plans_and_two_kinds_in_every_order(world):
    """Issue 18's pairs (catalogue.KIND_PAIRS): creates of n units, a PATCH against a retried
    PATCH, another target, a DELETE, a PUT, a POST and an override change; creates against a
    plan change, a move to another plan, an override removed; operations on two kinds of one
    account. Every order of their calls (capped per scenario in ci), checked per kind in units."""
    chosen = profile()
    total, started = Stats(), time.monotonic()
    spread = random.Random(chosen.seed)  # a capped exploration samples the whole tree
    for backgrounds in chosen.background_sets:
        for scenario in selected(kind_pair_scenarios(backgrounds)):
            stats = Stats()
            explore(world, scenario, stats, max_schedules=chosen.kind_pair_schedules, spread=spread)
            total.merge(stats)
    FIGURES["kind_pairs"] = {**total.to_json(), "seconds": round(time.monotonic() - started)}
    print(f"\nexplorer {chosen.name}, units, resizes, plans and kinds: {json.dumps(FIGURES['kind_pairs'])}")
    if total.violations:
        fail_with(world, total)
    assert total.complete_schedules > 0


def test_repairs_and_ttl_meeting_api_operations_in_every_order(world):
    """The audit, the recount and TTL interleaved with deletes and creates of the ids that
    requests which died long ago left behind (a stuck claim, a released delete's item, a create
    left pending with its records lost): every order of their calls (capped per scenario in ci)."""
    chosen = profile()
    total, started = Stats(), time.monotonic()
    spread = random.Random(chosen.seed)  # a capped scenario samples its whole tree, not one corner
    for backgrounds in chosen.background_sets:
        for scenario in selected(repair_scenarios(backgrounds)):
            stats = Stats()
            explore(world, scenario, stats, max_schedules=chosen.repair_schedules, spread=spread)
            total.merge(stats)
    FIGURES["repairs"] = {**total.to_json(), "seconds": round(time.monotonic() - started)}
    print(f"\nexplorer {chosen.name}, repairs: {json.dumps(FIGURES['repairs'])}")
    if total.violations:
        fail_with(world, total)
    assert total.complete_schedules > 0


def test_dead_resizes_ended_by_requests_and_repairs_in_every_order(world):
    """Resizes whose request died (before its counter write, after it, or after a refusal whose
    revert failed) met by a later PATCH or DELETE, the audit, a recount, the sweeper and the stream
    path, racing creates: every order of their calls (capped per scenario in ci)."""
    chosen = profile()
    total, started = Stats(), time.monotonic()
    spread = random.Random(chosen.seed)
    for backgrounds in chosen.background_sets:
        for scenario in selected(resize_repair_scenarios(backgrounds)):
            stats = Stats()
            explore(world, scenario, stats, max_schedules=chosen.repair_schedules, spread=spread)
            total.merge(stats)
    FIGURES["dead_resizes"] = {**total.to_json(), "seconds": round(time.monotonic() - started)}
    print(f"\nexplorer {chosen.name}, dead resizes: {json.dumps(FIGURES['dead_resizes'])}")
    if total.violations:
        fail_with(world, total)
    assert total.complete_schedules > 0


def test_pairs_with_background_work_at_sampled_points(world):
    """Every background step, in random schedules of every pair (the long profile places them
    everywhere, exhaustively)."""
    chosen = profile()
    if chosen.background_samples == 0:
        pytest.skip("this profile placed every background step at every point of every pair")
    rng = random.Random(chosen.seed)
    stats, started = Stats(), time.monotonic()
    for scenario in selected(pair_scenarios(BACKGROUNDS)):
        for _ in range(chosen.background_samples):
            stats.add(random_run(world, scenario, rng, fault_rate=0.0))
    for scenario in selected(kind_pair_scenarios(BACKGROUNDS)):
        for _ in range(chosen.kind_background_samples):
            stats.add(random_run(world, scenario, rng, fault_rate=0.0))
    FIGURES["pairs_with_backgrounds"] = {**stats.to_json(), "seconds": round(time.monotonic() - started)}
    print(
        f"\nexplorer {chosen.name}, pairs with background work: {json.dumps(FIGURES['pairs_with_backgrounds'])}"
    )
    if stats.violations:
        fail_with(world, stats)


def test_random_schedules_of_three_to_six_operations_with_faults(world):
    chosen = profile()
    rng = random.Random(chosen.seed)
    stats, started = Stats(), time.monotonic()
    for index in range(chosen.random_runs):
        scenario = random_scenario(rng, index)
        stats.add(random_run(world, scenario, rng, chosen.fault_rate))
        if stats.violations:
            break
        if (index + 1) % 100 == 0:  # a long run cut off still leaves its figures so far
            print(f"\nexplorer {chosen.name}, random progress: {json.dumps(stats.to_json())}", flush=True)
    FIGURES["random"] = {**stats.to_json(), "seconds": round(time.monotonic() - started)}
    print(f"\nexplorer {chosen.name}, random schedules with faults: {json.dumps(FIGURES['random'])}")
    if stats.violations:
        fail_with(world, stats)
    assert stats.faults > 0


def test_an_admission_lost_at_the_limit_is_the_one_documented_overshoot(world):
    """P1's exception, found by a long random run: at the limit, a create whose admission
    response is lost (DynamoDB refused it) cannot learn that it was refused, so it makes the
    resource live and indexed and answers 201, one past the limit. The checker allows exactly
    that, and only for the create that took that path."""
    # Given one slot left, a POST that has put its item and a PUT of y that takes the slot
    scenario = Scenario("lost admission at the limit", 1, (OpSpec("post"), OpSpec("put", "y")))
    post, put = 0, 1
    # (counted from the calls each makes now: the POST reads its counter and the account's
    # profile, registers its kind on it and puts its item; the PUT also reads its id first and
    # makes its resource live: organizations, issue 24, added the profile's read and write)
    choices: list[Choice] = [("op", post, None)] * 4
    choices += [("op", put, None)] * 7
    # When the POST's admission is refused and its response lost, then it runs to its end
    choices += [("op", post, "lost")]
    result = replay(world, scenario, choices)
    lost = [line for line in result.trace if "fault:lost" in line]
    assert len(lost) == 1, report(scenario, result)
    assert "A:post: UpdateItem COUNTER#resources [SET #last_admission" in lost[0], report(scenario, result)
    # Then both answered 201, the POST through the unresolved path, and nothing else is wrong
    assert [result.done[i].answer for i in (post, put)] == [201, 201], report(scenario, result)
    assert result.done[post].past_limit_allowed
    assert not result.done[put].past_limit_allowed
    assert not result.violations, report(scenario, result)


def test_holds_confirmed_expired_deleted_and_retried_in_every_order(world):
    """Holds (design.md §12): a confirm racing the expiry (the sweeper's, or a create refused for
    room that reclaims), a retried confirm, the caller's DELETE and a retried PUT of the hold racing
    the expiry. The expiring processes' clock is past the hold's deadline, the others' is not.
    Every order of their calls (capped per scenario in ci):
    a confirm answers 200 and the resource ends permanent and counted, or answers HoldExpired and
    its units are released, never both, never neither."""
    chosen = profile()
    total, started = Stats(), time.monotonic()
    spread = random.Random(chosen.seed)
    for backgrounds in chosen.background_sets:
        for scenario in selected(hold_scenarios(backgrounds)):
            stats = Stats()
            cap = chosen.repair_schedules if len(scenario.ops) > 2 else chosen.hold_pair_schedules
            explore(world, scenario, stats, max_schedules=cap, spread=spread)
            total.merge(stats)
    # Every process stalled past the grace period at a random point, the sweeper at what it left
    for scenario in selected(hold_scenarios(STALLS)):
        for _ in range(chosen.hold_stall_samples):
            total.add(random_run(world, scenario, spread, fault_rate=0.0))
    FIGURES["holds"] = {**total.to_json(), "seconds": round(time.monotonic() - started)}
    print(f"\nexplorer {chosen.name}, holds: {json.dumps(FIGURES['holds'])}")
    if total.violations:
        fail_with(world, total)
    assert total.complete_schedules > 0
