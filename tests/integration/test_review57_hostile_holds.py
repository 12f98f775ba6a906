"""Review 57 (hostile, helper): a second reading of the fixes to reverted expiries (an expiry whose
claim was reverted keeps ``expired``; a confirm refuses a marked hold; a reclaim that gave an expiry
up answers 503)."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import HoldExpired, StoreUnavailable
from hybrid_counter.resources import ResourceService
from tests.faults import injected
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_review57_reverted_expiry import (
    LEFT,
    THROTTLED,
    _a_release,
    expire_what_is_left,
)

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left"]


def _release_of(rid: str):
    def where(body: dict) -> bool:
        return _a_release(body) and f"{rid}#" in str(body.get("ExpressionAttributeValues", {}))

    return where


def test_a_reclaim_that_freed_room_answers_the_create_not_503(settings, clients, stream) -> None:
    """Limit 2, two expired holds of 1 unit each: a create of 1 refused for room reclaims both; the
    first's release applies (room for the create), the second's is throttled (reverted)."""
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    LEFT.append((org, account))
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "ha", {}, "ha", kind=SEATS, units=1, hold_seconds=60)
    org.clock.now += 1
    org.service.create(account, "hb", {}, "hb", kind=SEATS, units=1, hold_seconds=60)
    org.drain(account)
    org.clock.now += 62
    with injected(
        org.clients.dynamodb_single_attempt, "UpdateItem", error=THROTTLED, times=10, where=_release_of("hb")
    ):
        try:
            _, created = org.service.create(account, "y", {}, "y", kind=SEATS)
            answer = "201" if created else "200"
        except StoreUnavailable as error:
            answer = f"503 {error}"
    # ha's units are released (the account holds hb's 1 of 2): the create fits
    assert org.service.counters.read(account, kind=SEATS).best_effort == 1 or answer == "201"
    assert answer == "201", f"the create had room after ha's expiry and answered {answer}"


def test_a_grow_of_a_hold_whose_expiry_was_reverted_is_refused(settings, clients, stream) -> None:
    """As the confirm (mutations 185, 186): a grow by a process whose clock is still before the
    deadline, of a hold an expiry claimed (a confirm told HoldExpired) and reverted."""
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    LEFT.append((org, account))
    org.service.set_limit(account, 3, kind=SEATS)
    org.service.create(account, "h", {}, "h", kind=SEATS, units=1, hold_seconds=60)
    org.drain(account)
    org.clock.now += 61
    item = next(i for i in org.resources(account) if i["resource_id"]["S"] == "h")
    with injected(
        org.clients.dynamodb_single_attempt, "UpdateItem", error=THROTTLED, times=10, where=_a_release
    ):
        assert org.service.holds.expire(account, "h", item) is False
    # a confirm is told the hold expired
    with pytest.raises(HoldExpired):
        org.service.confirm(account, "h", kind=SEATS)
    behind = Effects(clock=lambda: org.clock.now - 61, waiter=Waiter(attempts=3, delay=0.01))
    patcher = ResourceService(org.settings, org.clients, effects=behind)
    try:
        grown = patcher.resize(account, "h", 3, kind=SEATS)
        answer = f"200 units={grown.units}"
    except HoldExpired:
        answer = "HoldExpired"
    assert answer == "HoldExpired", f"a hold a confirm was told expired was then grown: {answer}"


def test_a_reclaim_whose_reverted_expiry_it_cannot_read_back_answers_503_not_409(
    settings, clients, stream
) -> None:
    """The 503 of mutation 187, by another way: the expiry's release throttled (its claim
    reverted, the hold live again holding the room), then the read of ``_still_claimed`` fails
    (InternalServerError on every botocore attempt): taken for "still claimed", the reclaim
    counts it expired, the create is judged again with the expired hold holding the room: 409."""
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    LEFT.append((org, account))
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "held-x", {}, "held-x", kind=SEATS, units=2, hold_seconds=60)
    org.drain(account)
    org.clock.now += 61

    def the_holds_read(body: dict) -> bool:
        return str(body.get("Key", {}).get("sk", {}).get("S", "")).endswith("held-x")

    with (
        injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", error=THROTTLED, times=10, where=_a_release
        ),
        injected(org.clients.dynamodb, "GetItem", error="InternalServerError", times=5, where=the_holds_read),
    ):
        try:
            org.service.create(account, "y", {}, "y", kind=SEATS)
            answer = "201"
        except Exception as error:
            answer = f"{type(error).__name__}: {error}"
    [h] = [i for i in org.resources(account) if i["resource_id"]["S"] == "held-x"]
    assert h["state"]["S"] == "live"  # reverted, the room still its
    assert h["expired"]["BOOL"]
    assert answer.startswith("StoreUnavailable") or answer.startswith("InProgress"), answer
