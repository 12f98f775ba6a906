"""Review 63 (hostile): the creation fence of a census's correction (orgs/counters.py
``creation_fence``, counters/expressions.py ``correction(creation=)``) on a single item FROZEN by
its first split (``rebasing`` set, no ``epoch`` yet).

``_split(state)`` is true of a frozen single item (``rebasing`` is not None), so its fence is
``(EPOCH, state.epoch or None)`` = ``attribute_not_exists(epoch)``: the item's ``org_epoch`` (the
creation that opened it, which it still carries) is no longer checked. The single item of the
organization created again under its id, unsplit, has no ``epoch`` either: a stalled correction
read on the frozen item of the deleted creation lands on it once its range version climbs back
to the one read (review 59's F1 again, through the frozen state).
"""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.keys import org_counter_key, org_pk
from tests.faults import ProcessDied
from tests.integration.test_org_census_requests import requests_of
from tests.integration.test_org_recount import SEATS, Org, _overcounted
from tests.integration.test_review59_org_census_recreated import one_more_seat, same_range

pytestmark = pytest.mark.integration


def counter_items(org: Org) -> list[dict[str, Any]]:
    return org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": org_pk(org.org_id)}, ":prefix": {"S": f"COUNTER#{SEATS}#"}},
        ConsistentRead=True,
    )["Items"]


def freeze_for_a_split(org: Org) -> None:
    """An operator's split of the organization's counter (1 -> 2 shards) whose process dies after
    the freeze (step 2), before the plan: its record waits for the sweeper, shard 0 is frozen."""
    splits: Any = org.service.orgs.splits
    real = splits._record_plan

    def died(*args: Any, **kwargs: Any) -> Any:
        raise ProcessDied("after the freeze")

    splits._record_plan = died
    try:
        with pytest.raises(ProcessDied):
            org.service.set_org_shards(org.org_id, 2)
    finally:
        splits._record_plan = real


def test_a_stalled_census_correction_read_on_a_frozen_single_item_lands_on_the_creation_again(
    settings, clients, stream
) -> None:
    # Given an organization of 3 seats (one counter item) whose first member's create died
    # between the levels (its seat held there for nothing: the census of its range asked for)
    org = Org(settings, clients, stream, limit=3)
    ghost = _overcounted(org)
    first, second = org.members
    [y] = [i["resource_id"]["S"] for i in org.resources(second) if i["state"]["S"] == "live"]
    org.service.delete(second, y, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 0)
    assert len(requests_of(org)) == 1
    # ... and an operator's split of it to 2 shards that died after freezing the item
    freeze_for_a_split(org)
    [frozen] = [i for i in counter_items(org) if i["sk"]["S"].endswith("#0")]
    assert ("rebasing" in frozen, "epoch" in frozen, "org_epoch" in frozen) == (True, False, True), frozen
    # When the sweeper (S1) takes that census (before it finishes the rebase: same page) and
    # stalls after its fences, before its correction
    s1 = org.sweeper()
    recounter: Any = s1._org_recounter
    real_correct = recounter._correct
    state: dict[str, Any] = {}
    ours = org_counter_key(org.org_id, kind=SEATS, shard=0)

    def stalled_correct(key, range_id, deltas, version, creation):
        if not state and key == ours:
            state["seen"] = (range_id, deltas, version, creation)
            # ... while another sweeper run (S2) takes the same census (and finishes the split) ...
            org.sweeper().sweep()
            assert org.org_counters() == (0, 0)
            assert requests_of(org) == []
            # ... the members leave, the organization is deleted and created again under its id
            # (one counter item, not split), on a plan of 1 seat, with the first member ...
            org.create_again(1, first)
            # ... which holds its 1 seat: a create in the ghost's range (range version 1 again)
            new = same_range(ghost, "new")
            org.service.create(first, new, {}, new, kind=SEATS)
            assert org.org_counters() == (1, 0)
            state["new"] = counter_items(org)
        return real_correct(key, range_id, deltas, version, creation)

    recounter._correct = stalled_correct
    s1.sweep()
    # Then the stalled correction (read on the deleted creation's frozen item) must not apply to
    # the new creation's item: the organization of 1 seat holds its live seat, a second is refused
    assert state["seen"][1] == (-1, 0), state
    counters, live = one_more_seat(org, first)
    assert live <= 1, (
        f"{live} seats live of 1 (counters after the stalled census: {counters}; stalled "
        f"correction {state['seen']}; new creation's item before it {state['new']})"
    )
