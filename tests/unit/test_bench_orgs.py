"""The benchmark's organizations figures (benchmarks/orgs.py, org_ceiling.py, report_orgs.py): the
model of an organization's counter items, the split not run where it is not built, and the
shaping of what a run measured."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import report, report_orgs
from benchmarks.ceiling import Capacity
from benchmarks.ceiling_model import ours_stream_units
from benchmarks.org_ceiling import NOT_BUILT, model, org_stream_units, put_org
from benchmarks.orgs import PHASES, difference
from benchmarks.throttle import CapacitySimulator
from hybrid_counter.keys import org_counter_key

SIMULATOR = Capacity(10.0, 16, 20.0)


def test_one_org_counter_item_pays_what_one_accounts_does_at_the_simulators_scale() -> None:
    # Given creates of a window on one item, up to a batch of an account's records (75 creates)
    for creates in (1, 9, 50, 75):
        # Then one transaction, as for an account's counter item
        assert org_stream_units(1)(creates) == ours_stream_units(creates) == 2.0
    # And the organization's partition holds one record a create (an account's four), so its
    # batch is bounded by a transaction's 99 counts, not by BatchSize
    assert org_stream_units(1)(99) == 2.0 < ours_stream_units(99)
    assert org_stream_units(1)(100) == 4.0


def test_split_over_s_items_the_model_is_s_times_one_item_while_one_transaction_holds_a_batch() -> None:
    one, four = model(SIMULATOR, 1), model(SIMULATOR, 4)

    # Then 4 items take 4 times one item's rate (36 creates a window fit one transaction)
    assert one["model_per_second"] == pytest.approx(9.0)
    assert four["model_per_second"] == pytest.approx(4 * one["per_item_per_second"])
    # And at 16 items a batch needs two transactions (84 counts each), so each item takes less
    sixteen = model(SIMULATOR, 16)
    assert sixteen["per_item_per_second"] < one["per_item_per_second"]
    assert sixteen["model_per_second"] == pytest.approx(16 * sixteen["per_item_per_second"], abs=0.1)


def test_each_of_an_organizations_counter_items_is_a_bucket_of_its_own() -> None:
    simulator = CapacitySimulator(10.0, partitions=16)

    buckets = [simulator.bucket_of(org_counter_key("o1", kind="seats", shard=s)) for s in range(16)]

    assert buckets[0] == "item:ORG#o1:COUNTER#seats#0"
    assert buckets[15] == "item:ORG#o1:COUNTER#seats#f"
    assert len(set(buckets)) == 16


class _Unsplit:
    """A service whose put_org takes no ``shards`` (the split not built)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def put_org(self, org_id: str, plan_id: str) -> None:
        self.calls.append((org_id, plan_id))


class _Split:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    def put_org(self, org_id: str, plan_id: str, *, shards: int = 1) -> None:
        self.calls.append((org_id, plan_id, shards))


def test_s_above_one_is_not_run_where_put_org_takes_no_shards() -> None:
    unsplit = _Unsplit()

    # Then S = 4 makes nothing and says so; S = 1 makes the organization as it is built
    assert put_org(unsplit, "o1", "p1", 4) is False  # type: ignore[arg-type]
    assert put_org(unsplit, "o1", "p1", 1) is True  # type: ignore[arg-type]
    assert unsplit.calls == [("o1", "p1")]
    # And where the split is built, every S is asked for
    split = _Split()
    assert put_org(split, "o2", "p2", 16) is True  # type: ignore[arg-type]
    assert split.calls == [("o2", "p2", 16)]


def _phase(requests: float, read_units: float, writes: float, **by_operation: float) -> dict[str, Any]:
    return {
        "requests": requests,
        "read_units": read_units,
        "total_write_units": writes,
        "index_write_units": 0.0,
        "transaction_index_write_units": 0.0,
        "requests_by_operation": by_operation,
    }


def test_a_members_extra_is_by_operation_without_the_unchanged_ones() -> None:
    plain = _phase(4.0, 1.0, 3.0, GetItem=1.0, PutItem=1.0, UpdateItem=2.0)
    member = _phase(6.0, 2.0, 4.0, GetItem=2.0, PutItem=1.0, UpdateItem=3.0)

    found = difference(member, plain)

    assert found["requests_by_operation"] == {"GetItem": 1.0, "UpdateItem": 1.0}
    assert (found["requests"], found["read_units"], found["total_write_units"]) == (2.0, 1.0, 1.0)


