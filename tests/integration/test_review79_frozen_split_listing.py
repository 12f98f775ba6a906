"""Review 79 (hostile): the near-limit listing of an organization whose first split is judged by
the stream path while shard 0 is frozen but not yet laid out (design.md §10.7a: "a crash between
the two writes leaves the organization unlisted until its next batch, never listed twice").

``ThresholdWatcher._split_image`` takes shard 0's near-limit row (from before the split) out of the
indexes before the ALERT# item's first write, but ``_unlist_shard_zero`` is conditional on
``attribute_exists(allowance)``: while the first rebase has frozen shard 0 (``rebasing``) and not
applied its plan yet (its process dead after the freeze, or just slower than the stream path), the
removal is refused and swallowed, and the ALERT# item is written listed all the same. From then
on the ALERT# item exists, so nothing ever takes shard 0's row out again: the organization is
listed twice, one row stale for good (after its members delete everything, still listed at 80 %).
"""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.orgs.counters import org_counters
from tests.faults import ProcessDied, injected
from tests.integration.test_governance import (
    EventfulOrg,
    bus,
    crossings,
    gov,
    gov_clients,
    gov_settings,
    watcher,
)

pytestmark = pytest.mark.integration
__all__ = ["bus", "gov", "gov_clients", "gov_settings", "watcher"]  # the fixtures
SEATS = "seats"


def rows(gov: Any, org: EventfulOrg) -> list[tuple[str, int, int]]:
    listed = gov.usage_over(threshold=80, kind=SEATS, page_size=100).rows
    return sorted((r.scope, r.threshold, r.used) for r in listed if r.owner == org.org_id)


def is_apply(body: dict[str, Any]) -> bool:
    """A rebase's apply of a shard's allowance (counters/split.py ``_apply``)."""
    return "REMOVE #rebasing" in body.get("UpdateExpression", "") and "#allowance" in str(
        body.get("ExpressionAttributeNames", {})
    )


def test_a_first_split_judged_while_shard_zero_is_frozen_never_lists_the_organization_twice(
    gov, gov_clients, stream, counter, watcher, bus
):
    # Given an organization of 10 seats on one counter item, its members holding 8 (80 %): Reached
    # 80, and its one item listed near its limit
    org = EventfulOrg(gov, stream, counter, watcher, bus, 1)
    org.create(8)
    org.pump()
    assert crossings(org.events()) == [("Reached", 80)]
    assert rows(gov, org) == [("organization", 80, 8)]
    # When it is split over 4 items and the rebase's process dies after freezing every shard and
    # writing its plan, before applying it (or is simply slower than the stream path)
    with (
        injected(gov_clients.dynamodb, "UpdateItem", when="crash", where=is_apply),
        pytest.raises(ProcessDied),
    ):
        gov.set_org_shards(org.org_id, 4)
    shard_zero = org_counters(gov_clients, gov._settings.table_name, org.org_id)[SEATS].get(0).state
    assert (shard_zero.rebasing is not None, shard_zero.allowance) == (True, None), shard_zero
    # ... the stream path judges the organization's batch (the freeze's records) meanwhile
    org.pump()
    # ... and a member's next create finishes the rebase (and takes a ninth seat)
    org.create(1)
    org.pump()
    listed_split = rows(gov, org)
    # ... and then its members delete every seat
    org.delete(9)
    org.pump(times=2)
    listed_empty = rows(gov, org)
    # Then the near-limit list named it once while it held 9, and names it no more once it holds
    # nothing (before: shard 0's row from before the split stayed beside the ALERT# item's, and
    # stayed listed, at 8 of 10, with nothing held)
    assert (len(listed_split), listed_empty) == (1, []), (listed_split, listed_empty)
