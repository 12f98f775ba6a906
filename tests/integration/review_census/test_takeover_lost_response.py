"""Review of the census of a dead delete's range: a takeover whose claim's response is lost."""

from __future__ import annotations

import time

import pytest

from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import LimitExceeded, NotFound
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Race
from tests.faults import injected

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


def test_a_takeover_whose_claims_response_is_lost_never_releases_on_a_guess(
    timed, service, settings, clients, clock, account, drain, live_count
):
    # Given a, b, z counted at a limit of 3, the stream stopped
    timed.set_limit(account, 3)
    for rid in ("a", "b", "z"):
        timed.create(account, rid, {}, resource_id=rid)
    drain(account)
    # And a delete of a whose release applied but that could not remove its item (died), then a
    # delete of b (last_release names b): nothing can tell whether a's release applied
    with injected(clients.dynamodb, "DeleteItem", error="ProvisionedThroughputExceededException", times=100):
        timed.delete(account, "a")
    timed.delete(account, "b")
    assert service.usage(account).best_effort == 1  # z
    clock.now += settings.pending_grace_seconds + 1
    # When the client retries the delete of a past the grace period, and the response to its
    # takeover of a's claim is lost (the takeover applied; botocore resends it)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        retry = race.start("DELETE a", lambda: timed.delete(account, "a"))
        race.until(retry, "UpdateItem")  # its plain claim, refused: a is claimed (stale)
        assert race.next_call(retry) == "UpdateItem"  # the takeover
        race.step(retry, fault="lost")
        race.finish(retry)
    # Then a's units are not released a second time: best_effort still holds z
    assert service.usage(account).best_effort == 1, "a's release was made twice"
    with pytest.raises(NotFound):
        service.get(account, "a")
    # And exactly two creates are admitted, never one past the limit
    admitted = 0
    for n in range(3):
        try:
            timed.create(account, f"c{n}", {})
            admitted += 1
        except LimitExceeded:
            pass
    assert (admitted, live_count(account)) == (2, 3)
