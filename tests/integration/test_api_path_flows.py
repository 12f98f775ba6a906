"""The API path against DynamoDB Local: limits, idempotency, and how each write's failures end."""

from __future__ import annotations

import time

import pytest

from hybrid_counter.api.app import build_app
from hybrid_counter.counters import AdmissionOutcome, CounterState
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import InProgress, LimitExceeded, NotFound
from hybrid_counter.keys import range_of, resource_key, token
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import items as resource_items
from hybrid_counter.resources.items import pending_item
from hybrid_counter.resources.table import ResourceTable
from tests.conftest import load_event
from tests.explorer.pytest_glue import retries_without_backoff
from tests.explorer.scheduler import Race
from tests.faults import injected

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module", autouse=True)
def without_backoff():
    """Botocore retries each throttled call or lost response as often as its config says, without
    its (randomly jittered) backoff sleeps between attempts: nothing here runs beside the test but
    a Race's operations, moved call by call, so the sleeps only cost wall time (the takeovers' and
    the throttled reads': about 45 s of them)."""
    with retries_without_backoff():
        yield


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def timed(settings, clients, clock):
    """A service on a clock the test moves, that does not wait long for other requests."""
    return ResourceService(
        settings, clients, effects=Effects(clock=clock, waiter=Waiter(attempts=2, delay=0.01))
    )


def test_limit_walkthrough(service, account, drain):
    # Given a limit of 3
    service.set_limit(account, 3)
    # When 3 resources are created
    ids = [service.create(account, f"r{n}", {})[0].resource_id for n in range(3)]
    # Then best-effort shows them at once, the 4th is refused, and eventual catches up
    assert service.usage(account).best_effort == 3
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "fourth", {})
    assert (refused.value.limit, refused.value.used) == (3, 3)
    drain(account)
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (3, 3)
    # When one is deleted, both counters drop at once and a repeated delete is NotFound
    service.delete(account, ids[0])
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (2, 2)
    with pytest.raises(NotFound):
        service.delete(account, ids[0])
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, usage.used, usage.limit) == (2, 2, 2, 3)
    # Then a create succeeds again
    service.create(account, "again", {})
    assert service.usage(account).best_effort == 3


def test_rejected_create_leaves_nothing_behind(service, account, clients, settings):
    service.set_limit(account, 0)
    with pytest.raises(LimitExceeded):
        service.create(account, "nope", {}, resource_id="r-rejected")
    item = clients.dynamodb.get_item(
        TableName=settings.table_name, Key=resource_key(account, "r-rejected"), ConsistentRead=True
    )
    assert "Item" not in item
    assert service.list(account).items == []


def test_put_with_same_id_is_idempotent_and_counted_once(service, account, drain):
    first, created = service.create(account, "a", {"k": 1}, resource_id="fixed")
    again, created_again = service.create(account, "a", {"k": 1}, resource_id="fixed")
    assert (created, created_again) == (True, False)
    assert again == first
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (1, 1)


def test_put_of_an_existing_id_succeeds_even_when_the_account_is_at_its_limit(service, account):
    service.set_limit(account, 1)
    service.create(account, "a", {}, resource_id="only")
    _, created = service.create(account, "a", {}, resource_id="only")
    assert created is False


def test_an_id_can_be_created_again_right_after_its_delete(service, account, drain):
    # Given a resource created and deleted (the stream has seen neither)
    service.create(account, "a", {}, resource_id="again")
    service.delete(account, "again")
    # When the same id is created at once
    _, created = service.create(account, "b", {}, resource_id="again")
    # Then it is a new resource, counted once whatever order the stream sees the old records in
    assert created is True
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (1, 1)
    assert service.get(account, "again").name == "b"


