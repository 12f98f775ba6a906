"""The explorer's stall past the grace period over the holds (2026-11-27, "review 57" in the
notes): an expiry whose claim (H2) applied and whose release was then reverted (refused: throttled
on every attempt, or too late) put the hold back live with its deadline.

- A confirm that had read the claim answered HoldExpired; a later confirm by a process whose clock
  was still before the deadline then made the same hold permanent (200): both answers, which no
  order explains. The revert now keeps the claim's ``expired`` mark, which a confirm refuses.
- A create refused for room whose reclaim gave its expiry up was judged again with the expired
  hold still holding the room, and answered 409. It now answers 503 (retry)."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import HoldExpired, LimitExceeded, StoreUnavailable
from hybrid_counter.keys import COUNTER_PREFIX
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Race
from tests.faults import injected
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration

THROTTLED = "ProvisionedThroughputExceededException"


def _a_release(body: dict) -> bool:
    """A release on the account's counter item (it names ``last_release``)."""
    on_the_counter = str(body.get("Key", {}).get("sk", {}).get("S", "")).startswith(COUNTER_PREFIX)
    return on_the_counter and "last_release" in str(body.get("ExpressionAttributeNames", {}))


LEFT: list[tuple[Org, str]] = []


@pytest.fixture(autouse=True)
def expire_what_is_left():
    """Each test's holds past their deadline are expired once it ends: a hold left live past its
    deadline would be expired by a later test's sweep of the whole HoldIndex, which counts it."""
    yield
    while LEFT:
        org, account = LEFT.pop()
        for item in org.service.holds.expired(account, SEATS):
            org.service.holds.expire(account, str(item["resource_id"]["S"]), item)
        org.drain(account)


def _holding(settings, clients, stream) -> tuple[Org, str]:
    """An account of no organization, limit 2, whose hold h of 2 units is past its deadline."""
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "h", {}, "h", kind=SEATS, units=2, hold_seconds=60)
    org.drain(account)
    org.clock.now += 61
    LEFT.append((org, account))
    return org, account


def test_a_hold_whose_expiry_was_reverted_is_never_confirmed(settings, clients, stream) -> None:
    org, account = _holding(settings, clients, stream)
    # When the sweeper's expiry claims h and its release is throttled on every attempt (the claim
    # reverted: h live again, its deadline passed) ...
    item = next(i for i in org.resources(account) if i["resource_id"]["S"] == "h")
    with injected(
        org.clients.dynamodb_single_attempt, "UpdateItem", error=THROTTLED, times=10, where=_a_release
    ):
        assert org.service.holds.expire(account, "h", item) is False
    [h] = org.resources(account)
    assert h["state"]["S"] == "live"
    # ... then a confirm by a process whose clock is still before the deadline
    behind = Effects(clock=lambda: org.clock.now - 61, waiter=Waiter(attempts=3, delay=0.01))
    confirmer = ResourceService(org.settings, org.clients, effects=behind)
    # Then it answers HoldExpired (a confirm meeting the claim was told so), never 200
    with pytest.raises(HoldExpired):
        confirmer.confirm(account, "h", kind=SEATS)
    # ... and the next sweep expires it: its units back
    org.sweeper().sweep()
    org.drain(account)
    assert org.resources(account) == []
    assert org.service.counters.read(account, kind=SEATS).best_effort == 0


def test_a_create_whose_reclaim_gave_an_expiry_up_answers_503_not_409(settings, clients, stream) -> None:
    org, account = _holding(settings, clients, stream)
    # When a create of 1 is refused for room and its reclaim's expiry release is throttled on
    # every attempt (its claim reverted)
    with (
        injected(
            org.clients.dynamodb_single_attempt,
            "UpdateItem",
            error=THROTTLED,
            times=10,
            where=_a_release,
        ),
        pytest.raises(StoreUnavailable) as answered,
    ):
        org.service.create(account, "y", {}, "y", kind=SEATS)
    # Then it answers 503 (retry), not 409: the room is an expired hold's, which it could not
    # release; the retry (the release no longer throttled) gets it
    assert not isinstance(answered.value, LimitExceeded)
    _, created = org.service.create(account, "y", {}, "y", kind=SEATS)
    assert created


def test_a_confirm_that_read_the_hold_before_an_expiry_it_meets_reverted_is_refused(
    settings, clients, stream
) -> None:
    org, account = _holding(settings, clients, stream)
    behind = Effects(clock=lambda: org.clock.now - 61, waiter=Waiter(attempts=3, delay=0.01))
    confirmer = ResourceService(org.settings, org.clients, effects=behind)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When a confirm by a process whose clock is before the deadline has read h (live) and
        # stops before its write (H1) ...
        confirm = race.start("confirm", lambda: confirmer.confirm(account, "h", kind=SEATS))
        stop_before(race, confirm, lambda call: "REMOVE hold_until" in str(call.body.get("UpdateExpression")))
        # ... and an expiry claims h, and its release is throttled on every attempt (reverted)
        item = next(i for i in org.resources(account) if i["resource_id"]["S"] == "h")
        with injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", error=THROTTLED, times=10, where=_a_release
        ):
            expiry = race.run("expire", lambda: org.service.holds.expire(account, "h", item))
        assert expiry.result is False
        race.finish(confirm)
    # Then the confirm is refused (HoldExpired): h was claimed by an expiry, which a confirm
    # meeting that claim was told; never 200
    assert isinstance(confirm.error, HoldExpired), confirm.error
