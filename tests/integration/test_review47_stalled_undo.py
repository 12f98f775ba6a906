"""Review 47 (hostile, stalls past the grace period): a member's create refused by its account
undoes its organization's admission itself (OrgLevel.undo): it marks its pending item
``undoing`` (pending_since = now), then releases at its organization, however late. A request
stalled past the grace period after its mark finds the sweeper has meanwhile taken the item as
a dead undo (org_recount.dead_at_org: marked longer ago than the grace period), corrected the
organization's range by the census and removed it; the stalled release then frees the same
seat a second time, and the organization admits past its limit."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import DomainError, LimitExceeded
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _marks_undoing(call: Call) -> bool:
    return call.operation == "UpdateItem" and "undoing = :true" in call.body.get("UpdateExpression", "")


def _admits_at_the_account(call: Call) -> bool:
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("pk", {}).get("S", "")).startswith("ACCOUNT#")
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
        and "last_admission" in call.body.get("UpdateExpression", "")
    )


def _sweep(org: Org) -> None:
    org.drain()
    org.sweeper().sweep()
    org.drain()


@pytest.mark.parametrize("counted", [False, True], ids=["uncounted", "counted-at-org"])
def test_a_refused_members_undo_stalled_past_the_grace_period_after_its_mark_releases_nothing(
    settings, clients, stream, counted
) -> None:
    # Given an organization of 3 seats; second holds a; first (limit 1) holds nothing
    org = Org(settings, clients, stream, limit=3)
    first, second = org.members
    org.service.set_limit(first, 1, kind=SEATS)
    org.service.create(second, "a", {}, "a", kind=SEATS)
    org.drain()
    creator = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When first's create of b is admitted by the organization, then c is created at first
        # (its one seat), so b's account refuses it, and b's undo's mark is answered past the
        # grace period ...
        create = race.start("create", lambda: creator.create(first, "b", {}, "b", kind=SEATS))
        stop_before(race, create, _admits_at_the_account)
        if counted:
            org.drain()  # the stream path counts b's admission at its organization (org_counted)
        org.service.create(first, "c", {}, "c", kind=SEATS)
        stop_before(race, create, _marks_undoing)  # (pending_since: now, as the mark is sent)
        org.clock.now += org.settings.pending_grace_seconds + 1
        race.step(create)  # the mark applies; its answer comes past the grace period
        # ... while the sweeper finishes the undo by the census of the organization's range
        _sweep(org)
        _sweep(org)
        assert (org.live_units(), org.org_counters()[0]) == (2, 2)
        # ... and then it goes on
        race.finish(create)
    assert isinstance(create.error, DomainError), create.error
    # Then b's seat was given back once: one more create fits in the organization, not two
    # (uncounted: before the stream path's next batch, which raises best_effort back to
    # eventual, untouched by the stalled release; counted: eventual is one below too, for good)
    if counted:
        _sweep(org)
    admitted = 0
    for n in range(2):
        try:
            org.service.create(second, f"z{n}", {}, f"z{n}", kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    org.drain()
    assert (admitted, org.live_units()) == (1, 3), org.org_counters()
