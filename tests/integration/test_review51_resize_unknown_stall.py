"""Review 51 (hostile, stalls past the grace period, accounts without an organization).

A PATCH whose counter write (Z3) has an unknown outcome and did NOT apply, whose process then
stalls past the grace period before it reads ``last_resize`` back (resize._moved_after_all).
Meanwhile the sweeper settles its claim (Z5) at the size the counters hold: the size it had.
The PATCH then goes on: ``last_resize`` does not name it, and the wait for "the stream path
finished the resize" (``finished``: the item no longer names this request) is satisfied by the
settlement's revert, which it takes for a finish. It goes on to Z4 (refused: the claim is gone,
ignored) and answers **200 with the target size**, though the resource kept its old size and
the counters were never moved: a wrong answer, a 200 for a resize that was rolled back."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hybrid_counter.errors import DomainError
from hybrid_counter.keys import range_of
from hybrid_counter.recount_requests import RecountRequests
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _moves_the_counters(call: Call) -> bool:
    """Z3: the account's counter write of a resize (names ``last_resize``)."""
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
        and "last_resize" in call.body.get("UpdateExpression", "")
    )


def _item(org: Org, account: str, rid: str) -> dict[str, Any]:
    (found,) = [i for i in org.resources(account) if i["resource_id"]["S"] == rid]
    return found


@pytest.mark.parametrize("target", [1, 5], ids=["shrink", "grow"])
def test_a_resize_whose_unknown_counter_write_stalls_past_its_settlement_never_answers_200(
    settings, clients, stream, target
) -> None:
    # Given an account of no organization, limit 10, holding x of 3 units, counted
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 10, kind=SEATS)
    org.service.create(account, "x", {}, "x", kind=SEATS, units=3)
    org.drain(account)
    resizer = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When x's PATCH claims it and its counter write (Z3) fails with a 500 (outcome unknown;
        # it did not apply) ...
        patch = race.start("patch", lambda: resizer.resize(account, "x", target, kind=SEATS))
        stop_before(race, patch, _moves_the_counters)
        race.step(patch, fault="InternalServerError")
        # ... and its process stalls past the grace period before it reads last_resize back,
        # while the sweeper settles the claim (the counters hold 3: ended at 3)
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        x = _item(org, account, "x")
        assert "resize_request" not in x
        assert int(x["units"]["N"]) == 3
        # ... then goes on
        race.finish(patch)
    org.drain(account)
    x = _item(org, account, "x")
    state = org.service.counters.read(account, kind=SEATS)
    # The resource and the counters: still 3 (nothing moved)
    assert (int(x["units"]["N"]), state.best_effort, state.eventual) == (3, 3, 3)
    # Then the PATCH is not answered 200 with the size it never took (503: "retry", or an error)
    answered = None if patch.error is not None else patch.result.units
    assert isinstance(patch.error, DomainError) or answered == 3, (
        f"PATCH answered 200 with units={answered}, the resource holds 3"
    )


def _finishes_the_resize(call: Call) -> bool:
    """Z4: the resource takes its new size and drops the claim."""
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("sk", {}).get("S", "")).startswith("RESOURCE#")
        and "resize_request" in call.body.get("UpdateExpression", "")
        and "REMOVE" in call.body.get("UpdateExpression", "")
    )


def test_a_grow_whose_counter_write_applied_stalled_before_finishing_never_answers_a_size_it_lost(
    settings, clients, stream
) -> None:
    """The same wrong answer with a Z3 that applied (known): Z4 refused is ignored (resize._finish).
    x not counted yet (the stream path behind), another resize of the kind since (last_resize
    names it), and a census of x's range owed: the sweeper's settlement can only bound what the
    counters hold and settles x at its smaller size (design.md §4.4, Z5 step 3: "safe, not exact",
    the census then brings the counters down)."""
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 10, kind=SEATS)
    org.service.create(account, "v", {}, "v", kind=SEATS, units=1)
    org.drain(account)
    # Given x of 3 units, admitted, not yet counted (the stream path behind)
    org.service.create(account, "x", {}, "x", kind=SEATS, units=3)
    resizer = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When x's PATCH to 5 moves the counters (Z3 applied: 200 to come) and stalls before Z4 ...
        patch = race.start("patch", lambda: resizer.resize(account, "x", 5, kind=SEATS))
        stop_before(race, patch, _finishes_the_resize)
        # ... while v is resized (last_resize names v's), a census of x's range is asked for (a
        # dead resize or a TTL'd create of the range), and past the grace period the sweeper runs
        org.service.resize(account, "v", 2, kind=SEATS)
        RecountRequests(org.settings.table_name, org.clients, org.clock).put(
            account, range_of("x"), "another repair in the range", kind=SEATS
        )
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        race.finish(patch)
    org.drain(account)
    org.sweeper().sweep()
    org.drain(account)
    x = _item(org, account, "x")
    state = org.service.counters.read(account, kind=SEATS)
    answered = None if patch.error is not None else patch.result.units
    # Then the PATCH's answer is the size x has (or 503), and the counters hold what is live
    assert (state.best_effort, state.eventual) == (2 + int(x["units"]["N"]),) * 2
    assert isinstance(patch.error, DomainError) or answered == int(x["units"]["N"]), (
        f"PATCH answered 200 with units={answered}, x holds {x['units']['N']}"
    )


@pytest.mark.parametrize("ended_by", ["lost", "stream"])
def test_a_finish_refused_because_the_resize_already_took_its_size_still_answers_200(
    settings, clients, stream, ended_by
) -> None:
    """The other side of the fix: Z4 refused with the item at the target, because botocore resent
    a Z4 that applied (its response lost), or the stream path's FinishResizeOp came first: 200."""
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 10, kind=SEATS)
    org.service.create(account, "x", {}, "x", kind=SEATS, units=3)
    org.drain(account)
    resizer = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        patch = race.start("patch", lambda: resizer.resize(account, "x", 5, kind=SEATS))
        stop_before(race, patch, _finishes_the_resize)
        if ended_by == "lost":
            race.step(patch, fault="lost")  # applied; botocore resends it, refused
        else:
            org.drain(account)  # the stream path finishes x at 5 first
            assert int(_item(org, account, "x")["units"]["N"]) == 5
        race.finish(patch)
    org.drain(account)
    assert patch.error is None
    assert patch.result.units == 5
    assert int(_item(org, account, "x")["units"]["N"]) == 5
    state = org.service.counters.read(account, kind=SEATS)
    assert (state.best_effort, state.eventual) == (5, 5)
