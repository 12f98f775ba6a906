"""The per-account ceiling model: how many creates/s one account sustains, for ours and the reference.

Every item and every partition takes C write units/s (1,000 on AWS). An account's counter item is
one item; its resource items spread over P partitions by sort-key range. Per create the API path
writes the counter item once (ours: the admission; the reference: its increment) and the stream
path writes it in every counting transaction: ours counts up to 99 resources in one transaction
(the 100-action limit, one action for the counter), one transaction at least per batch the mapping
delivers; the reference makes one transaction per record. A transaction writes each item twice.

**Capacity.** Over a window W the counter item pays r W for the API path and the stream's units
for the r W creates that window delivers: r W + units(r W) <= C W. Ours: r <= C - 2 / W; the
reference: r <= C / 3. The resource partitions (4 units per create for ours: put, make live, counted
in a transaction; 3 for the reference) bind only at P C / 4, far above.

**Lag.** The mapping's cycle is a batching window, then the batch is processed, then the next
window. When the stream's units for a batch arrive all at once, the counter item pays them from
what it banked while the consumer waited (at most its burst B, the capacity it can hold unused)
and then at the rate the API path leaves. A step keeps up (benchmarks/ceiling.py) while the
creates not yet counted average within two windows of admissions. Over a cycle of a window's wait
and T's processing they run from r T to r (W + 2 T), so the bound holds on average while T <= W:
n = 2 r W creates a cycle whose stream units must fit

    units(2 r W) <= min(B, (C - r) W) + (C - r) W

The reference pays 2 units per record, so a cycle's units grow with the load and the burst binds:
r <= (C + B / W) / 5 when B < (C - r) W, else the capacity's C / 3. Ours pays 2 units a cycle, so
r <= C - 1 / W (a longer cycle spreads its one transaction over more creates). At the simulator's
C = 10, B = 5 (half a second), W = 1: the reference 3.0/s (capacity 3.33), ours 9.0/s (capacity 8.0).
With B >= 2/3 s of capacity the reference reaches its capacity; with B = 0.25 s, 2.5/s:
`python -m benchmarks --parts bursts` checks whether the measured ceiling follows B so (for the
reference it does not, within 10-second steps: README, Benchmark).

**On AWS** one account at its ceiling delivers far more than a batch (300 records, 75 creates) a
window, so the mapping invokes back to back with no window between and no burst to bank: the
capacity regime, with ours paying 2 units per batch, at least one batch per shard per window
(an account's records arrive on the shards of the partitions its items sit on; 16 here):
r + 2 max(S / W, r / 75) <= C, so about 968/s; the reference 333/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

COUNTS_PER_TRANSACTION = 99  # 100 actions, one of them the counter item
BATCH_RECORDS = 300  # the stream mapping's BatchSize (template.yaml)
RECORDS_PER_CREATE = 4  # stream records a create leaves (ours and the reference alike; bench-results show it)

Units = Callable[[float], float]


def ours_stream_units(creates: float) -> float:
    """Counter-item units for counting `creates` delivered in one cycle."""
    transactions = max(
        1,
        math.ceil(creates / COUNTS_PER_TRANSACTION),
        math.ceil(creates * RECORDS_PER_CREATE / BATCH_RECORDS),
    )
    return 2.0 * transactions


def reference_stream_units(creates: float) -> float:
    return 2.0 * creates


@dataclass(frozen=True)
class ItemCapacity:
    units_per_second: float  # C, per item and per partition
    burst_units: float  # B, what an item's bucket holds unused
    window: float  # W, the mapping's batching window

    def by_capacity(self, stream_units: Units) -> float:
        """The highest rate whose API and stream units fit C over a window."""
        c, w = self.units_per_second, self.window
        return _highest(lambda r: r * w + stream_units(r * w) <= c * w, c)

    def within_two_windows(self, stream_units: Units) -> float:
        """The highest rate at which a cycle stays within two windows (the benchmark's "kept up")."""
        c, b, w = self.units_per_second, self.burst_units, self.window

        def fits(r: float) -> bool:
            spare = (c - r) * w
            return spare > 0 and stream_units(2 * r * w) <= min(b, spare) + spare

        return _highest(fits, c)


def aws_ours(units_per_second: float = 1000.0, window: float = 1.0, shards: int = 16) -> float:
    """Ours on AWS: batches back to back, at least one per shard per window."""
    per_batch = BATCH_RECORDS / RECORDS_PER_CREATE
    return _highest(
        lambda r: r + 2 * max(shards / window, r / per_batch) <= units_per_second, units_per_second
    )


def aws_reference(units_per_second: float = 1000.0) -> float:
    return units_per_second / 3


def _highest(fits: Callable[[float], bool], units_per_second: float) -> float:
    """The highest rate that fits, by bisection (every design pays at least one counter unit a
    create, so C bounds it)."""
    low, high = 0.0, units_per_second
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
