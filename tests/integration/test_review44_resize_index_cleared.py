"""Review 44 (hostile): review 43's fix puts a resize's claim in the PendingIndex with
``pending_since = if_not_exists(...)``, so a claim on an item that still carries an older entry
keeps that entry's old ``pending_since``. The sweeper's page then finds the entry older than the
grace period while the resize is fresh: ``_end_dead_resize`` leaves it (not stale, right), but
``_finished`` judges a live item counted everywhere as done and ``_clear_index`` takes it out of
the index (its condition ``counter_processed = true OR state <> live`` ignores the claim). If
that resize's request then dies, its claim is in no index again: review 43's defect, back (a
member's grow held at its organization for good).

How an old entry stays on an item counted everywhere: a resize that ended while the item was not
yet counted at its organization (its organization's records late) keeps its entry (``unindexed``'s
second try); the organization's count then makes it counted everywhere, the entry left for the
sweeper's next run, which comes after the next claim."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import account_pk
from tests.integration.test_member_resizes import grow_dies_between_the_levels, item, split_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def _drain_accounts(org: SplitOrg) -> None:
    for pk in [account_pk(a) for a in org.accounts]:
        while records := org.stream.records_of(pk):
            assert process_stream_batch(records, org.counter).failed_sequence_numbers == []


@pytest.mark.parametrize("shards", [1, 4])
def test_a_fresh_claim_on_an_item_with_an_old_index_entry_stays_indexed(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats; member a creates x (2 seats), counted at its account,
    # its organization's records late
    org = split_org(6, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    _drain_accounts(org)
    # And a PATCH of x to 3 that finishes (its claim's entry kept: x not counted everywhere yet)
    org.service.resize(a, "x", 3, kind=SEATS)
    org.drain()
    found = item(org, a, "x")
    assert "resize_request" not in found
    assert found["org_counted"]["BOOL"]
    assert found["counter_processed"]["BOOL"]
    assert "pending_since" in found  # the old entry, left for the sweeper's next run
    # When, past the grace period (before the sweeper's next run), x's grow to 6 dies between
    # the levels (its organization admitted the 3 more, its account did not move): the claim
    # keeps the old pending_since
    org.clock.now += org.settings.pending_grace_seconds + 1
    grow_dies_between_the_levels(org, a, "x", 6)
    org.drain()
    # ... and the sweeper runs at once, then three more times past the grace period
    Sweeper(
        org.settings.table_name, org.counter, org.settings.pending_grace_seconds, org.clients, clock=org.clock
    ).sweep()
    org.drain()
    indexed_after_first_run = "pending_since" in item(org, a, "x")
    for _ in range(3):
        org.sweep_after_the_grace_period()
    # Then the dead grow is settled (as review 43's test expects) and member b can take the seats
    claimed = "resize_request" in item(org, a, "x")
    refused = None
    try:
        org.service.create(b, "y", {}, "y", kind=SEATS, units=3)
    except LimitExceeded as error:
        refused = (error.scope, error.limit, error.used)
    assert (indexed_after_first_run, claimed, refused) == (True, False, None), (
        org.picture().used,
        org.live(),
    )
