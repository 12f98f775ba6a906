"""Review 62 (hostile): the census of an organization's range (design.md §10.5) on a SPLIT
organization (§10.6), against DELETE /orgs and the organization created again under its id.

Review 59 made each shard's correction conditional on ``org_epoch`` (the creation that opened a
single item) as well as on the range version, and ``_fences`` compare it. A split counter's shard
items carry no ``org_epoch``: their creation is in ``epoch`` (creation .. creation + 10^12,
orgs/counters.py ``of_creation``), which neither ``_fences`` nor ``expressions.correction`` read.
So a census stalled after its fences corrects a split organization created again under the id,
once that shard's range version has climbed back to the one it read (the correction's condition
``attribute_not_exists(org_epoch)`` holds on both creations' shards).

Fixed (2026-11-27, twelfth session): the census reads a shard's creation as ``of_creation`` does
(orgs/counters.py ``creation_of``: a split shard's by its epoch) and fences its correction on the
split shard's exact ``epoch`` (``creation_fence``); mutations 204 and 205.
"""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.keys import org_counter_key, org_pk, range_of
from tests.faults import ProcessDied, injected
from tests.integration.test_org_census_requests import requests_of
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_review59_org_census_recreated import one_more_seat, same_range

pytestmark = pytest.mark.integration

SHARDS = 2


def shard_of_range(rid: str) -> int:
    return int(range_of(rid), 16) % SHARDS


def shard_counters(org: Org) -> dict[str, Any]:
    items = org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": org_pk(org.org_id)}, ":prefix": {"S": f"COUNTER#{SEATS}#"}},
        ConsistentRead=True,
    )["Items"]
    return {
        i["sk"]["S"]: {k: v for k, v in i.items() if k not in ("pk", "sk", "basis_source", "last_admission")}
        for i in items
    }


def split_ghost(org: Org) -> str:
    """A create of the first member that died after its organization's admission on its shard
    (pending), the organization's records lost, another member's admission on the same shard
    since, and the roll back past the grace period: it asks for the census of the range."""
    first, second = org.members[:2]
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(first, "ghost", {}, "ghost", kind=SEATS)
    [pending] = [i for i in org.resources(first) if i["state"]["S"] == "pending"]
    shard = int(pending["org_shard"]["N"])
    org.lose_records()
    y = next(
        f"y{n}"
        for n in range(10_000)
        if range_of(f"y{n}") != range_of("ghost") and shard_of_range(f"y{n}") == shard
    )
    org.service.create(second, y, {}, y, kind=SEATS)
    org.drain()
    [yi] = [i for i in org.resources(second) if i["resource_id"]["S"] == y]
    assert int(yi["org_shard"]["N"]) == shard
    org.clock.now += org.settings.pending_grace_seconds + 1
    [pending] = [i for i in org.resources(first) if i["state"]["S"] == "pending"]
    assert org.service.repairs.roll_back_stale_pending(first, "ghost", pending)
    org.drain()
    org.service.delete(second, y, kind=SEATS)
    org.drain()
    return "ghost"


