"""Batched counting: chunks fit one transaction (100 actions) and touch each item once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hybrid_counter.counting.eventual import MAX_ACTIONS, plan_chunks
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
