"""Review 65: the census fence on both marks of the creation (orgs/counters.creation_fence) must
not refuse a legitimate correction for good: a mark written later within the same creation
(the single item's first split writes ``epoch`` on it) refuses the correction read before it,
and the census's next attempt must read it again and settle."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.keys import org_counter_key
from tests.integration.test_org_census_requests import requests_of
from tests.integration.test_org_recount import SEATS, Org, _overcounted

pytestmark = pytest.mark.integration


def test_a_census_correction_refused_by_the_first_split_between_its_read_and_write_settles(
    settings, clients, stream
) -> None:
    # Given an organization of 3 seats (one counter item) holding a ghost seat (a member's create
    # died between the levels), the census of its range asked for
    org = Org(settings, clients, stream, limit=3)
    _overcounted(org)
    _, second = org.members
    [y] = [i["resource_id"]["S"] for i in org.resources(second) if i["state"]["S"] == "live"]
    org.service.delete(second, y, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 0)
    assert len(requests_of(org)) == 1

    # When the sweeper takes the census, and between its read of the single item (org_epoch,
    # no epoch) and its correction an operator splits the counter over 2 (epoch written)
    s1 = org.sweeper()
    recounter: Any = s1._org_recounter
    real_correct = recounter._correct
    calls: list[Any] = []
    ours = org_counter_key(org.org_id, kind=SEATS, shard=0)

    def stalled_correct(key, range_id, deltas, version, creation):
        calls.append((key == ours, deltas, creation))
        if len(calls) == 1:
            org.service.set_org_shards(org.org_id, 2)
        return real_correct(key, range_id, deltas, version, creation)

    recounter._correct = stalled_correct
    s1.sweep()
    if requests_of(org):  # left to the next run: that one must settle it
        org.sweeper().sweep()

    # Then the ghost seat is given back and the request settled (not refused for good)
    assert requests_of(org) == [], calls
    assert org.org_counters()[0] == 0, (org.org_counters(), calls)
    assert len(calls) >= 2, calls
