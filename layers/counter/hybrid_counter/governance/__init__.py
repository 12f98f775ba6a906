"""Governing limits: safe changes with a history of every change, and events when an account's
use of a kind crosses a threshold of its limit (issue 19, docs/design.md §9)."""
