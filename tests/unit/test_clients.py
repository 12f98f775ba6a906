"""The clients the domain builds for itself when none are injected (tests always inject theirs)."""

from __future__ import annotations

from hybrid_counter.aws import Clients


def test_the_admissions_default_client_never_retries_blindly():
    # A retry after a lost response would count a resource twice; the single-attempt client is the
    # one the admission and the release run on.
    clients = Clients()
    assert clients.dynamodb_single_attempt.meta.config.retries["total_max_attempts"] == 1
    assert clients.dynamodb.meta.config.retries["total_max_attempts"] > 1
