"""The benchmark's organizations figures (benchmarks/orgs.py, org_ceiling.py, report_orgs.py): the
model of an organization's counter items, the split not run where it is not built, and the
shaping of what a run measured."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import report_orgs
from benchmarks.ceiling import Capacity
from benchmarks.ceiling_model import ours_stream_units
from benchmarks.org_ceiling import model, org_stream_units
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


def test_split_over_s_items_the_model_is_s_times_one_item_each_counted_in_transactions_of_its_own() -> None:
    one = model(SIMULATOR, 1)

    # Then S items take S times one item's rate: each item's counts have transactions of their
    # own (counting/eventual.py plan_chunks), so at 16 items no transaction waits for another item
    for shards in (4, 16):
        split = model(SIMULATOR, shards)
        assert split["per_item_per_second"] == pytest.approx(one["per_item_per_second"])
        assert split["model_per_second"] == pytest.approx(shards * one["per_item_per_second"])
    # And past 99 counts of one item in a batch, that item needs a second transaction
    assert org_stream_units(16)(99) == 2.0 * 6  # 1,584 records: six batches of 300
    assert org_stream_units(1)(100) == 4.0


def test_each_of_an_organizations_counter_items_is_a_bucket_of_its_own() -> None:
    simulator = CapacitySimulator(10.0, partitions=16)

    buckets = [simulator.bucket_of(org_counter_key("o1", kind="seats", shard=s)) for s in range(16)]

    assert buckets[0] == "item:ORG#o1:COUNTER#seats#0"
    assert buckets[15] == "item:ORG#o1:COUNTER#seats#f"
    assert len(set(buckets)) == 16


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