def _results(member_create: dict[str, Any], shards: dict[str, Any]) -> dict[str, Any]:
    plain = {phase: _phase(4.0, 1.0, 3.0, GetItem=1.0, PutItem=1.0, UpdateItem=2.0) for phase in PHASES}
    member = {**plain, "create": member_create, "refused_writes": {}}
    plain = {**plain, "refused_writes": {}}
    extra = {phase: difference(member[phase], plain[phase]) for phase in PHASES}
    usage_row = {
        "resources": 10,
        "warm": {"requests": 3, "requests_by_operation": {"GetItem": 1, "Query": 2}, "read_units": 2.5},
        "cold": {"requests": 5, "requests_by_operation": {"GetItem": 3, "Query": 2}, "read_units": 4.5},
        "exact": True,
    }
    return {
        "orgs": {
            "cost": {
                "creates": 20,
                "not_member": plain,
                "member": member,
                "extra": extra,
                "first_create_extra": {"not_member": extra["create"], "member": extra["create"]},
                "first_of_org": member_create,
                "first_of_org_extra": extra["create"],
                "exact": True,
            },
            "usage": {
                "top": 5,
                "organizations": [usage_row | {"members": n} for n in (10, 100, 1000)],
            },
            "ceiling": {"units_per_second": 10.0, "accounts": 50, "by_shards": shards},
        }
    }


def _ladder(ratio: float) -> dict[str, Any]:
    step = {"offered_per_second": 9.0, "admitted_fraction": 1.0, "uncounted_creates": 5.0, "kept_up": True}
    return {
        "shards": 1,
        "sustained_per_second": 9.0 * ratio,
        "model_per_second": 9.0,
        "per_item_per_second": 9.0,
        "capacity_model_per_second": 8.0,
        "ratio": ratio,
        "step_seconds": 20.0,
        "throttled_requests": 100,
        "steps": [step],
        "hottest_item_share": 1.0,
        "exact_after": {"best_effort": 500, "eventual": 500, "units_live": 500, "exact": True},
        "actions_per_counting_transaction": {"organization": 10.0, "members": 20.0},
        "machine_check": step,
        "exact_limit_under_throttling": {
            "limit": 40,
            "creates": 120,
            "admitted": 40,
            "units_live": 40,
            "exact": True,
        },
    }


def test_the_create_target_wants_one_more_write_and_no_transaction() -> None:
    one_write = _phase(6.0, 2.0, 4.0, GetItem=2.0, PutItem=1.0, UpdateItem=3.0)
    two_writes = _phase(7.0, 2.0, 5.0, GetItem=2.0, PutItem=1.0, UpdateItem=4.0)
    transaction = _phase(5.0, 2.0, 5.0, GetItem=2.0, PutItem=1.0, UpdateItem=2.0, TransactWriteItems=1.0)

    def met(create: dict[str, Any]) -> bool:
        return bool(report_orgs.targets(_results(create, {"1": _ladder(1.0)}))[0]["met"])

    # Then only one more conditional write meets it (the extra read is a note)
    assert met(one_write)
    assert not met(two_writes)
    assert not met(transaction)


def test_a_split_not_built_is_a_target_not_run_and_a_row_that_says_why() -> None:
    results = _results(
        _phase(6.0, 2.0, 4.0, GetItem=2.0, PutItem=1.0, UpdateItem=3.0),
        {"1": _ladder(0.95), "4": {"shards": 4, "not_run": NOT_BUILT}},
    )

    rows = {row["target"]: row for row in report_orgs.targets(results)}

    ladder = "an organization's sustained admissions / model, S = {} (simulator)"
    assert rows[ladder.format(1)]["met"] is True
    assert rows[ladder.format(4)]["met"] is None
    lines = report_orgs.markdown(results)
    assert f"| 4 | {NOT_BUILT} | | | | | | | | |" in lines
    # And the report's target table says "not run", never "no", for it
    results["targets"] = report_orgs.targets(results)
    table = report.markdown(results | {"started": "2026-11-25T00:00:00Z", "seconds": 1, "quick": True})
    assert f"| not run | {NOT_BUILT} |" in table


def test_the_usage_target_wants_the_same_requests_at_every_size() -> None:
    results = _results(_phase(6.0, 2.0, 4.0, GetItem=2.0, PutItem=1.0, UpdateItem=3.0), {})
    assert report_orgs.targets(results)[1]["met"] is True
    # Given a read per account at the largest size
    results["orgs"]["usage"]["organizations"][2]["warm"] = {
        "requests": 1003,
        "requests_by_operation": {"GetItem": 1001, "Query": 2},
        "read_units": 1002.5,
    }
    # Then it is missed
    assert report_orgs.targets(results)[1]["met"] is False


def test_an_extra_call_nobody_explained_says_so() -> None:
    lines = report_orgs.why("create", {"UpdateItem": 1.0, "Scan": 1.0})
    assert lines[0].startswith("UpdateItem +1: the organization's admission")
    assert lines[1] == "Scan +1: not explained (unexpected: look at this run)"
