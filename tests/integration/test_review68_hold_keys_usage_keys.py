"""Review 68 (fixed): a refusal that took its OrgHoldIndex key count from the organization's
``usage_keys`` (``HoldFlow.org_hold_keys`` as first written: a split shard's admission refused, a
member's grow refused at a split organization; ``org_level.refused``) read fewer keys than the
holds were put under when the organization has more shard items of the kind than
``usage_keys`` / 4.

A hold's key count is 4 x the shard items its create's precheck read (``org_level.hold_keys``);
``usage_keys`` is 4 x the most shards ``set_shards`` recorded, or, where it recorded none, 4 x the
shards the profile has now (``keys.usage_keys_of``). Two ways the items outnumbered it:

- an organization split before ``usage_keys`` was recorded, and taken back to fewer shards then
  (its items stay: design.md §10.1, "going back to fewer keeps the items"): ``shards`` 1, no
  ``usage_keys``, 4 items (the legacy state review 65 builds, its lowering made before the deploy);
- a ``PUT /orgs/{id}`` with ``shards`` that stalls after its profile write and its read of the
  kinds, while the organization is deleted and created again under its id: its reshard (an
  operator's rebase, ``creation`` None: any creation that lived) split the new creation's counter
  over the old creation's S, which the new profile never recorded.

The dry run counted every hold (its picture's 4 keys a shard item); the request did not: 409
where its reclaim admits it. Fixed: a split counter's refusal carries its picture's item count
(``Admission.items``); told none, a reclaim counts the kind's counter items itself; and the
reshard of ``PUT /orgs`` is made only on the creation it was asked of (OwnerGone: 503)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hybrid_counter.errors import InProgress, LimitExceeded
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, all_org_hold_keys, org_key
from hybrid_counter.resources.holds import ORG_HOLD_INDEX
from tests.integration.test_member_resizes import item, split_org
from tests.integration.test_org_hold_reclaim import Requests, at
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]

HOLDS = 31
MADE: list[SplitOrg] = []


@pytest.fixture(autouse=True)
def expire_every_key() -> Iterator[None]:
    """Each test's holds expired once it ends, under every key they may be under (64: 16 items),
    not the organization's usage_keys (which is what these tests show to be too few)."""
    yield
    while MADE:
        org = MADE.pop()
        later = at(org, org.clock.now + 10**6)
        for _ in range(3):
            later.holds.reclaim(org.accounts[0], SEATS, org=org.org_id, own=False, org_keys=64)
        org.drain()
        for _ in range(3):
            if not pending(org):
                break
            org.sweep_after_the_grace_period()
        assert in_index(org, 64) == {}
        assert pending(org) == []


def pending(org: SplitOrg) -> list[str]:
    """The organization's members' resources still in the PendingIndex (a claim, a pending item)."""
    left = []
    for account in org.accounts:
        for entry in org.clients.dynamodb.query(
            TableName=org.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": RESOURCE_PREFIX}},
            ConsistentRead=True,
        )["Items"]:
            if "pending_shard" in entry:
                left.append(f"{account}/{entry['sk']['S']}")
    return left


def in_index(org: SplitOrg, keys: int) -> dict[str, str]:
    """Resource id -> its OrgHoldIndex key, over the organization's first ``keys`` keys."""
    found: dict[str, str] = {}
    for key in all_org_hold_keys(org.org_id, keys):
        for entry in org.clients.dynamodb.query(
            TableName=org.settings.table_name,
            IndexName=ORG_HOLD_INDEX,
            KeyConditionExpression="hold_org = :org",
            ExpressionAttributeValues={":org": {"S": key}},
        )["Items"]:
            found[str(entry["resource_id"]["S"])] = key
    return found


def full_of_holds(org: SplitOrg) -> None:
    """40 seats: a uses 1 (x, made before), b holds 31 (one seat each, 10 s), c uses 8."""
    b, c = org.accounts[1:3]
    for n in range(HOLDS):
        org.service.create(b, f"h{n}", {}, f"h{n}", kind=SEATS, hold_seconds=10)
    org.service.create(c, "p", {}, "p", kind=SEATS, units=8)
    org.drain()


def grow_after_the_deadline(org: SplitOrg) -> tuple[bool, str | None, Requests, int]:
    """Past the holds' deadline: a's grow of x by 31 asked as a dry run, then made. (Its dry run's
    answer, the scope of its refusal (None: admitted), the requests it sent, the holds left in the
    index.)"""
    org.clock.now += 11
    a = org.accounts[0]
    dry = org.service.would_resize(a, "x", 1 + HOLDS, kind=SEATS).would_admit
    with Requests(org) as requests:
        try:
            org.service.resize(a, "x", 1 + HOLDS, kind=SEATS)
            refusal = None
        except LimitExceeded as refused:
            refusal = refused.scope
    org.drain()
    return dry, refusal, requests, len(in_index(org, 64))


def legacy_org(split_org: Callable[..., SplitOrg]) -> SplitOrg:
    """An organization of 40 seats split over 4 and taken back to 1 before usage_keys were
    recorded (its 4 items stay; its profile: shards 1, no usage_keys); a uses 1 seat (x)."""
    org = split_org(40, 4)
    MADE.append(org)
    org.service.create(org.accounts[0], "x", {}, "x", kind=SEATS)
    org.service.set_org_shards(org.org_id, 1)
    org.clients.dynamodb.update_item(
        TableName=org.settings.table_name, Key=org_key(org.org_id), UpdateExpression="REMOVE usage_keys"
    )
    org.service = org.new_service()
    assert org.service.get_org(org.org_id).usage_keys == 1
    assert set(org.picture().shards) == {0, 1, 2, 3}
    return org


