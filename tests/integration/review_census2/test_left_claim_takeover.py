"""Review of the census (2): a claim left to the census taken over again becomes visible."""

from __future__ import annotations

import time

import pytest

from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import LimitExceeded, NotFound
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from tests.explorer.scheduler import Race

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def timed(settings, clients, clock):
    return ResourceService(
        settings, clients, effects=Effects(clock=clock, waiter=Waiter(attempts=2, delay=0.01))
    )


def _dead_after_correction(timed, service, settings, clients, clock, account, drain):
    """a and b at a limit of 2; a's delete died after its claim (before its release); b deleted
    (last_release names b); a's retried DELETE took it over, left it to the census, corrected
    the range (a's slot freed) and died before its removal. Then c0, c1 fill the two slots."""
    timed.set_limit(account, 2)
    for rid in ("a", "b"):
        timed.create(account, rid, {}, resource_id=rid)
    drain(account)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first = race.start("DELETE a", lambda: timed.delete(account, "a"))
        race.until(first, "UpdateItem")
        race.step(first, fault="crash")
    timed.delete(account, "b")
    clock.now += settings.pending_grace_seconds + 1
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        retry = race.start("DELETE a again", lambda: timed.delete(account, "a"))
        correction = race.until(retry, "UpdateItem", count=4)  # claim, takeover, mark, correction
        assert "COUNTER" in str(correction.body.get("Key")), correction.describe()
        assert race.next_call(retry) == "DeleteItem"
        race.step(retry, fault="crash")
    assert service.usage(account).best_effort == 0
    drain(account)
    for n in range(2):
        timed.create(account, f"c{n}", {})
    with pytest.raises(LimitExceeded):
        timed.create(account, "c2", {})


def test_a_second_takeover_of_a_claim_left_to_the_census_never_shows_it_without_its_slot(
    timed, service, settings, clients, clock, account, drain, live_count
):
    # Given a left to the census, its range corrected (its slot freed and taken by c0, c1 at a
    # limit of 2), its removal not made (the process died), and the sweeper not run yet
    _dead_after_correction(timed, service, settings, clients, clock, account, drain)
    assert live_count(account) == 2
    # When the client retries DELETE a once more, past the grace period of that takeover, and
    # the new takeover (plain claim refused, takeover applied) has written its claim
    clock.now += settings.pending_grace_seconds + 1
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        again = race.start("DELETE a a third time", lambda: timed.delete(account, "a"))
        race.until(again, "UpdateItem", count=2)  # plain claim (refused), takeover (applied)
        item = timed._table.get(account, "a")
        assert item is not None and resource_items.state_of(item) == "deleting"
        # Then a reader still does not see a: it holds no slot (the limit is 2, c0 and c1 hold them)
        seen = live_count(account)
        listed = [r.resource_id for r in service.list(account).items]
        race.finish(again)
    assert seen == 2, f"{seen} resources visible at a limit of 2 (listed: {listed})"


def test_a_second_takeover_of_a_left_claim_that_dies_after_its_claim_leaves_nothing_seen_without_its_slot(
    timed, service, settings, clients, clock, account, drain, live_count, counter
):
    # Given a left to the census, its range corrected (its slot freed, then taken by c0, c1)
    _dead_after_correction(timed, service, settings, clients, clock, account, drain)
    # When a retried DELETE a takes that claim over past its grace period and dies right after
    clock.now += settings.pending_grace_seconds + 1
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        again = race.start("DELETE a a third time", lambda: timed.delete(account, "a"))
        race.until(again, "UpdateItem", count=2)  # plain claim (refused), takeover (applied)
        race.step(again, fault="crash")
    # And the sweeper runs (a is in the PendingIndex)
    Sweeper(settings.table_name, counter, settings.pending_grace_seconds, clients, clock=clock).sweep()
    # Then a reader sees two resources at a limit of 2, never three
    listed = [r.resource_id for r in service.list(account).items]
    assert live_count(account) == 2, f"visible past the limit of 2: {listed}"
    with pytest.raises(NotFound):
        service.get(account, "a")
