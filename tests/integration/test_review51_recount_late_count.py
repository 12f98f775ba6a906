"""Review 51 (hostile, accounts without an organization): the census that releases a create left
pending, and the stream path's late count of that same create.

A create admitted at its account (C4 applied) whose process died (or stalled) before making its
item live leaves it pending; §6 says the stream path counts it and makes it live. If the stream
path is late past the grace period (design.md §4: a failed batch waits in the retry queue longer
than the grace period), the sweeper's census of its range (the audit, or a census request of the
range) takes the pending item as "a create no caller was told of": it lowers the range's
best_effort share by its units, then removes it (conditional on its still being pending). Between
the two, the late admission record reaches the stream path, whose count (CountOp: ``state IN
(pending, live)``, any age) makes the item live and counts it; the removal is then refused. The
slot the correction released is held again by a live resource, and a create admitted in between
(best_effort and eventual both left room) is a resource past the limit, for good: 3 live of 2.
The design names only "a PUT adopting the item between the two" (the adoption exception) for
this window, not the stream path's own count, which it relies on to finish such a create."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import RESOURCE_PREFIX, range_of
from hybrid_counter.recount_requests import RecountRequests
from tests.explorer.scheduler import Call, Race
from tests.faults import ProcessDied, injected, on_a_resource
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _rolls_back(call: Call) -> bool:
    """The repair's removal of a create left pending (after the range's correction)."""
    key = call.body.get("Key", {})
    return call.operation == "DeleteItem" and str(key.get("sk", {}).get("S", "")).startswith(RESOURCE_PREFIX)


def _live_units(org: Org, account: str) -> int:
    return sum(int(i["units"]["N"]) for i in org.resources(account) if i["state"]["S"] == "live")


def test_a_census_releasing_a_create_left_pending_never_lets_its_late_count_pass_the_limit(
    settings, clients, stream
) -> None:
    # Given an account of no organization, limit 2, holding x (counted)
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "x", {}, "x", kind=SEATS)
    org.drain(account)
    # ... and c's create, admitted at the account (2 of 2), whose process dies as it makes c live;
    # the stream path is late with c's admission record (its batch in the retry queue)
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=on_a_resource),
        pytest.raises(ProcessDied),
    ):
        org.service.create(account, "c", {}, "c", kind=SEATS)
    state = org.service.counters.read(account, kind=SEATS)
    assert (state.best_effort, state.eventual) == (2, 1)
    org.clock.now += org.settings.pending_grace_seconds + 1
    # (something else of c's range asked for its census: a dead resize, a TTL'd pending item,
    # a dead delete left to the census; the audit asks for it too, for every create left pending)
    RecountRequests(org.settings.table_name, org.clients, org.clock).put(
        account, range_of("c"), "another repair in the range", kind=SEATS
    )
    sweeper = org.sweeper()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When the sweeper's census of c's range corrects the range (c, pending past the grace
        # period, holds nothing: best_effort 2 -> 1) and is about to remove c ...
        run = race.start("sweeper", sweeper.sweep)
        stop_before(race, run, _rolls_back)
        state = org.service.counters.read(account, kind=SEATS)
        assert (state.best_effort, state.eventual) == (1, 1)
        # ... a create of y is admitted (room: 1 of 2 on both counters) ...
        outcomes = []
        try:
            org.service.create(account, "y", {}, "y", kind=SEATS)
            outcomes.append("201")
        except LimitExceeded:
            outcomes.append("409")
        # ... and the stream path's late batch arrives (c's admission record: counted, made live)
        org.drain(account)
        # ... then the sweeper goes on (its removal of c, conditional on pending, is refused)
        race.finish(run)
    assert run.error is None, run.error
    org.drain(account)
    org.sweeper().sweep()
    org.drain(account)
    state = org.service.counters.read(account, kind=SEATS)
    live = sorted(i["resource_id"]["S"] for i in org.resources(account) if i["state"]["S"] == "live")
    # Then the units live never exceed the limit of 2
    assert _live_units(org, account) <= 2, (
        f"live {live} ({_live_units(org, account)} of limit 2), y: {outcomes}, "
        f"best_effort {state.best_effort}, eventual {state.eventual}"
    )