def test_a_delete_retried_after_its_first_attempt_died_before_its_release_releases_once(
    timed, service, account, clients, clock, drain
):
    # Given two counted resources, and a delete of one that died after its claim
    for rid in ("a", "b"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first = race.start("DELETE a", lambda: timed.delete(account, "a"))
        race.until(first, "UpdateItem")  # the claim
        race.step(first, fault="crash")  # dies instead of releasing
    # When the client retries at once, the resource is still claimed by the dead request
    with pytest.raises(InProgress):
        timed.delete(account, "a")
    assert service.get(account, "a").resource_id == "a"  # still visible, still counted
    assert service.usage(account).best_effort == 2
    # When it retries after the grace period, the dead claim is taken over and finished
    clock.now += timed._settings.pending_grace_seconds + 1
    timed.delete(account, "a")
    with pytest.raises(NotFound):
        timed.delete(account, "a")
    # Then the slot was released exactly once
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (1, 1)


def test_a_delete_retried_after_its_first_attempt_died_after_its_release_releases_once(
    timed, service, account, clients, drain
):
    for rid in ("a", "b"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first = race.start("DELETE a", lambda: timed.delete(account, "a"))
        race.until(first, "UpdateItem", count=2)  # claim and release
        race.step(first, fault="crash")  # dies instead of removing the item
    # The release applied: the slot is free, and the stream path removes the item
    assert service.usage(account).best_effort == 1
    drain(account)
    with pytest.raises(NotFound):
        timed.delete(account, "a")
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (1, 1)


def test_lost_response_of_the_admission_does_not_count_twice(service, account, clients, drain):
    # Given the admission reaches DynamoDB but its response is lost (a read timeout)
    with injected(clients.dynamodb_single_attempt, "UpdateItem", when="after") as fault:
        # When a resource is created
        resource, created = service.create(account, "a", {})
    # Then the caller gets the resource; the increment applied exactly once (no blind retry),
    # which the read-back of the counter item confirmed
    assert created is True
    assert fault.fired == 1
    assert service.usage(account).best_effort == 1
    drain(account)
    assert service.usage(account).eventual == 1
    assert service.get(account, resource.resource_id) == resource


def test_admission_that_never_left_is_retried_because_nothing_was_written(service, account, clients):
    with injected(clients.dynamodb_single_attempt, "UpdateItem", when="before", times=2) as fault:
        service.create(account, "a", {})
    assert fault.fired == 2
    assert service.usage(account).best_effort == 1


def test_an_admission_whose_outcome_stays_unknown_is_counted_by_the_sweeper_and_healed(
    timed, service, account, clients, settle, live_count
):
    # Given the admission answered with a 5xx (it may or may not have applied; here it did not)
    with injected(clients.dynamodb_single_attempt, "UpdateItem", error="InternalServerError"):
        resource, created = timed.create(account, "a", {})
    # Then the create is answered 201 (it may have counted), the resource is visible, and
    # best_effort undercounts it (never overcounts) until the sweeper has counted it
    assert created is True
    assert service.get(account, resource.resource_id)
    assert service.usage(account).best_effort == 0
    settle(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, live_count(account)) == (1, 1, 1)


@pytest.mark.parametrize("error", ["ThrottlingException", "TransactionConflictException"])
def test_an_admission_refused_without_effect_is_retried(service, account, clients, error):
    with injected(clients.dynamodb_single_attempt, "UpdateItem", error=error, times=2) as fault:
        service.create(account, "a", {})
    assert fault.fired == 2
    assert service.usage(account).best_effort == 1


def test_a_delete_meeting_a_transaction_on_its_resource_is_retried(service, account, clients):
    service.create(account, "a", {}, resource_id="a")
    with injected(clients.dynamodb, "UpdateItem", error="TransactionConflictException") as fault:
        service.delete(account, "a")
    assert fault.fired == 1
    assert service.usage(account).best_effort == 0


def test_best_effort_never_goes_negative(service, account, set_counter):
    resource, _ = service.create(account, "a", {})
    # A drifted counter at 0 (for example after failures) stays at 0 on delete.
    set_counter(account, best_effort=0)
    service.delete(account, resource.resource_id)
    assert service.usage(account).best_effort == 0


def test_list_pages_are_full_and_skip_creates_that_never_finished(service, account, settings, clients):
    # Given 7 resources, and 5 creates that never finished (pending, invisible) between them
    table = ResourceTable(settings.table_name, clients, Effects())
    for n in range(7):
        service.create(account, f"r{n}", {}, resource_id=f"id-{n}")
    for n in range(5):
        table.put_pending(pending_item(account, f"id-{n}x", "unfinished", {}, "i", now=time.time()))
    # When the account is listed 3 at a time
    pages, token_ = [], None
    while True:
        page = service.list(account, page_size=3, next_token=token_)
        pages.append([r.resource_id for r in page.items])
        token_ = page.next_token
        if token_ is None:
            break
    # Then every page but the last is full, and every visible resource is listed once
    assert all(len(page) == 3 for page in pages[:-1])
    assert sorted(rid for page in pages for rid in page) == [f"id-{n}" for n in range(7)]


def test_eventual_counter_covers_a_drifted_best_effort(service, account, drain, set_counter):
    # Given 3 counted resources and a best-effort counter that drifted down to 0 after failures
    service.set_limit(account, 3)
    for n in range(3):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=0)
    # When another create comes in, the limit is judged on max(best_effort, eventual)
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "over", {})
    assert refused.value.used == 3
    assert len(service.list(account).items) == 3


