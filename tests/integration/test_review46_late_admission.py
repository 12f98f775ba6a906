"""Review 46 (hostile, 5503a97's half-grace rule for creates): C5 was made only within half the
grace period of the pending item's put, but the create's admissions (O2 at its organization, C4
at its account) were written however late. A create stalled past the grace period before them,
while a retry of its PUT adopted the item (C1a) and the sweeper counted it at both levels: the
stalled admissions then applied for a resource already counted, best_effort one unit above
anything live at both levels, for good (P2), and a create that fitted was refused.

O2 and C4 are now also made only within half the grace period of the put (each checked just
before its write); too late, the create is undone and answered 503. The review's own sequence
needs its stall to land between that check and the write's send (the residual window of every
half-grace rule, design.md §4.4 and §10.4); these tests stall just before each check: the put's
answer, then O2's, arriving past the grace period."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.errors import StoreUnavailable
from hybrid_counter.keys import RESOURCE_PREFIX
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _puts_the_pending_item(call: Call) -> bool:
    item = call.body.get("Item", {})
    return call.operation == "PutItem" and str(item.get("sk", {}).get("S", "")).startswith(RESOURCE_PREFIX)


def _admits_at_the_org(call: Call) -> bool:
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("pk", {}).get("S", "")).startswith("ORG#")
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
    )


def _at_org(org: Org) -> tuple[int, int]:
    """The organization's counters (none yet: nothing was ever admitted there)."""
    state = org.service.org_counters(org.org_id).get(SEATS)
    return (0, 0) if state is None else (state.best_effort, state.eventual)


def _settled(org: Org) -> None:
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    org.sweeper().sweep()
    org.drain()


@pytest.mark.parametrize("stalled_at", ["the put's answer", "the organization's admission's answer"])
def test_a_create_stalled_past_the_grace_period_before_an_admission_makes_none_after_it(
    settings, clients, stream, stalled_at
) -> None:
    # Given a member account of limit 2 in an organization of 2 seats, empty
    org = Org(settings, clients, stream, limit=2)
    first, _ = org.members
    org.service.set_limit(first, 2, kind=SEATS)
    creator = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When its PUT of x stalls past the grace period as its put (or its organization's
        # admission) is answered, and goes on
        create = race.start("create", lambda: creator.create(first, "x", {}, "x", kind=SEATS))
        stop_before(
            race, create, _puts_the_pending_item if stalled_at == "the put's answer" else _admits_at_the_org
        )
        org.clock.now += org.settings.pending_grace_seconds + 1
        race.finish(create)
    # Then it answers 503 ("not done"), having made no admission after the stall (one it made
    # before is undone), and nothing is held at either level once settled
    assert isinstance(create.error, StoreUnavailable), create.error
    _settled(org)
    state = org.service.counters.read(first, kind=SEATS)
    assert (org.live_units(), (state.best_effort, state.eventual), _at_org(org)) == (0, (0, 0), (0, 0))
    # And the caller's retry creates it, judged at both levels
    org.service.create(first, "x", {}, "x", kind=SEATS)
    org.drain()
    state = org.service.counters.read(first, kind=SEATS)
    assert (org.live_units(), (state.best_effort, state.eventual), _at_org(org)) == (1, (1, 1), (1, 1))


def test_a_create_stalled_past_the_grace_period_after_its_put_never_admits_an_item_adopted_meanwhile(
    settings, clients, stream
) -> None:
    # Given a member account of limit 2 in an organization of 2 seats, empty
    org = Org(settings, clients, stream, limit=2)
    first, _ = org.members
    org.service.set_limit(first, 2, kind=SEATS)
    adopted: list[bool] = []

    def stalled_at_the_puts_answer(http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        # When its PUT of x has put its pending item and stalls, as the put is answered, past
        # the grace period, while the caller's retry adopts the item (C1a) and the sweeper counts
        # it at both levels
        if adopted or model.name != "PutItem":
            return
        adopted.append(True)
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.service.create(first, "x", {}, "x", kind=SEATS)
        _settled(org)

    events = org.clients.dynamodb.meta.events
    events.register("after-call.dynamodb.PutItem", stalled_at_the_puts_answer)
    try:
        # ... and then goes on
        with pytest.raises(StoreUnavailable):
            org.new_service().create(first, "x", {}, "x", kind=SEATS)
    finally:
        events.unregister("after-call.dynamodb.PutItem", stalled_at_the_puts_answer)
    assert adopted
    # Then it made neither admission: x is held once at each level, and one more create fits
    _settled(org)
    state = org.service.counters.read(first, kind=SEATS)
    assert (org.live_units(), (state.best_effort, state.eventual), _at_org(org)) == (1, (1, 1), (1, 1))
    org.service.create(first, "z", {}, "z", kind=SEATS)


def test_a_create_stalled_past_the_grace_period_after_its_organizations_admission_never_admits_at_its_account(
    settings, clients, stream
) -> None:
    # Given a member account of limit 2 in an organization of 2 seats, empty
    org = Org(settings, clients, stream, limit=2)
    first, _ = org.members
    org.service.set_limit(first, 2, kind=SEATS)
    admitting_at_the_org: list[bool] = []
    adopted: list[bool] = []

    def note_the_orgs_admission(params: dict[str, Any], **_: Any) -> None:
        if not adopted and _admits_at_the_org(Call("create", "UpdateItem", params)):
            admitting_at_the_org.append(True)

    def stalled_at_the_orgs_answer(http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        # When its PUT of x is admitted at its organization and stalls, as that admission is
        # answered, past the grace period, while the caller's retry adopts the item (C1a) and the
        # sweeper counts it at both levels
        if adopted or not admitting_at_the_org:
            return
        adopted.append(True)
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.service.create(first, "x", {}, "x", kind=SEATS)
        _settled(org)

    # (the admissions are written by the client that makes one attempt: a lost response is theirs)
    events = org.clients.dynamodb_single_attempt.meta.events
    events.register("before-parameter-build.dynamodb.UpdateItem", note_the_orgs_admission)
    events.register("after-call.dynamodb.UpdateItem", stalled_at_the_orgs_answer)
    try:
        # ... and then goes on
        with pytest.raises(StoreUnavailable):
            org.new_service().create(first, "x", {}, "x", kind=SEATS)
    finally:
        events.unregister("before-parameter-build.dynamodb.UpdateItem", note_the_orgs_admission)
        events.unregister("after-call.dynamodb.UpdateItem", stalled_at_the_orgs_answer)
    assert adopted
    # Then it made no admission at its account after the stall: x is held once at each level,
    # and one more create fits
    _settled(org)
    state = org.service.counters.read(first, kind=SEATS)
    assert (org.live_units(), (state.best_effort, state.eventual), _at_org(org)) == (1, (1, 1), (1, 1))
    org.service.create(first, "z", {}, "z", kind=SEATS)
