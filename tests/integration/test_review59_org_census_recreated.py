"""Review 59 (hostile): the census of an organization's range that a repair asks for (design.md
§10.5, recount_requests.py), taken by the sweeper, against DELETE /orgs and the organization
created again under its id. Against DynamoDB Local, one clock.

F1: a census's correction (``OrgRecounter._correct``, conditional on the range version only)
stalled after its fences, lands on the counter item of the organization created again under the
id, whose range version has climbed back to the one the stalled census read.

F2: a request's settle (``RecountRequests.settle_org``, conditional on ``n`` only) stalled after
its census, removes another request of the same range put since the first was removed (``n``
starts at 1 again): that request's census is never taken, its seat held for good.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import org_counter_key, range_of
from tests.integration.test_org_census_requests import requests_of
from tests.integration.test_org_recount import SEATS, Org, _overcounted

pytestmark = pytest.mark.integration


@pytest.fixture
def org(settings, clients, stream) -> Org:
    return Org(settings, clients, stream, limit=3)


def same_range(rid: str, prefix: str) -> str:
    return next(f"{prefix}{n}" for n in range(10_000) if range_of(f"{prefix}{n}") == range_of(rid))


def live_of(org: Org, accounts: list[str]) -> int:
    return sum(int(i["units"]["N"]) for a in accounts for i in org.resources(a) if i["state"]["S"] == "live")


def one_more_seat(org: Org, member: str, rid: str = "second-seat") -> tuple[tuple[int, int], int]:
    """The organization's counters as they stand; then one more seat asked for by ``member``
    (refused or not), the streams drained; and the member's seats live after it."""
    counters = org.org_counters()
    with contextlib.suppress(LimitExceeded):
        org.service.create(member, rid, {}, rid, kind=SEATS)
    org.drain()
    return counters, live_of(org, [member])


def test_a_stalled_census_correction_lands_on_the_organization_created_again(org: Org) -> None:
    # Given an organization of 3 seats whose first member's create died between the levels
    # (its seat held there, nothing can tell: the roll back asked for the census of its range)
    ghost = _overcounted(org)
    first, second = org.members
    [y] = [i["resource_id"]["S"] for i in org.resources(second) if i["state"]["S"] == "live"]
    org.service.delete(second, y, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 0)  # the ghost's seat, held for nothing
    assert len(requests_of(org)) == 1
    # When the sweeper (S1) takes that census and stalls after its fences, before its correction
    s1 = org.sweeper()
    recounter: Any = s1._org_recounter
    real_correct = recounter._correct
    state: dict[str, Any] = {}
    ours = org_counter_key(org.org_id, kind=SEATS, shard=0)

    def stalled_correct(key, range_id, deltas, version, creation):
        if not state and key == ours:
            state["seen"] = (range_id, deltas, version)
            # ... while another sweeper run (S2) takes the same census and corrects the range ...
            org.sweeper().sweep()
            assert org.org_counters() == (0, 0)
            assert requests_of(org) == []
            # ... the members leave, the organization is deleted (its counters hold nothing) and
            # created again under its id, on a plan of 1 seat, with the first member again ...
            org.create_again(1, first)
            # ... which holds its 1 seat: a create in the ghost's range (its record not yet seen)
            new = same_range(ghost, "new")
            org.service.create(first, new, {}, new, kind=SEATS)
            assert org.org_counters() == (1, 0)
        return real_correct(key, range_id, deltas, version, creation)

    recounter._correct = stalled_correct
    s1.sweep()
    # Then the stalled correction must not apply to the new creation's counter (it read another
    # creation's shares): the organization of 1 seat still holds the seat that is live, and a
    # second seat is refused
    assert state["seen"][1] == (-1, 0)
    counters, live = one_more_seat(org, first)
    assert live <= 1, f"{live} seats live of 1 (counters after the stalled census: {counters})"