def test_admission_rechecks_eventual_inside_the_conditional_write(service, account, drain, set_counter):
    # Given the pre-check saw room, but the eventual counter reached the limit before the admission
    service.set_limit(account, 2)
    for n in range(2):
        service.create(account, f"r{n}", {})
    drain(account)
    set_counter(account, best_effort=0)
    stale = CounterState(best_effort=0, eventual=0, limit=2)
    # When the admission is attempted with that stale view
    admission = service.counters.admit(account, "x", token("x", "y"), stale)
    # Then the conditional write itself refuses it
    assert admission.outcome is AdmissionOutcome.REJECTED
    assert service.usage(account).best_effort == 0


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ({"error": "ProvisionedThroughputExceededException", "times": 10}, 429, "TooManyRequests"),
        ({"when": "before", "times": 10}, 503, "ServiceUnavailable"),
    ],
)
def test_store_errors_on_reads_become_a_retryable_status_with_the_error_body(
    service, account, clients, fault, status, code
):
    event = load_event("api_get_usage.json")
    path = f"/accounts/{account}/usage"
    event.update(rawPath=path, pathParameters={"account_id": account})
    event["requestContext"]["http"]["path"] = path
    app = build_app(lambda: service)
    with injected(clients.dynamodb, "GetItem", **fault):
        response = app.resolve(event, None)  # type: ignore[arg-type]
    assert response["statusCode"] == status
    assert f'"code": "{code}"' in response["body"]
    assert response["headers"]["Retry-After"] == "1"


def test_a_failed_rollback_leaves_an_invisible_create_that_a_put_adopts_after_the_grace_period(
    timed, service, account, clients, clock, settle, live_count
):
    # Given a limit of 1, and a PUT refused at its admission whose rollback cannot reach DynamoDB
    service.set_limit(account, 1)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        put = race.start("PUT orphan", lambda: timed.create(account, "refused", {}, resource_id="orphan"))
        race.until(put, "PutItem")
        race.run("POST", lambda: timed.create(account, "winner", {}))
        race.until(put, "UpdateItem")
        while race.next_call(put) == "DeleteItem":
            race.step(put, fault="unsent")
        race.finish(put)
    assert isinstance(put.error, LimitExceeded)
    # Then the refused create is invisible and holds no slot
    with pytest.raises(NotFound):
        service.get(account, "orphan")
    assert (service.usage(account).best_effort, live_count(account)) == (1, 1)
    # When the client PUTs the id again within the grace period, the outcome is not settled yet
    with pytest.raises(InProgress):
        timed.create(account, "refused", {}, resource_id="orphan")
    # After it, the PUT adopts the orphan (as a retried PUT would find it created)
    clock.now += timed._settings.pending_grace_seconds + 1
    resource, created = timed.create(account, "refused", {}, resource_id="orphan")
    assert (resource.resource_id, created) == ("orphan", False)
    # And it is counted once, by the sweeper; best_effort undercounted it, never overcounted
    settle(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, live_count(account)) == (2, 2, 2)


