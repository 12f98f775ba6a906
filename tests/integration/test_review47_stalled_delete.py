"""Review 47 (hostile, stalls past the grace period): a delete's release at its ACCOUNT (D2) is
made however late. Only the organization's release (O3) is held to the half-grace rule
(delete._too_slow). A delete whose claim (D1) is answered past the grace period goes on to D2,
while a retried DELETE has taken its claim over and the census of the range has already given
its units back: the stalled D2 then releases them a second time, and the account admits past
its limit (both counters one below what is live: eventual too, as the claim saw it counted,
so the stream path's heal does not repair it; only a recount of the range would). The same
holds for a hold's expiry (a delete whose claim is the sweeper's, holds.py)."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from hybrid_counter.errors import DomainError, InProgress, LimitExceeded, NotFound
from hybrid_counter.keys import RESOURCE_PREFIX, resource_key
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _claims(call: Call) -> bool:
    """The delete's claim (D1): live -> deleting."""
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("sk", {}).get("S", "")).startswith(RESOURCE_PREFIX)
        and "delete_request" in call.body.get("UpdateExpression", "")
    )


def _live_units(org: Org, account: str) -> int:
    found = org.resources(account)
    return sum(int(i["units"]["N"]) for i in found if i["state"]["S"] == "live")


def _fill(org: Org, account: str, n: int) -> int:
    admitted = 0
    for i in range(n):
        try:
            org.service.create(account, f"z{i}", {}, f"z{i}", kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    return admitted


@pytest.mark.parametrize("member", [False, True], ids=["account", "member"])
def test_a_delete_stalled_past_the_grace_period_after_its_claim_releases_nothing_at_its_account(
    settings, clients, stream, member
) -> None:
    # Given an account of limit 2 holding x and y (a member of an organization of 10 seats, or not)
    org = Org(settings, clients, stream, limit=10)
    account = org.members[0] if member else f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "x", {}, "x", kind=SEATS)
    org.service.create(account, "y", {}, "y", kind=SEATS)
    org.drain(account)
    deleter = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When x's DELETE makes its claim and its answer arrives past the grace period ...
        delete = race.start("delete", lambda: deleter.delete(account, "x", kind=SEATS))
        stop_before(race, delete, _claims)  # (deleting_since: now, as the claim is sent)
        org.clock.now += org.settings.pending_grace_seconds + 1
        race.step(delete)  # the claim applies; its answer comes past the grace period
        # ... while the caller's retry takes the claim over and the census of the range frees x
        # (a member's: at its account; the sweeper then finishes it at its organization)
        with contextlib.suppress(InProgress, NotFound):
            org.service.delete(account, "x", kind=SEATS)
        org.drain(account)
        state = org.service.counters.read(account, kind=SEATS)
        assert (_live_units(org, account), state.best_effort) == (1, 1)
        # ... and then goes on
        race.finish(delete)
    org.drain(account)
    # Then x's units were freed once at its account: one more create fits of 2, not two
    assert delete.error is None or isinstance(delete.error, DomainError), delete.error
    state = org.service.counters.read(account, kind=SEATS)
    admitted = _fill(org, account, 2)
    org.drain(account)
    assert (admitted, _live_units(org, account)) == (1, 2), (state, admitted)
    # And the sweeper, past the grace period, finishes what the takeover left (a member's x, at
    # its organization): nothing of x is left (nor in the PendingIndex, which later tests sweep)
    org.clock.now += org.settings.pending_grace_seconds + 1
    org.sweeper().sweep()
    org.drain(account)
    assert x_left(org, account) is None


def x_left(org: Org, account: str) -> dict[str, Any] | None:
    found = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=resource_key(account, "x", kind=SEATS), ConsistentRead=True
    )
    return found.get("Item")


def test_a_sweeper_stalled_past_the_grace_period_after_expiring_a_hold_releases_nothing_at_its_account(
    settings, clients, stream
) -> None:
    # Given an account of limit 2 holding y, and x: a hold of 60 s, past its deadline
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "y", {}, "y", kind=SEATS)
    org.service.create(account, "x", {}, "x", kind=SEATS, hold_seconds=60)
    org.drain(account)
    org.clock.now += 61
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When a sweeper's run expires x (its claim) and its process stalls past the grace
        # period as the claim is answered ...
        first = race.start("sweeper", lambda: org.sweeper().sweep())
        stop_before(race, first, _claims)
        org.clock.now += org.settings.pending_grace_seconds + 1
        race.step(first)
        # ... while the next run takes the stale claim over and the census of its range frees x
        org.sweeper().sweep()
        org.drain(account)
        state = org.service.counters.read(account, kind=SEATS)
        assert (_live_units(org, account), state.best_effort) == (1, 1)
        # ... and then the stalled run goes on
        race.finish(first)
    org.drain(account)
    # Then x's units were freed once: one more create fits of 2, not two
    admitted = _fill(org, account, 2)
    org.drain(account)
    assert (admitted, _live_units(org, account)) == (1, 2), admitted