def test_a_stalled_settle_removes_a_request_put_after_the_first_was_removed(org: Org) -> None:
    # Given an organization of 3 seats whose first member's create died between the levels, its
    # seat held there and the census of its range asked for
    ghost = _overcounted(org)
    first, _second = org.members
    assert org.org_counters() == (2, 1)
    assert len(requests_of(org)) == 1
    # When the sweeper (S1) takes that census (it settles: the seat given back) and stalls before
    # it removes the request ...
    s1 = org.sweeper()
    real_settle = s1._requests.settle_org
    state: dict[str, Any] = {}

    def stalled_settle(org_id, range_id, seen, *, kind):
        if not state and org_id == org.org_id:
            state["seen"] = seen
            assert org.org_counters() == (1, 1)
            # ... another sweeper run (S2) takes the same request: nothing left to correct, settled
            # and removed ...
            org.sweeper().sweep()
            assert requests_of(org) == []
            # ... and another create of the first member in the same range dies between the
            # levels, its organization's records lost, another admission there since, and it is
            # rolled back past the grace period: a new request of that range (n = 1 again)
            ghost2 = _dead_between_levels(org, first, same_range(ghost, "g2-"))
            assert org.org_counters() == (3, 2), org.org_counters()
            assert [r["n"]["N"] for r in requests_of(org)] == ["1"]
            state["ghost2"] = ghost2
        return real_settle(org_id, range_id, seen, kind=kind)

    s1._requests.settle_org = stalled_settle  # type: ignore[method-assign]
    s1.sweep()
    # Then the new request is still there (its census was never taken), or its census was taken:
    # either way the next sweeps give the second ghost's seat back
    for _ in range(2):
        org.sweeper().sweep()
        org.drain()
    live = live_of(org, org.members)
    assert live == 2
    assert org.org_counters() == (2, 2), (
        f"a seat held for nothing, for good: counters {org.org_counters()}, live {live}, "
        f"requests left {requests_of(org)}"
    )


def _dead_between_levels(org: Org, account: str, rid: str) -> str:
    """A create of ``account`` that dies after its organization's admission (pending), its
    organization's records lost, then another member's admission there, and the roll back past
    the grace period (as test_org_recount._overcounted)."""
    from tests.faults import ProcessDied, injected

    other = next(m for m in org.members if m != account)
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(account, rid, {}, rid, kind=SEATS)
    org.lose_records()
    org.service.create(other, f"z-{uuid.uuid4().hex[:6]}", {}, kind=SEATS)
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    [item] = [i for i in org.resources(account) if i["state"]["S"] == "pending"]
    assert org.service.repairs.roll_back_stale_pending(account, rid, item)
    org.drain()
    return rid


def test_a_census_read_across_the_organizations_creation_again_corrects_nothing(org: Org) -> None:
    """(Twelfth session, after review 59.) A census whose member reads saw the deleted creation's
    items, and whose second read of the versions saw the organization created again under its id
    at the same range version, must not correct the new creation's counter by what it read of
    the old one: the census's fences compare creations as well as versions."""
    # Given the ghost's range settled by the sweeper's census (its version now counts the
    # ghost's admission and that correction: 2), no live resource left in it
    ghost = _overcounted(org)
    org.sweeper().sweep()
    first, second = org.members
    [y] = [i["resource_id"]["S"] for i in org.resources(second) if i["state"]["S"] == "live"]
    recounter: Any = org.recounter()
    real_census = recounter._census
    state: dict[str, Any] = {}

    def census_across_a_creation(scope: Any, range_id: str) -> list[dict[str, Any]]:
        found = real_census(scope, range_id)
        if not state:
            state["found"] = found
            # ... while its member reads run, the organization is emptied, deleted and created
            # again under its id on a plan of 1 seat, and the first member's create in the
            # ghost's range is admitted and counted there (the range's version: 2 again)
            org.service.delete(second, y, kind=SEATS)
            org.drain()
            org.create_again(1, first)
            new = same_range(ghost, "new")
            org.service.create(first, new, {}, new, kind=SEATS)
            org.drain()
            assert org.org_counters() == (1, 1)
        return found

    recounter._census = census_across_a_creation
    # When an operator's census of that range (org-recount, one range) runs
    result = recounter.settle_range(org.org_id, SEATS, range_of(ghost))
    # Then what it read of the old creation (nothing live there) corrected nothing of the new
    # one, whose seat stays held: a second seat is refused
    assert state["found"] == []
    assert result.settled
    assert org.org_counters() == (1, 1)
    with contextlib.suppress(LimitExceeded):
        org.service.create(first, "second-seat", {}, "second-seat", kind=SEATS)
    org.drain()
    assert live_of(org, [first]) == 1
