"""Operator tooling: inspect and replay the dead-letter queues, recount and heal accounts."""