def test_a_grow_at_a_legacy_organization_lowered_before_usage_keys_reclaims_every_expired_hold(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization of 40 seats split over 4 and taken back to 1 before usage_keys were
    # recorded (its 4 items stay; its profile: shards 1, no usage_keys)
    org = legacy_org(split_org)

    # and, after the deploy, full: b's 31 holds put under the 16 keys their prechecks' 4 items ask
    full_of_holds(org)
    keys = {item(org, org.accounts[1], f"h{n}")["hold_org"]["S"] for n in range(HOLDS)}
    assert keys <= set(all_org_hold_keys(org.org_id, 16))
    beyond = [k for k in keys if k != org.org_id]
    assert beyond, keys

    # When, past their deadline, a's grow by 31 is asked as a dry run, then made
    dry, refusal, requests, left = grow_after_the_deadline(org)

    # Then the dry run counts all 31 (16 keys), and so does the grow, refused at its shard
    # (before: it read 1 key, usage_keys, and 27 to 30 of the 31 were left: 409)
    assert dry is True
    assert refusal is None, (
        f"409 ({refusal}): the reclaim read {requests.seen[f'Query:{ORG_HOLD_INDEX}']} OrgHoldIndex key(s) of 16; "
        f"{left} of {HOLDS} expired holds left in the index (on {len(beyond)} keys beyond <org>)"
    )
    assert left == 0


def test_a_create_refused_at_a_shard_of_a_legacy_organization_reclaims_every_expired_hold(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given the legacy organization, full after the deploy: b's 31 holds under its 16 keys
    org = legacy_org(split_org)
    full_of_holds(org)
    on_first = sum(1 for key in in_index(org, 64).values() if key == org.org_id)

    # When its plan is lowered to 39 (laid out by the next create that sees it: its precheck
    # does not refuse, its shard's admission does) and, past the holds' deadline, a's create of
    # 30 is asked as a dry run, then made
    org.service.put_plan(org.plan, {SEATS: 39})
    org.service = org.new_service()
    org.clock.now += 11
    a = org.accounts[0]
    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS, units=30).would_admit
    with Requests(org) as requests:
        try:
            org.service.create(a, "y", {}, "y", kind=SEATS, units=30)
            refusal = None
        except LimitExceeded as refused:
            refusal = refused.scope
    org.drain()
    left = len(in_index(org, 64))

    # Then (9 used once the 31 go: 30 fit in 39) the dry run admits it, and so does the create
    # (before: refused, 26 to 28 holds left)
    assert dry is True
    assert refusal is None, (
        f"409 ({refusal}): the reclaims read {requests.seen[f'Query:{ORG_HOLD_INDEX}']} OrgHoldIndex key(s) "
        f"({on_first} holds under <org>); {left} of {HOLDS} expired holds left in the index"
    )
    assert left == 0


def test_a_stalled_reshard_never_splits_a_new_creation_of_the_organization(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization of 40 seats, one item, whose members used seats once (a counter, 0)
    org = split_org(40, 1)
    MADE.append(org)
    a = org.accounts[0]
    org.service.create(a, "r", {}, "r", kind=SEATS)
    org.service.delete(a, "r", kind=SEATS)
    org.drain()

    # and a PUT /orgs/{id} with shards 4 that writes the profile, reads the kinds, then stalls
    # while the organization is deleted and created again under its id (no shards asked: its
    # profile says 1), its members join again and a uses a seat
    stalled = org.new_service()
    reading = stalled.org_counters

    def read_then_stall(org_id: str) -> Any:
        kinds = reading(org_id)
        for account in org.accounts:
            org.service.remove_member(org.org_id, account)
        org.service.delete_org(org.org_id)
        org.service.put_org(org.org_id, org.plan)
        for account in org.accounts:
            org.service.add_member(org.org_id, account)
        org.service = org.new_service()
        org.service.create(a, "x", {}, "x", kind=SEATS)
        return kinds

    stalled.org_counters = read_then_stall  # type: ignore[method-assign]
    with pytest.raises(InProgress):
        stalled.set_org_shards(org.org_id, 4)

    # Then the stalled PUT answers 503 (its organization is gone) and the new creation's counter
    # stays one item, as its profile says (before, review 68: split over 4 items, its profile 1
    # shard and 1 usage key)
    assert set(org.picture().shards) == {0}
    profile = org.service.get_org(org.org_id)
    assert (profile.shards, profile.usage_keys) == (1, 1)

    # And, full of b's 31 holds (under its one key), past their deadline, a's grow by 31 (which
    # its dry run admits) reclaims them all and is admitted
    org.service = org.new_service()
    full_of_holds(org)
    dry, refusal, requests, left = grow_after_the_deadline(org)
    assert dry is True
    assert refusal is None, (
        f"409 ({refusal}): the reclaim read {requests.seen[f'Query:{ORG_HOLD_INDEX}']} OrgHoldIndex key(s); "
        f"{left} of {HOLDS} expired holds left in the index"
    )
    assert left == 0
