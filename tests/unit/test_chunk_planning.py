"""Batched counting: chunks fit one transaction (100 actions) and touch each item once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_counter.counting.eventual import (
    MAX_ACTIONS,
    ApplyReport,
    ChunkFailed,
    CountingError,
    EventualCounter,
    plan_chunks,
)
from hybrid_counter.counting.ops import CountOp

ops_strategy = st.lists(
    st.builds(
        CountOp, st.sampled_from(["a", "b", "c"]), st.text("xyz", min_size=1, max_size=2), st.just("i")
    ),
    max_size=400,
)


@given(ops_strategy)
def test_chunks_preserve_order_fit_a_transaction_and_never_repeat_an_item(ops):
    chunks = plan_chunks(ops, "batched")
    assert [i for chunk in chunks for i in chunk] == list(range(len(ops)))
    for chunk in chunks:
        items = [ops[i].item for i in chunk]
        accounts = {ops[i].account_id for i in chunk}
        assert len(items) == len(set(items))
        assert len(items) + len(accounts) <= MAX_ACTIONS


def test_many_distinct_resources_of_one_account_fill_chunks_of_99_plus_counter():
    ops = [CountOp("acct", f"r{i}", "i") for i in range(250)]
    assert [len(chunk) for chunk in plan_chunks(ops, "batched")] == [99, 99, 52]


def test_per_record_mode_is_one_op_per_transaction():
    ops = [CountOp("acct", f"r{i}", "i") for i in range(5)]
    assert [len(c) for c in plan_chunks(ops, "per_record")] == [1] * 5


org_ops_strategy = st.lists(
    st.builds(
        CountOp,
        st.sampled_from(["a", "b"]),
        st.text("xyz", min_size=1, max_size=2),
        st.just("i"),
        org=st.sampled_from([None, "acme"]),
        shard=st.integers(0, 3),
    ),
    max_size=400,
)


@given(org_ops_strategy)
def test_each_chunk_writes_at_most_one_counter_item_of_an_organization_and_no_account_counter_beside_it(ops):
    chunks = plan_chunks(ops, "batched")
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(ops)))
    for chunk in chunks:
        counters = {ops[i].counter for i in chunk}
        org_counters = {ops[i].counter for i in chunk if ops[i].org is not None}
        assert not org_counters or (counters == org_counters and len(org_counters) == 1)
        assert chunk == sorted(chunk)  # each item's counts keep their order
        items = [ops[i].item for i in chunk]
        assert len(items) == len(set(items))
        assert len(items) + len(counters) <= MAX_ACTIONS


def test_a_split_organizations_counts_arriving_round_robin_make_one_chunk_per_shard():
    ops = [CountOp(f"m{i}", f"r{i}", "i", org="acme", shard=i % 4) for i in range(40)]
    chunks = plan_chunks(ops, "batched")
    assert [[ops[i].shard for i in chunk] for chunk in chunks] == [[s] * 10 for s in range(4)]


def test_a_failed_chunk_names_its_positions_and_every_later_chunks_even_those_before_it_in_the_records():
    # Given a split organization's counts, round robin over two shards, and shard 1's chunk failing
    ops = [CountOp(f"m{i}", f"r{i}", "i", org="acme", shard=i % 2) for i in range(6)]
    counted: list[list[int]] = []

    class Failing(EventualCounter):
        def _count(self, chunk: list[CountOp]) -> ApplyReport:
            if chunk[0].shard == 1:
                raise CountingError("throttled")
            counted.append([op.shard for op in chunk])
            return ApplyReport(counted=len(chunk))

    counter = Failing("table", clients=object(), requests=object())  # type: ignore[arg-type]
    # When they are applied
    with pytest.raises(ChunkFailed) as failure:
        counter.apply(ops)
    # Then shard 0's chunk applied, and the failure names shard 1's positions: the stream handler
    # reports from the first of them (1) on, and shard 0's counts after it are dropped as done
    assert counted == [[0, 0, 0]]
    assert failure.value.unapplied == [1, 3, 5]
    assert failure.value.first_unapplied == 1