def test_a_stalled_census_correction_lands_on_the_split_organization_created_again(
    settings, clients, stream
) -> None:
    # Given a split organization (2 shards) of 3 seats whose first member's create died between
    # the levels (its seat held on its shard, nothing can tell: the roll back asked for a census)
    org = Org(settings, clients, stream, limit=3, shards=SHARDS)
    ghost = split_ghost(org)
    first, _second = org.members
    assert org.org_counters() == (1, 0), shard_counters(org)
    assert len(requests_of(org)) == 1
    # When the sweeper (S1) takes that census and stalls after its fences, before its correction
    s1 = org.sweeper()
    recounter: Any = s1._org_recounter
    real_correct = recounter._correct
    state: dict[str, Any] = {}
    prefix = org_counter_key(org.org_id, kind=SEATS, shard=0)["sk"]["S"].rpartition("#")[0]

    def stalled_correct(key, range_id, deltas, version, creation):
        if not state and key["sk"]["S"].startswith(prefix):
            state["seen"] = (key["sk"]["S"], range_id, deltas, version, creation)
            # ... while another sweeper run (S2) takes the same census and corrects the range ...
            org.sweeper().sweep()
            assert org.org_counters() == (0, 0)
            assert requests_of(org) == []
            # ... the members leave, the organization is deleted (its counters hold nothing) and
            # created again under its id, split in 2 again, on a plan of 1 seat, with the first
            # member again ...
            org.create_again(1, first, shards=SHARDS)
            # ... which holds its 1 seat: a create in the ghost's range (its record not yet seen)
            new = same_range(ghost, "new")
            org.service.create(first, new, {}, new, kind=SEATS)
            assert org.org_counters() == (1, 0), shard_counters(org)
            state["new"] = shard_counters(org)
        return real_correct(key, range_id, deltas, version, creation)

    recounter._correct = stalled_correct
    s1.sweep()
    # Then the stalled correction must not apply to the new creation's counter (it read another
    # creation's shares): the organization of 1 seat still holds the seat that is live, and a
    # second seat is refused
    assert state["seen"][2] == (-1, 0), state
    counters, live = one_more_seat(org, first)
    assert live <= 1, (
        f"{live} seats live of 1 (counters after the stalled census: {counters}; "
        f"stalled correction {state['seen']}; new creation's shards before it {state['new']})"
    )


def test_a_census_read_across_the_split_organizations_recreation_takes_back_its_seats(
    settings, clients, stream
) -> None:
    """Not a stalled correction: the census's own fences. Its two reads of the shards' range
    versions come from two creations of a split organization whose range versions agree (no
    ``org_epoch`` on split shards to tell them apart), the census between them read before the
    new creation's creates: the range is 'settled' and its seats taken back."""
    from hybrid_counter.counting.org_recount import OrgRecounter

    org = Org(settings, clients, stream, limit=3, shards=SHARDS)
    first, _second = org.members
    # Given a split organization whose first member's resource of range R came and went (the
    # shard's range version moved to vo, its counters back to 0)
    org.service.create(first, "a", {}, "a", kind=SEATS)
    org.drain()
    org.service.delete(first, "a", kind=SEATS)
    org.drain()
    assert org.org_counters() == (0, 0)
    rng = range_of("a")
    shard = shard_of_range("a")

    def version() -> int:
        sk = f"COUNTER#{SEATS}#{shard}"
        return int(shard_counters(org).get(sk, {}).get(f"v{rng}", {"N": "0"})["N"])

    vo = version()
    grace = org.settings.pending_grace_seconds
    service = org.service
    recounter = OrgRecounter(
        org.settings.table_name, org.clients, service.org_store, service.repairs, org.counter,
        grace_seconds=grace, clock=org.clock, sleep=lambda _: None, workers=1,
    )  # fmt: skip
    real_census = recounter._censuses.census
    state: dict[str, Any] = {}
    made: list[str] = []

    def census_then_recreated(account_id, range_id, *, kind):
        found = real_census(account_id, range_id, kind=kind)
        if not state and range_id == rng:
            state["done"] = True
            # ... after the census read the first member (nothing in R), the organization is
            # deleted and created again under its id, split in 2, on a plan of 2 seats, with the
            # first member, which creates 2 seats in R, its shard's range version back at vo ...
            org.create_again(2, first, shards=SHARDS)
            n = 0
            while version() < vo:
                rid = next(f"b{k}" for k in range(n, 10_000) if range_of(f"b{k}") == rng)
                n = int(rid[1:]) + 1
                org.service.create(first, rid, {}, rid, kind=SEATS)
                made.append(rid)
                if version() < vo:
                    org.drain()  # (the last one's count left to the stream: its version is vo)
            state["v"] = (vo, version(), shard_counters(org))
        return found

    recounter._censuses.census = census_then_recreated  # type: ignore[method-assign]
    # When a census of range R is taken across it (a sweeper's settle_range, or an operator's)
    result = recounter.settle_range(org.org_id, SEATS, rng, accounts=(first,))
    org.drain()
    # Then the new creation's seats are not taken back: its 2 live seats fill its limit of 2
    _, live = one_more_seat(org, first, "third-seat")
    assert live <= 2, (
        f"{live} seats live of 2 (census {result.settled=}, corrections {result.corrections}, "
        f"versions {state.get('v')}, made {made})"
    )