def _a_delete_that_died(timed, clients, account: str, rid: str, release: str) -> None:
    """A delete of ``rid`` that died after its claim: after its release (``applied``: it could
    not remove its item, and the stream is stopped), or before it (``never sent``)."""
    if release == "applied":
        with injected(
            clients.dynamodb, "DeleteItem", error="ProvisionedThroughputExceededException", times=100
        ):
            timed.delete(account, rid)
        return
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        first = race.start(f"DELETE {rid}", lambda: timed.delete(account, rid))
        race.until(first, "UpdateItem")  # its claim
        race.step(first, fault="crash")


def _admits_exactly(timed, account: str, n: int) -> None:
    """``n`` creates admitted, the next one refused: the limit, never one past it."""
    for i in range(n):
        timed.create(account, f"c{i}", {})
    with pytest.raises(LimitExceeded):
        timed.create(account, f"c{n}", {})


def _a_died_then_b_deleted(timed, clients, drain, account: str, ids: tuple[str, ...], release: str) -> None:
    """``ids`` counted at a limit of as many, then the stream stopped; a delete of a that died
    after its claim (``release``: applied, or never sent), then a delete of b, whose release
    overwrites last_release: nothing can tell whether a's release applied."""
    timed.set_limit(account, len(ids))
    for rid in ids:
        timed.create(account, rid, {}, resource_id=rid)
    drain(account)
    _a_delete_that_died(timed, clients, account, "a", release)
    timed.delete(account, "b")


def _retried_delete_dies_after_its_correction(timed, clients, account: str) -> None:
    """A retried DELETE of a takes it over, leaves it to the census, corrects the range (a's slot
    released) and dies before it removes a."""
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        retry = race.start("DELETE a again", lambda: timed.delete(account, "a"))
        correction = race.until(retry, "UpdateItem", count=4)  # claim, takeover, mark, correction
        assert "COUNTER" in str(correction.body.get("Key")), correction.describe()
        assert race.next_call(retry) == "DeleteItem"  # the removal
        race.step(retry, fault="crash")


@pytest.mark.parametrize("release", ["applied", "never sent"])
def test_a_takeover_that_cannot_tell_whether_the_release_applied_releases_exactly_once_by_a_census(
    release, timed, service, settings, clients, clock, account, drain, live_count
):
    # Given three counted resources at the limit of 3, the stream stopped, a delete of a that
    # died after its claim (its release applied, or never sent), then a delete of b
    _a_died_then_b_deleted(timed, clients, drain, account, ("a", "b", "z"), release)
    held = 1 if release == "applied" else 2
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (held, held)
    # When the client retries the delete of a after the grace period: nothing can tell whether
    # its release applied (last_release names b, the stream has not removed a)
    clock.now += settings.pending_grace_seconds + 1
    timed.delete(account, "a")  # 204: the census of a's range released it, exactly once
    # Then the counters hold z alone, whichever it was: nothing was released twice (this was the
    # one double release, design.md §4, before the census)
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (1, 1)
    with pytest.raises(NotFound):
        service.get(account, "a")
    # And exactly two creates are admitted, never one past the limit
    _admits_exactly(timed, account, 2)
    assert live_count(account) == 3
    # And the stream's late records change nothing: exact
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (3, 3)


def _same_range_as(rid: str) -> str:
    return next(f"p{n}" for n in range(1_000) if range_of(f"p{n}") == range_of(rid))


