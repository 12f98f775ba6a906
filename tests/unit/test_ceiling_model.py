"""The per-account ceiling model (benchmarks/ceiling_model.py): capacity and two-window ceilings."""

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


def test_within_two_windows_the_reference_is_bound_by_what_the_counter_item_banks_while_idle() -> None:
    # Given buckets of a quarter, a half and a whole second of capacity
    ceilings = [
        ItemCapacity(10.0, 10.0 * burst, 1.0).within_two_windows(reference_stream_units)
        for burst in (0.25, 0.5, 1.0)
    ]

    # Then the reference's ceiling is (C + B / W) / 5 until the capacity's C / 3 binds
    assert ceilings == pytest.approx([2.5, 3.0, 10 / 3])


def test_within_two_windows_ours_does_not_depend_on_the_burst() -> None:
    # Then one transaction a cycle of two windows: x + 1 <= C, whatever the bucket holds (>= 2 units)
    for burst_units in (2.5, 5.0, 10.0):
        ceiling = ItemCapacity(10.0, burst_units, 1.0).within_two_windows(ours_stream_units)
        assert ceiling == pytest.approx(9.0)


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
