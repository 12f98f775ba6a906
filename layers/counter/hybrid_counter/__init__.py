"""hybrid_counter: per-account resource limits with a best-effort and an eventual counter.

The package is shipped to Lambda as the CounterLayer and imported by every handler.
"""
