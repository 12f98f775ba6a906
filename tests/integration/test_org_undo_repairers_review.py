"""Review 37 (hostile, fixed): two repairers finishing the same stale undo of a member's create;
one that died after its release while the stream path is late (design.md §10.3: only the repairer
that marked the undo releases it, else the census of its organization's range settles it)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, range_of
from tests.faults import ProcessDied, at_an_organization, injected
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _pending(org: Org, account: str) -> dict[str, Any]:
    found = org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": RESOURCE_PREFIX}},
        ConsistentRead=True,
    )["Items"]
    [item] = [i for i in found if i["state"]["S"] == "pending"]
    return dict(item)


def _ghost_past_the_grace(org: Org) -> tuple[str, str, Any, str]:
    """x held by the second member (counted at both levels), and a create of the first member
    that died between the levels (admitted and counted at the organization, pending at its
    account), now older than the grace period: (first, second, x, the ghost's id)."""
    first, second = org.members
    x, _ = org.service.create(second, "x", {}, kind=SEATS)
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(first, "ghost", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (2, 2)
    org.clock.now += org.settings.pending_grace_seconds + 1
    return first, second, x, _pending(org, first)["resource_id"]["S"]


def _marked_with_its_release_throttled(org: Org, first: str, ghost: str) -> bool:
    """A repairer (the audit, say) marks the ghost undoing, its release at the organization
    throttled on every attempt: what its roll-back answered."""
    with injected(
        org.clients.dynamodb_single_attempt,
        "UpdateItem",
        error="ThrottlingException",
        times=100,
        where=at_an_organization,
    ):
        return org.service.repairs.roll_back_stale_pending(first, ghost, _pending(org, first))


def test_a_stale_undo_finished_by_two_repairers_is_released_once(settings, clients, stream) -> None:
    org = Org(settings, clients, stream, limit=3)
    # Given x held (counted at both levels), and a create of the first member that died between
    # the levels: admitted and counted at the organization, pending at its account
    first, _, _, ghost = _ghost_past_the_grace(org)
    # A first repairer (the audit, say) marks it undoing but its release is throttled: left
    # marked, for the next repairer
    assert not _marked_with_its_release_throttled(org, first, ghost)
    # When an organization's recount --fix reads it in its census (undoing, not org_released) ...
    seen = _pending(org, first)
    assert "undoing" in seen
    assert "org_released" not in seen
    # ... while the sweeper finishes the undo: found marked by another repairer, nothing tells
    # whether that one's release applied (no note, last_release not its), so it does not
    # release again, and once the mark is older than the grace period the census of its
    # organization's range settles it (counted as holding nothing there, removed)
    assert not org.service.repairs.roll_back_stale_pending(first, ghost, _pending(org, first))
    org.clock.now += org.settings.pending_grace_seconds + 1
    org.recounter().settle_range(org.org_id, SEATS, range_of(ghost))
    org.drain()
    with pytest.raises(ValueError):  # (no pending item left)
        _pending(org, first)
    # ... and then the recount's repair of what it read (OrgRecounter._finish) runs
    org.recounter()._finish([seen], [])
    org.drain()
    # Then the organization released the dead create once: it holds x's seat
    assert (org.org_counters(), org.live_units()) == ((1, 1), 1)


def test_the_same_race_lets_the_organization_over_its_limit(settings, clients, stream) -> None:
    org = Org(settings, clients, stream, limit=3)
    first, second, _, ghost = _ghost_past_the_grace(org)
    _marked_with_its_release_throttled(org, first, ghost)
    seen = _pending(org, first)
    org.service.repairs.roll_back_stale_pending(first, ghost, _pending(org, first))
    org.drain()
    org.recounter()._finish([seen], [])
    org.drain()
    for rid in ("y", "z", "w"):
        with contextlib.suppress(LimitExceeded):
            org.service.create(second, rid, {}, kind=SEATS)
    org.drain()
    assert org.live_units() <= 3, (org.org_counters(), org.live_units())


def test_a_stale_undo_whose_repairer_died_after_its_release_is_not_released_again(
    settings, clients, stream
) -> None:
    """The repairer dies after its release at the organization, before removing the item; the
    organization's stream records are late (a failing batch in the retry queue, 360 s > the grace
    period): the next sweep's repair sees no ``org_released`` and releases again."""
    org = Org(settings, clients, stream, limit=3)
    first, _, _, ghost = _ghost_past_the_grace(org)
    with injected(org.clients.dynamodb, "DeleteItem", when="crash"), pytest.raises(ProcessDied):
        org.service.repairs.roll_back_stale_pending(first, ghost, _pending(org, first))
    assert org.org_counters() == (1, 1)  # released there once
    # the next sweep, five minutes later, the organization's records not processed yet
    org.clock.now += 300
    org.service.repairs.roll_back_stale_pending(first, ghost, _pending(org, first))
    org.drain()
    assert (org.org_counters(), org.live_units()) == ((1, 1), 1)


def test_a_stale_undo_nothing_can_confirm_is_settled_by_the_sweepers_census(
    settings, clients, stream
) -> None:

    org = Org(settings, clients, stream, limit=3)
    # Given x held, and a create of the first member that died between the levels (admitted and
    # counted at the organization); a repairer marked it undoing, its release throttled
    first, second, x, ghost = _ghost_past_the_grace(org)
    assert not _marked_with_its_release_throttled(org, first, ghost)
    # And another release at the organization since (x deleted: its last_release names x)
    org.service.delete(second, x.resource_id, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 1)  # the ghost's seat, still held there
    # When the sweeper runs once the mark is older than the grace period
    org.clock.now += org.settings.pending_grace_seconds + 1
    outcome = org.sweeper().sweep()
    org.drain()
    # Then the census of its range settled it: the ghost's seat given back once, the item gone
    assert outcome.pending_rolled_back >= 1  # (with the account's census of the create's range, if asked)
    assert (org.org_counters(), org.live_units()) == ((0, 0), 0)
    with pytest.raises(ValueError):
        _pending(org, first)