def test_a_takeover_whose_range_is_busy_answers_503_and_the_sweepers_census_finishes_it(
    timed, service, settings, clients, clock, account, drain, counter, live_count
):
    # Given a at a limit of 2, its delete dead after its release (the stream stopped), and
    # another delete of the kind since (last_release names b)
    _a_died_then_b_deleted(timed, clients, drain, account, ("a", "b"), "applied")
    clock.now += settings.pending_grace_seconds + 1
    # And a create running in a's range (its pending item, young): the range cannot stand still
    busy = _same_range_as("a")
    ResourceTable(settings.table_name, clients, Effects(clock=clock)).put_pending(
        pending_item(account, busy, "running", {}, "i", now=clock())
    )
    # When the client retries the delete of a: 503, a left to the census, nothing released
    with pytest.raises(InProgress):
        timed.delete(account, "a")
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (0, 0)
    left = clients.dynamodb.get_item(
        TableName=settings.table_name, Key=resource_key(account, "a"), ConsistentRead=True
    )["Item"]
    assert left["left_to_census"] == left["delete_request"]
    assert "pending_shard" in left  # the sweeper finds it
    # (from the mark on, a reader no longer sees a: its slot may be held for nothing meanwhile)
    with pytest.raises(NotFound):
        service.get(account, "a")
    # And while the create runs, the sweeper cannot settle it either
    sweeper = Sweeper(settings.table_name, counter, settings.pending_grace_seconds, clients, clock=clock)
    sweeper.sweep()
    assert resource_items.state_of(timed._table.get(account, "a")) == "deleting"
    # When the create is over (its item pending past the grace period) and the sweeper runs
    clock.now += settings.pending_grace_seconds + 1
    sweeper.sweep()
    # Then a is gone (not only hidden), the range was released exactly once (a's release had
    # applied), and the create left pending was rolled back
    assert timed._table.get(account, "a") is None
    drain(account)
    assert (service.usage(account).best_effort, service.usage(account).eventual) == (0, 0)
    _admits_exactly(timed, account, 2)
    assert live_count(account) == 2


def test_a_put_of_the_id_of_a_claim_left_to_the_census_takes_that_census_and_creates_it_again(
    timed, service, settings, clients, clock, account, drain, live_count
):
    # Given a at a limit of 2, its delete dead after its release (the stream stopped), and
    # another delete of the kind since (last_release names b)
    _a_died_then_b_deleted(timed, clients, drain, account, ("a", "b"), "applied")
    clock.now += settings.pending_grace_seconds + 1
    # And a left to the census by a retried DELETE that found a's range busy (a create running)
    busy = _same_range_as("a")
    table = ResourceTable(settings.table_name, clients, Effects(clock=clock))
    table.put_pending(pending_item(account, busy, "running", {}, "i", now=clock()))
    with pytest.raises(InProgress):
        timed.delete(account, "a")
    # When that create ends without an admission (its item removed) and the client PUTs a again
    clients.dynamodb.delete_item(TableName=settings.table_name, Key=resource_key(account, busy))
    resource, created = timed.create(account, "a", {}, resource_id="a")
    # Then the PUT took the census of a's range itself (it answered 503 until the sweeper's) and
    # created a afresh: a new incarnation, a's old slot released exactly once
    assert created
    assert resource.resource_id == "a"
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (1, 1)
    assert live_count(account) == 1
    _admits_exactly(timed, account, 1)


def test_a_takeover_whose_claims_response_is_lost_never_releases_on_a_guess(
    timed, service, settings, clients, clock, account, drain, live_count
):
    # Given a, b, z counted at a limit of 3, the stream stopped; a delete of a whose release
    # applied but that could not remove its item, then a delete of b (last_release names b)
    _a_died_then_b_deleted(timed, clients, drain, account, ("a", "b", "z"), "applied")
    assert service.usage(account).best_effort == 1  # z
    clock.now += settings.pending_grace_seconds + 1
    # When the client retries the delete of a past the grace period, and the response to its
    # takeover of a's claim is lost (the takeover applied; botocore resends it, refused: the
    # claim is its own now, and the item says it was a takeover: took_over)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        retry = race.start("DELETE a", lambda: timed.delete(account, "a"))
        race.until(retry, "UpdateItem")  # its plain claim, refused: a is claimed (stale)
        assert race.next_call(retry) == "UpdateItem"  # the takeover
        race.step(retry, fault="lost")
        race.finish(retry)
    # Then a's units are not released a second time (found by the review of the census: the
    # resent takeover was taken for a fresh claim, which releases)
    assert retry.error is None
    assert service.usage(account).best_effort == 1, "a's release was made twice"
    with pytest.raises(NotFound):
        service.get(account, "a")
    # And exactly two creates are admitted, never one past the limit
    _admits_exactly(timed, account, 2)
    assert live_count(account) == 3


