"""Batched counting: chunks fit one transaction (100 actions) and touch each item once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hybrid_counter.counting.eventual import MAX_ACTIONS, plan_chunks
from hybrid_counter.counting.ops import CountOp, UncountOp

ops_strategy = st.lists(
    st.one_of(
        st.builds(
            CountOp, st.sampled_from(["a", "b", "c"]), st.text("xyz", min_size=1, max_size=2), st.just("i")
        ),
        st.builds(
            UncountOp,
            st.sampled_from(["a", "b", "c"]),
            st.text("xyz", min_size=1, max_size=2),
            st.just("i"),
            st.booleans(),
        ),
    ),
    max_size=400,
)


@given(ops_strategy)
def test_chunks_preserve_order_fit_a_transaction_and_never_repeat_an_item(ops):
    chunks = plan_chunks(ops, "batched")
    flattened = [op for _, chunk in chunks for op in chunk]
    assert flattened == ops
    position = 0
    for start, chunk in chunks:
        assert start == position
        position += len(chunk)
        items = [op.item for op in chunk]
        accounts = {op.account_id for op in chunk}
        assert len(items) == len(set(items))
        assert len(items) + len(accounts) <= MAX_ACTIONS


def test_many_distinct_resources_of_one_account_fill_chunks_of_99_plus_counter():
    ops = [CountOp("acct", f"r{i}", "i") for i in range(250)]
    sizes = [len(chunk) for _, chunk in plan_chunks(ops, "batched")]
    assert sizes == [99, 99, 52]


def test_per_record_mode_is_one_op_per_transaction():
    ops = [CountOp("acct", f"r{i}", "i") for i in range(5)]
    assert [len(c) for _, c in plan_chunks(ops, "per_record")] == [1] * 5
