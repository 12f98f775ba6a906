"""The clients the domain builds for itself when none are injected (tests always inject theirs)."""

from __future__ import annotations

from hybrid_counter.aws import Clients


def test_the_admissions_default_client_never_retries_blindly():
    # A retry after a lost response would count a resource twice; the single-attempt client is the
    # one the admission and the release run on.
    clients = Clients()
    # botocore-stubs does not declare Config.retries, though botocore sets it.
    single_attempt = clients.dynamodb_single_attempt.meta.config.retries  # type: ignore[attr-defined]
    standard = clients.dynamodb.meta.config.retries  # type: ignore[attr-defined]
    assert single_attempt["total_max_attempts"] == 1
    assert standard["total_max_attempts"] > 1
