"""Review 79: an unforced plan move of a split organization judged its use by the larger of its
shards' summed counters (``ShardSet.total()``), where its override's check and its admissions
count the shards' own uses summed (each shard the larger of its two counters). The two differ
where one shard's eventual is above its best_effort (P1's documented exception: an admission
whose outcome stayed unknown and did not apply, its resource counted by the stream path) while
another's best_effort is above its eventual (an admission not yet counted): the move was written
below the use its admissions judge by, where an override to the same limit is refused."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import LimitBelowUsage
from hybrid_counter.keys import org_counter_key
from tests.integration.test_org_split import SEATS, split_org

pytestmark = pytest.mark.integration
__all__ = ["split_org"]  # the fixture


def _move_best_effort(org, shard: int, by: int) -> None:
    # (the state the two in-flight creates leave, written directly: reaching P1's exception
    # through a lost admission is test_p1_exception's; here only the measure is judged)
    org.clients.dynamodb.update_item(
        TableName=org.settings.table_name,
        Key=org_counter_key(org.org_id, kind=SEATS, shard=shard),
        UpdateExpression="ADD best_effort :by",
        ExpressionAttributeValues={":by": {"N": str(by)}},
    )


def test_a_plan_move_of_a_split_organization_judges_its_use_as_its_admissions_do(split_org):
    # Given 10 seats over 2 shards, some held and counted on each shard
    org = split_org(10, 2)
    for n in range(40):
        shards = org.picture().shards.values()  # (laid out by the first create)
        if len(shards) == 2 and all(s.state.best_effort for s in shards):
            break
        org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)
    org.drain()
    held = org.picture()
    used = held.total().used
    assert len(held.shards) == 2
    assert all(s.state.best_effort == s.state.eventual > 0 for s in held.shards.values())
    # ... shard 0 one admission ahead of its count, shard 1's best_effort one below its eventual
    _move_best_effort(org, 0, 1)
    _move_best_effort(org, 1, -1)
    picture = org.picture()
    assert (picture.total().used, picture.used) == (used, used + 1)
    # And a plan of as many seats as the summed counters say are used
    small = f"small-{uuid.uuid4().hex[:8]}"
    org.service.put_plan(small, {SEATS: used})
    # Then an override of that many is below its use (one more, as its admissions count it) ...
    with pytest.raises(LimitBelowUsage):
        org.service.set_org_limit(org.org_id, SEATS, used)
    # ... and so is an unforced move to that plan (before: written, judged by the summed counters)
    with pytest.raises(LimitBelowUsage) as refused:
        org.service.put_org(org.org_id, small)
    assert refused.value.below == [(SEATS, used, used + 1)], refused.value.below