def test_a_takeover_dead_after_its_census_correction_leaves_nothing_seen_without_its_slot(
    timed, service, settings, clients, clock, account, drain, live_count, counter
):
    # Given a and b counted at a limit of 2; a delete of a that died after its claim, before its
    # release; then a delete of b (last_release names b)
    _a_died_then_b_deleted(timed, clients, drain, account, ("a", "b"), "never sent")
    assert service.usage(account).best_effort == 1  # a still holds its slot
    clock.now += settings.pending_grace_seconds + 1
    # When the retried DELETE a takes it over, leaves it to the census (from here on a reader no
    # longer sees a), corrects the range (a's slot released) and dies before it removes a
    _retried_delete_dies_after_its_correction(timed, clients, account)
    assert service.usage(account).best_effort == 0
    drain(account)
    # Then two creates are admitted into the free slots, and a reader sees two resources, never
    # three (found by the review of the census: a stayed visible until the sweeper's next run)
    _admits_exactly(timed, account, 2)
    with pytest.raises(NotFound):
        service.get(account, "a")
    assert [r.resource_id for r in service.list(account).items].count("a") == 0
    assert live_count(account) == 2
    # And the sweeper's next run removes its item, without waiting for a grace period
    Sweeper(settings.table_name, counter, settings.pending_grace_seconds, clients, clock=clock).sweep()
    assert resource_items.state_of(timed._table.get(account, "a")) is None
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (2, 2)


def _left_after_its_correction(timed, service, settings, clients, clock, account, drain):
    """a and b at a limit of 2; a's delete died after its claim (before its release); b deleted
    (last_release names b); a's retried DELETE took it over, left it to the census, corrected the
    range (a's slot freed) and died before its removal. Then c0, c1 fill the two slots."""
    _a_died_then_b_deleted(timed, clients, drain, account, ("a", "b"), "never sent")
    clock.now += settings.pending_grace_seconds + 1
    _retried_delete_dies_after_its_correction(timed, clients, account)
    drain(account)
    _admits_exactly(timed, account, 2)


@pytest.mark.parametrize("by", ["a retried DELETE", "a repair"])
def test_a_claim_left_to_the_census_is_never_taken_over_again_its_census_finishes_it(
    by, timed, service, settings, clients, clock, account, drain, live_count
):
    # Given a left to the census, its range corrected (its slot freed, then taken by c0 and c1
    # at a limit of 2), its removal never made, and the sweeper not run yet
    _left_after_its_correction(timed, service, settings, clients, clock, account, drain)
    assert live_count(account) == 2
    # When, past the grace period of that takeover, another takeover tries (review of the census:
    # taken over, the claim lost its mark and was seen again, a third resource at a limit of 2)
    clock.now += settings.pending_grace_seconds + 1
    seen = timed._table.get(account, "a")
    assert timed._delete.take_over(account, "a", seen) is None  # refused: only its census finishes it
    if by == "a retried DELETE":
        with pytest.raises(NotFound):  # 404: the census finished it, the earlier attempt deleted it
            timed.delete(account, "a")
    else:
        assert timed.repairs.finish_stale_delete(account, "a", seen)
    # Then a is gone, never seen again, and the counters are exact
    assert timed._table.get(account, "a") is None
    assert live_count(account) == 2
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual) == (2, 2)
