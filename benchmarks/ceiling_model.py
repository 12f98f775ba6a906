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

**Lag.** The benchmark's "kept up" (benchmarks/ceiling.py) is that the creates not yet counted
average at most two windows of admissions: by Little's law, that a create waits on average at most
two windows, 2 W, to be counted. The mapping's cycle is a window, W, then the batch's processing,
T. A create admitted during the window waits for the batch to be taken (W / 2 on average), one
admitted during processing for the next batch (T / 2 + W); either then waits its turn in its batch.
The stream's units for a batch of n = r (W + T) creates arrive at once: the counter item pays them
from what it banked during the window (at most its bucket B, or (C - r) W if less), then at the
rate the API path leaves, C - r. The i-th create of the batch is counted when the units for the
first i are paid: max(0, units(i) - banked) / (C - r), and T is when the last one is. The steady
state is the fixed point of T = that(n(T)), reached from T = 0 as the cycles of a step settle
(each cycle's batch is the creates of the last); no fixed point, no steady state.

Ours counts a batch in one transaction, so its creates are all counted when 2 units are paid: the
mean wait is 2 W exactly when T = W, at r = C - 1 / W (longer cycles spread the transaction over
more creates, so ours passes its capacity term). The reference pays 2 units per record and counts
record by record, so its mean lag follows what the bucket banked: at the simulator's C = 10, W = 1,
B = 0.25 / 0.5 / 1 s of capacity: 2.73 / 3.10 / 3.33 (its capacity C / 3 binds); ours 9.0 at any B
of at least a transaction's 2 units. `python -m benchmarks --parts bursts` checks the reference at
the other buckets.

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
from statistics import mean

COUNTS_PER_TRANSACTION = 99  # 100 actions, one of them the counter item
BATCH_RECORDS = 300  # the stream mapping's BatchSize (template.yaml)
RECORDS_PER_CREATE = 4  # stream records a create leaves (ours and the reference alike; bench-results show it)
SETTLING_CYCLES = 100_000  # a step's cycles settle geometrically, slowly just under the capacity term
MAX_CYCLE_WINDOWS = 10_000  # a cycle this long has no steady state worth the name
POSITIONS = 256  # where in its batch a create is, for the mean wait in the batch

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
        """The highest rate whose creates wait, on average, at most two windows to be counted."""
        return _highest(lambda r: self.mean_lag(r, stream_units) <= 2 * self.window, self.units_per_second)

    def mean_lag(self, rate: float, stream_units: Units) -> float:
        """Seconds from a create to its count, on average over the mapping's steady cycle."""
        w, spare = self.window, self.units_per_second - rate
        if spare <= 0:
            return math.inf
        banked = min(self.burst_units, spare * w)

        def counted_after(position: float) -> float:
            return max(0.0, stream_units(position) - banked) / spare

        processing = 0.0
        for _ in range(SETTLING_CYCLES):
            settled = counted_after(rate * (w + processing))
            if settled > MAX_CYCLE_WINDOWS * w:
                return math.inf
            if abs(settled - processing) < 1e-9:
                break
            processing = settled
        else:
            return math.inf  # still growing: no steady state
        batch = rate * (w + processing)
        in_batch = mean(counted_after(batch * (k + 0.5) / POSITIONS) for k in range(POSITIONS))
        to_batch = (w * w / 2 + processing * (processing / 2 + w)) / (w + processing)
        return to_batch + in_batch


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
