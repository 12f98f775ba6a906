"""Review 37 (hostile, fixed: design.md §10.5): the organization's recount against a membership that changes while it runs."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _joins_after_the_member_list(org: Org, recounter, *, creates: list[str]) -> str:
    """Wrap the recount's read of the member list: right after it returns (the first time), a new
    account joins the organization (empty, as a join requires) and creates resources there."""
    newcomer = f"late-{uuid.uuid4().hex[:8]}"
    store = recounter._orgs
    real = store.members
    done = {"n": 0}

    def members(org_id, **kwargs):
        page = real(org_id, **kwargs)
        if done["n"] == 0:
            done["n"] += 1
            org.service.set_limit(newcomer, 10, kind=SEATS)
            org.service.add_member(org.org_id, newcomer)
            for rid in creates:
                org.service.create(newcomer, rid, {}, kind=SEATS)
            org.members.append(newcomer)
            org.drain()
        return page

    store.members = members
    return newcomer


@pytest.mark.parametrize("shards", [1, 2])
def test_a_member_joining_while_the_recount_runs_keeps_its_units(settings, clients, stream, shards) -> None:
    # Given an organization of 3 seats, healthy (nothing to correct), one seat held
    org = Org(settings, clients, stream, limit=3, shards=shards)
    org.service.create(org.members[0], "x", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 1)
    # When a recount with --fix runs, and an account joins after it read the member list and
    # creates a seat (counted by the stream path at both levels) before the census of its range
    recounter = org.recounter()
    _joins_after_the_member_list(org, recounter, creates=["late-seat"])
    report = recounter.recount(org.org_id, kind=SEATS, fix=True)
    org.drain()
    # Then, as more members create, the organization admits no more than its 3 seats
    for rid in ("y", "z", "w"):
        with contextlib.suppress(LimitExceeded):
            org.service.create(org.members[1], rid, {}, kind=SEATS)
    org.drain()
    assert org.live_units() <= 3, (report.actions, org.org_counters(), org.live_units())


def test_a_former_members_create_in_flight_is_not_taken_by_the_recount(settings, clients, stream) -> None:
    """A member's create judged before its account left: admitted at the organization, then its
    account left (the leave read the account empty before the create's pending put), and the
    account's admission is refused (MOVED) and the organization's undone. An organization recount
    taken between the leave and the undo no longer lists the account: its census misses the
    pending create, finds the range quiet, and takes the unit back; the undo then releases it a
    second time."""
    org = Org(settings, clients, stream, limit=3, accounts=3)
    keeper, other, leaver = org.members
    org.service.create(keeper, "x", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 1)
    store = org.service.org_store
    fired = {"n": 0}
    reports = []

    def before_account_admission(request, **_):
        import json

        from tests.faults import target_of

        if target_of(request) != "UpdateItem" or fired["n"]:
            return
        body = json.loads(request.body or b"{}")
        key = body.get("Key", {})
        if not (
            key.get("pk", {}).get("S", "").startswith("ACCOUNT#")
            and key.get("sk", {}).get("S", "").startswith("COUNTER#")
        ):
            return
        fired["n"] = 1
        # the leave's read of the account's items came before the create's pending put
        real_check = store._check_empty
        store._check_empty = lambda *a, **k: None  # type: ignore[method-assign]
        try:
            assert org.service.remove_member(org.org_id, leaver)
        finally:
            store._check_empty = real_check  # type: ignore[method-assign]
        org.members.remove(leaver)
        org.drain()  # the stream path counts the organization's admission there
        reports.append(org.recounter().recount(org.org_id, kind=SEATS, fix=True))
        return

    single = clients.dynamodb_single_attempt
    single.meta.events.register_first("before-send.*.*", before_account_admission)
    try:
        org.service.create(leaver, "ghost", {}, kind=SEATS)  # created as the account's alone
    finally:
        single.meta.events.unregister("before-send.*.*", before_account_admission)
    org.drain()
    assert fired["n"] == 1
    # Then the organization admits no more than its 3 seats
    for rid in ("y", "z", "w"):
        with contextlib.suppress(LimitExceeded):
            org.service.create(other, rid, {}, kind=SEATS)
    org.drain()
    assert org.live_units() <= 3, (reports[0].actions, org.org_counters(), org.live_units())
