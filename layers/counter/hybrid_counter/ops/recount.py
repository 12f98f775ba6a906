"""Moved to ``hybrid_counter.counting.recount``: the recount is part of the counting, which the
sweeper uses too. Kept so existing imports keep working."""

from hybrid_counter.counting.recount import RangeCensus, RangeResult, Recounter, RecountReport

__all__ = ["RangeCensus", "RangeResult", "RecountReport", "Recounter"]
