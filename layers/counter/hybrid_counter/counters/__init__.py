"""The per-account counter item: both counters, the limit, per-range shares, and every write to it."""

from hybrid_counter.counters.state import CounterState, RangeShare
from hybrid_counter.counters.store import Admission, AdmissionOutcome, CounterStore, Judge, Judged

__all__ = ["Admission", "AdmissionOutcome", "CounterState", "CounterStore", "Judge", "Judged", "RangeShare"]
