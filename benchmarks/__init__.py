"""Benchmarks: counts (requests, write units) and same-run ratios, never absolute targets."""
