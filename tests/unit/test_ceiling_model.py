"""The per-account ceiling model (benchmarks/ceiling_model.py): capacity ceilings and the mean lag."""

import pytest

from benchmarks.ceiling_model import (
    ItemCapacity,
    aws_ours,
    aws_reference,
    ours_stream_units,
    reference_stream_units,
)

SIMULATOR = ItemCapacity(units_per_second=10.0, burst_units=5.0, window=1.0)


def test_by_capacity_ours_pays_one_transaction_a_window_and_the_reference_two_units_a_create() -> None:
    # Then x + 2 <= C for ours and x + 2x <= C for the reference
    assert SIMULATOR.by_capacity(ours_stream_units) == pytest.approx(8.0)
    assert SIMULATOR.by_capacity(reference_stream_units) == pytest.approx(10 / 3)


def test_the_mean_lag_of_the_reference_at_its_ceiling_by_hand() -> None:
    # Given C = 10, a quarter second banked (2.5 units), W = 1, creates at 2.5/s
    model = ItemCapacity(10.0, 2.5, 1.0)

    # Then T = (2 x 2.5 x 2 - 2.5) / 2.5 = 1 s to count a batch of 5 (10 units, 2.5 banked, 7.5/s
    # after); a create waits W / 2 or T / 2 + W for its batch: 1.0 on average over the cycle; in
    # its batch (1/5) x integral of max(0, 2 i - 2.5) / 7.5 over i in [0, 5] = 0.375
    assert model.mean_lag(2.5, reference_stream_units) == pytest.approx(1.375, abs=1e-3)


def test_the_reference_is_bound_by_what_the_counter_item_banks_while_idle() -> None:
    # Given buckets of a quarter, a half and a whole second of capacity
    models = [ItemCapacity(10.0, 10.0 * burst, 1.0) for burst in (0.25, 0.5, 1.0)]

    # Then the ceiling rises with the bucket until the capacity's C / 3 binds, and at each ceiling
    # a create waits two windows on average
    ceilings = [model.within_two_windows(reference_stream_units) for model in models]
    assert ceilings == pytest.approx([2.732, 3.104, 10 / 3], abs=1e-3)
    for model, ceiling in zip(models[:2], ceilings[:2], strict=True):
        assert model.mean_lag(ceiling, reference_stream_units) == pytest.approx(2.0, abs=1e-3)


def test_above_the_capacity_term_the_reference_has_no_steady_state() -> None:
    # Given a whole second banked: the bank is not what binds
    model = ItemCapacity(10.0, 10.0, 1.0)

    # Then just under C / 3 the count keeps up at once, just over it never settles
    assert model.mean_lag(3.3, reference_stream_units) == pytest.approx(0.5)
    assert model.mean_lag(3.35, reference_stream_units) == float("inf")


def test_within_two_windows_ours_does_not_depend_on_the_burst() -> None:
    # Then one transaction a cycle: at T = W (x + 1 <= C) a create waits two windows on average,
    # whatever the bucket holds (>= 2 units)
    for burst_units in (2.5, 5.0, 10.0):
        model = ItemCapacity(10.0, burst_units, 1.0)
        assert model.within_two_windows(ours_stream_units) == pytest.approx(9.0)
        assert model.mean_lag(9.0, ours_stream_units) == pytest.approx(2.0)
        assert model.mean_lag(8.5, ours_stream_units) < 2.0 < model.mean_lag(9.45, ours_stream_units)


def test_ours_splits_counting_by_the_action_limit_and_by_the_batch() -> None:
    # Then 99 counts fit one transaction, 100 need two; 300 records (75 creates) make a batch
    assert ours_stream_units(18) == 2
    assert ours_stream_units(99) == 2 * 2  # 396 records: two batches
    assert ours_stream_units(75) == 2
    assert ours_stream_units(76) == 2 * 2
    assert ours_stream_units(1000) == 2 * 14  # 4,000 records in batches of 300


def test_on_aws_ours_pays_a_batch_per_shard_per_window_and_the_reference_three_units_a_create() -> None:
    # Then 16 shards a window cost 32 units: 968/s; the reference C / 3
    assert aws_ours() == pytest.approx(968.0)
    assert aws_ours(shards=1) == pytest.approx(1000 / (1 + 2 / 75))
    assert aws_reference() == pytest.approx(1000 / 3)
