"""Organizations' levels meeting each other's calls and faults (issue 24): every write path at the
organization's level, with another flow's call landing between two of its own, its process dying
between them, or its response lost; against DynamoDB Local, every component on one clock."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import InProgress, LimitExceeded, NotFound, Throttled
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, org_pk, range_of, resource_key
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources.items import pending_item
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.explorer.scheduler import Race
from tests.faults import ProcessDied, injected

pytestmark = pytest.mark.integration

SEATS = "seats"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Org:
    """An organization of ``limit`` seats whose two members each may hold up to 10."""

    settings: Settings
    clients: Clients
    stream: StreamReader
    clock: Clock
    limit: int

    def __post_init__(self) -> None:
        self.service = self.new_service()
        self.counter = EventualCounter(
            self.settings.table_name, "batched", self.clients, sleep=lambda _: None, clock=self.clock
        )
        self.org_id, plan = f"org-{uuid.uuid4().hex[:8]}", f"plan-{uuid.uuid4().hex[:8]}"
        self.a, self.b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
        self.service.put_plan(plan, {SEATS: self.limit})
        self.service.put_org(self.org_id, plan)
        for account in (self.a, self.b):
            self.service.set_limit(account, 10, kind=SEATS)
            self.service.add_member(self.org_id, account)

    def new_service(self) -> ResourceService:
        effects = Effects(clock=self.clock, waiter=Waiter(attempts=3, delay=0.01))
        return ResourceService(self.settings, self.clients, effects=effects)

    def drain(self) -> None:
        for pk in (account_pk(self.a), account_pk(self.b), org_pk(self.org_id)):
            while records := self.stream.records_of(pk):
                assert process_stream_batch(records, self.counter).failed_sequence_numbers == []

    def sweep_after_the_grace_period(self) -> None:
        self.clock.now += self.settings.pending_grace_seconds + 1
        grace = self.settings.pending_grace_seconds
        Sweeper(self.settings.table_name, self.counter, grace, self.clients, clock=self.clock).sweep()
        self.drain()

    def org_counters(self) -> tuple[int, int]:
        state = self.service.org_counters(self.org_id).get(SEATS)
        return (0, 0) if state is None else (state.best_effort, state.eventual)

    def held(self, account: str) -> list[tuple[str, int]]:
        """The account's resource items, (state, units)."""
        found = self.clients.dynamodb.query(
            TableName=self.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": RESOURCE_PREFIX}},
            ConsistentRead=True,
        )["Items"]
        return sorted((i["state"]["S"], int(i["units"]["N"])) for i in found)

    def exact(self) -> None:
        """Both levels hold what is live, exactly: each account, and the organization the sum."""
        self.drain()
        live = {a: sum(units for state, units in self.held(a) if state == "live") for a in (self.a, self.b)}
        for account, units in live.items():
            usage = self.service.usage(account).kinds[SEATS]
            assert (usage.best_effort, usage.eventual) == (units, units), account
        assert self.org_counters() == (sum(live.values()), sum(live.values()))


@pytest.fixture
def org(settings: Settings, clients: Clients, stream: StreamReader) -> Org:
    return Org(settings, clients, stream, Clock(), limit=2)


def test_two_accounts_racing_for_the_organizations_last_slot(org: Org) -> None:
    # Given one slot left in the organization (a holds one of two)
    org.service.create(org.a, "first", {}, kind=SEATS)
    a, b = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        first = race.start("a", lambda: a.create(org.a, "x", {}, kind=SEATS))
        second = race.start("b", lambda: b.create(org.b, "y", {}, kind=SEATS))
        # When both pass their checks and put their items, then b's admissions land first
        race.until(first, "PutItem")
        race.until(second, "PutItem")
        race.finish(second)
        race.finish(first)
    # Then b has the slot, a is refused by the organization, and nothing is left of a's try
    assert second.error is None
    assert isinstance(first.error, LimitExceeded)
    assert first.error.scope == "organization"
    assert org.held(org.a) == [("live", 1)]
    org.exact()


def test_a_create_that_dies_between_the_two_levels_gives_the_organizations_slot_back(org: Org) -> None:
    # Given a create of a whose process dies after the organization's admission, before its
    # account's (the single-attempt client's second UpdateItem)
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.create(org.a, "x", {}, kind=SEATS)
    # Then it is invisible, holds no slot of a's, and one of the organization's (counted there)
    org.drain()
    assert org.held(org.a) == [("pending", 1)]
    assert org.org_counters() == (1, 1)
    # When the sweeper runs past the grace period, it gives the slot back and removes the item
    org.sweep_after_the_grace_period()
    assert org.held(org.a) == []
    org.exact()
    org.service.create(org.b, "y", {}, kind=SEATS)
    org.service.create(org.b, "z", {}, kind=SEATS)
    org.exact()


def test_a_create_its_account_refuses_is_undone_at_the_organization(org: Org) -> None:
    # Given a at its own limit of 1 but for one create that passed its check before another
    # create took the account's last slot
    org.service.set_limit(org.a, 1, kind=SEATS)
    slow, fast = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        late = race.start("late", lambda: slow.create(org.a, "late", {}, kind=SEATS))
        race.until(late, "PutItem")
        race.run("early", lambda: fast.create(org.a, "early", {}, kind=SEATS))
        race.finish(late)
    # Then the late one is refused by its account, and the organization's admission undone
    assert isinstance(late.error, LimitExceeded)
    assert late.error.scope == "account"
    assert org.held(org.a) == [("live", 1)]
    org.exact()


def test_an_undo_whose_release_is_throttled_is_finished_by_the_sweeper_once(org: Org) -> None:
    # Given a at its own limit of 1 but for a create that passed its check before another took
    # the account's last slot, whose undo at the organization is then throttled on every
    # attempt (its single-attempt writes after its account's refusal; its organization's
    # admission is already waiting at the scheduler when the fault is set, after the kind's
    # opening of the organization's counter item, a transaction)
    org.service.set_limit(org.a, 1, kind=SEATS)
    slow, fast = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        late = race.start("late", lambda: slow.create(org.a, "late", {}, kind=SEATS))
        race.until(late, "TransactWriteItems")
        race.run("early", lambda: fast.create(org.a, "early", {}, kind=SEATS))
        with injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=100, skip=1
        ):
            race.finish(late)
    assert isinstance(late.error, LimitExceeded)
    # Then the item is left pending, marked and indexed; the organization's best_effort still
    # holds its slot (its eventual never counts an item being undone)
    org.drain()
    assert ("pending", 1) in org.held(org.a)
    assert org.org_counters() == (2, 1)
    # And the sweeper, after the grace period, releases it there once and removes it
    org.sweep_after_the_grace_period()
    org.sweep_after_the_grace_period()
    assert org.held(org.a) == [("live", 1)]
    org.exact()


def test_a_lost_response_at_each_level_counts_once(org: Org) -> None:
    # When the organization's admission applies and its response is lost (the first
    # single-attempt UpdateItem), then the account's (the second)
    with injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="after"):
        org.service.create(org.a, "x", {}, kind=SEATS)
    with injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="after", skip=1):
        org.service.create(org.b, "y", {}, kind=SEATS)
    # Then each is one create, counted once at each level, and the organization is full
    org.exact()
    with pytest.raises(LimitExceeded):
        org.service.create(org.a, "z", {}, kind=SEATS)
    # And a delete whose release at its account, or at its organization, loses its response
    # releases once at each level
    for lost_at in (0, 1):
        resource = org.service.list(org.a if lost_at == 0 else org.b, kind=SEATS).items[0]
        with injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="after", skip=lost_at):
            org.service.delete(resource.account_id, resource.resource_id, kind=SEATS)
        org.exact()
        org.service.create(org.b, f"z{lost_at}", {}, kind=SEATS)
        org.exact()


def test_a_delete_whose_release_at_its_account_is_throttled_changes_nothing(org: Org) -> None:
    # Given a member's resource, counted at both levels
    resource, _ = org.service.create(org.a, "x", {}, kind=SEATS)
    org.drain()
    # When its delete's first release (its account's) is throttled on every attempt: 429
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=100),
        pytest.raises(Throttled),
    ):
        org.service.delete(org.a, resource.resource_id, kind=SEATS)
    # Then nothing was released anywhere: it is live again, and a retried delete frees both levels
    assert org.held(org.a) == [("live", 1)]
    org.exact()
    assert org.org_counters() == (1, 1)
    org.service.delete(org.a, resource.resource_id, kind=SEATS)
    org.exact()
    assert org.org_counters() == (0, 0)


def _create_after_a_deletes_writes(org: Org, updates: int) -> tuple[Any, Any]:
    """The organization full (a holds x, b holds y); a's delete of x runs until it has made
    ``updates`` UpdateItems, then b's create runs whole, then the delete ends: (create, delete)."""
    held, _ = org.service.create(org.a, "x", {}, kind=SEATS)
    org.service.create(org.b, "y", {}, kind=SEATS)
    deleter, creator = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        delete = race.start("delete", lambda: deleter.delete(org.a, held.resource_id, kind=SEATS))
        race.until(delete, "UpdateItem", count=updates)
        create = race.run("create", lambda: creator.create(org.b, "z", {}, kind=SEATS))
        race.finish(delete)
    return create, delete


def test_a_release_racing_an_admission_at_the_last_slot(org: Org) -> None:
    # When the delete has released at both levels (its claim, its account's release, its
    # organization's) and not yet removed x, a create of the other account comes
    create, delete = _create_after_a_deletes_writes(org, 3)
    # Then the create took the freed slot at once, and both levels are exact
    assert create.error is None
    assert delete.error is None
    org.exact()


def test_an_admission_between_a_releases_two_levels_is_refused_by_the_organization(org: Org) -> None:
    # When the delete has released at its account only (design.md §10.4), a create of the other
    # account comes
    create, delete = _create_after_a_deletes_writes(org, 2)
    # Then the organization still held x's slot: refused there (the order: create, then delete)
    assert isinstance(create.error, LimitExceeded)
    assert create.error.scope == "organization"
    assert delete.error is None
    org.exact()
    assert org.org_counters() == (1, 1)


def _full_with_x(org: Org) -> str:
    """The organization full: a holds x, b holds y, both counted at both levels."""
    held, _ = org.service.create(org.a, "x", {}, kind=SEATS)
    org.service.create(org.b, "y", {}, kind=SEATS)
    org.drain()
    return held.resource_id


def _records_of_a(org: Org) -> list[dict]:
    found: list[dict] = []
    while batch := org.stream.records_of(account_pk(org.a)):
        found += batch
    return found


def _org_release_throttled(org: Org) -> Any:
    """Every attempt of a delete's second single-attempt write (its organization's release, after
    its account's) throttled."""
    return injected(
        org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=100, skip=1
    )


def _delete_with_its_org_release_throttled(org: Org, resource_id: str) -> None:
    """a's delete of ``resource_id``, handed off to the stream path: answered 503 (in progress)."""
    with _org_release_throttled(org), pytest.raises(InProgress):
        org.service.delete(org.a, resource_id, kind=SEATS)


def test_a_delete_whose_organizations_release_is_throttled_is_finished_by_the_stream_path_once(
    org: Org,
) -> None:
    # Given the organization full; a's delete of x releases at its account, then its
    # organization's release is throttled on every attempt
    x = _full_with_x(org)
    _delete_with_its_org_release_throttled(org, x)
    # Then the delete was handed off: x is released at its account (a holds nothing there), and
    # the organization still holds its slot: b is refused there
    assert org.held(org.a) == [("deleting", 1)]
    assert org.service.usage(org.a).kinds[SEATS].best_effort == 0
    with pytest.raises(LimitExceeded) as refused:
        org.service.create(org.b, "z", {}, kind=SEATS)
    assert refused.value.scope == "organization"
    # When the stream path sees the hand-off (its records delivered twice)
    records = _records_of_a(org)
    first = process_stream_batch(records, org.counter)
    again = process_stream_batch(records, org.counter)
    # Then it released x at the organization and removed it, once
    assert first.failed_sequence_numbers == again.failed_sequence_numbers == []
    assert (first.report.finished_deletes, again.report.finished_deletes) == (1, 0)
    assert org.held(org.a) == []
    org.exact()
    assert org.org_counters() == (1, 1)
    # And b may take the slot; a retried delete finds nothing
    org.service.create(org.b, "z", {}, kind=SEATS)
    with pytest.raises(NotFound):
        org.service.delete(org.a, x, kind=SEATS)
    org.exact()
    assert org.org_counters() == (2, 2)


def test_a_handed_off_delete_finished_within_the_wait_answers_204(org: Org) -> None:
    # Given the organization full, and a's delete of x whose organization's release is
    # throttled, with the stream delivered while the delete waits
    x = _full_with_x(org)
    waiting = ResourceService(
        org.settings,
        org.clients,
        effects=Effects(clock=org.clock, waiter=Waiter(attempts=3, delay=0.0, sleep=lambda _: org.drain())),
    )
    with _org_release_throttled(org):
        # When it deletes: then it answers as done (no error)
        waiting.delete(org.a, x, kind=SEATS)
    assert org.held(org.a) == []
    org.exact()
    assert org.org_counters() == (1, 1)


def test_a_handed_off_delete_taken_over_first_is_released_once(org: Org) -> None:
    # Given a's delete of x handed off, the stream stopped
    x = _full_with_x(org)
    _delete_with_its_org_release_throttled(org, x)
    records = _records_of_a(org)
    # When a retried delete takes the claim over after the grace period and finishes it, and only
    # then the stream path sees the hand-off
    org.clock.now += org.settings.pending_grace_seconds + 1
    org.service.delete(org.a, x, kind=SEATS)
    assert org.held(org.a) == []
    late = process_stream_batch(records, org.counter)
    # Then the stream path does not release it again: each level holds only y, counted so
    assert late.failed_sequence_numbers == []
    assert late.report.finished_deletes == 0
    org.exact()
    assert org.service.usage(org.a).kinds[SEATS].best_effort == 0
    assert org.org_counters() == (1, 1)


def _full_with_x_deleted_up_to_its_organizations_release(org: Org) -> str:
    """The organization full, and a's delete of x dead after its account's release, before its
    organization's (the second single-attempt write)."""
    x = _full_with_x(org)
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
        pytest.raises(ProcessDied),
    ):
        org.service.delete(org.a, x, kind=SEATS)
    return x


def test_a_delete_that_dies_between_the_levels_is_finished_by_the_sweeper(org: Org) -> None:
    # Given the organization full; a's delete of x releases at its account, then its process
    # dies at its organization's release (review D2: design.md §10.4)
    x = _full_with_x_deleted_up_to_its_organizations_release(org)
    # Then the stream path notes the account's release: x is no longer visible, and the claim is
    # indexed; the organization still holds its slot (refusing b: conservative, never over)
    org.drain()
    assert org.held(org.a) == [("deleting", 1)]
    with pytest.raises(NotFound):
        org.service.get(org.a, x, kind=SEATS)
    assert org.service.list(org.a, kind=SEATS).items == []
    with pytest.raises(LimitExceeded):
        org.service.create(org.b, "z", {}, kind=SEATS)
    # And a sweep within the grace period leaves it (its request may be alive)
    grace = org.settings.pending_grace_seconds
    Sweeper(org.settings.table_name, org.counter, grace, org.clients, clock=org.clock).sweep()
    assert org.held(org.a) == [("deleting", 1)]
    # When the sweeper runs past the grace period, with nobody retrying the delete
    org.sweep_after_the_grace_period()
    # Then it is finished: released at the organization only, once
    assert org.held(org.a) == []
    org.exact()
    assert org.org_counters() == (1, 1)


def test_a_delete_that_dies_after_both_releases_is_removed_by_the_stream_path(org: Org) -> None:
    # Given the organization full; a's delete of x releases at its account and at its
    # organization, then its process dies before it removes x
    x = _full_with_x(org)
    with injected(org.clients.dynamodb, "DeleteItem", when="crash"), pytest.raises(ProcessDied):
        org.service.delete(org.a, x, kind=SEATS)
    # When the stream path sees both releases (no sweep, no retry)
    org.drain()
    # Then it removed x: the delete is done within the stream's lag, each level released once
    assert org.held(org.a) == []
    org.exact()
    assert org.org_counters() == (1, 1)
    org.service.create(org.b, "z", {}, kind=SEATS)


def test_a_put_of_the_id_of_a_delete_stopped_between_the_levels_waits_for_its_organizations_release(
    org: Org,
) -> None:
    # Given the organization full; a's delete of x dies after its account's release, before its
    # organization's
    x = _full_with_x_deleted_up_to_its_organizations_release(org)
    org.drain()
    # When a PUT of the same id comes before the delete is finished: in progress (503), and the
    # organization still holds the old x's slot
    with pytest.raises(InProgress):
        org.service.create(org.a, "x", {}, x, kind=SEATS)
    assert org.org_counters() == (2, 2)
    # Then once the sweeper has finished the delete past the grace period, the PUT creates x again
    org.sweep_after_the_grace_period()
    assert org.org_counters() == (1, 1)
    org.service.create(org.a, "x", {}, x, kind=SEATS)
    org.exact()
    assert org.org_counters() == (2, 2)


def test_a_delete_that_dies_after_both_releases_taken_over_before_the_stream_releases_nothing_again(
    org: Org,
) -> None:
    # Given the organization full; a's delete of x releases at both levels and dies before it
    # removes x, and the stream path sees none of it before the grace period has passed
    x = _full_with_x(org)
    with injected(org.clients.dynamodb, "DeleteItem", when="crash"), pytest.raises(ProcessDied):
        org.service.delete(org.a, x, kind=SEATS)
    records = _records_of_a(org)
    # When a retried delete takes the claim over after the grace period
    org.clock.now += org.settings.pending_grace_seconds + 1
    with pytest.raises(NotFound):
        org.service.delete(org.a, x, kind=SEATS)
    # Then it released nothing again (each level's last_release names x's): it only removed x
    assert org.held(org.a) == []
    assert process_stream_batch(records, org.counter).failed_sequence_numbers == []
    org.exact()
    assert org.org_counters() == (1, 1)


def _deliver(org: Org, pk: str) -> None:
    while records := org.stream.records_of(pk):
        assert process_stream_batch(records, org.counter).failed_sequence_numbers == []


@pytest.mark.parametrize("o3", ["applied", "never sent"])
def test_a_delete_dead_after_its_accounts_release_is_finished_by_a_census_when_its_organizations_is_unknown(
    settings: Settings, clients: Clients, stream: StreamReader, o3: str
) -> None:
    # Given an organization of 3: a holds x, b holds y and w
    org = Org(settings, clients, stream, Clock(), limit=3)
    x, _ = org.service.create(org.a, "x", {}, kind=SEATS)
    org.service.create(org.b, "y", {}, kind=SEATS)
    w, _ = org.service.create(org.b, "w", {}, kind=SEATS)
    org.drain()
    # When a's delete of x releases at its account and dies: after its organization's release
    # (before it removes x), or before it
    crash = (
        injected(org.clients.dynamodb, "DeleteItem", when="crash")
        if o3 == "applied"
        else injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1)
    )
    with crash, pytest.raises(ProcessDied):
        org.service.delete(org.a, x.resource_id, kind=SEATS)
    # and b's delete of w makes the shard's last_release name w; the accounts' records are
    # delivered, the organization's are late (a batch in the retry queue past the grace period)
    org.service.delete(org.b, w.resource_id, kind=SEATS)
    _deliver(org, account_pk(org.a))
    _deliver(org, account_pk(org.b))
    # and the sweeper runs past the grace period, a retried DELETE first (answered 503: nothing
    # here can tell whether the organization's release applied)
    org.clock.now += settings.pending_grace_seconds + 1
    with pytest.raises(InProgress):
        org.service.delete(org.a, x.resource_id, kind=SEATS)
    org.clock.now += settings.pending_grace_seconds + 1
    Sweeper(
        settings.table_name, org.counter, settings.pending_grace_seconds, clients, clock=org.clock
    ).sweep()
    # Then the census of x's range finished it: released at the organization only if it held x
    assert org.held(org.a) == []
    _deliver(org, org_pk(org.org_id))
    org.exact()
    assert org.org_counters() == (1, 1)
    # And the organization admits exactly up to its limit again
    for n in range(2):
        org.service.create(org.b, f"z{n}", {}, kind=SEATS)
    with pytest.raises(LimitExceeded):
        org.service.create(org.b, "z2", {}, kind=SEATS)


def _x_dead_then_v_deleted(settings: Settings, clients: Clients, stream: StreamReader, crash: Any) -> Org:
    """An organization of 4: a holds x, v and u, b holds y; a's delete of x dies at ``crash``,
    then a's delete of v overwrites both levels' last_release, every record late (a batch in the
    retry queue past the grace period). Returns the organization."""
    org = Org(settings, clients, stream, Clock(), limit=4)
    for rid in ("x", "v", "u"):
        org.service.create(org.a, rid, {}, resource_id=rid, kind=SEATS)
    org.service.create(org.b, "y", {}, kind=SEATS)
    org.drain()
    with crash(org), pytest.raises(ProcessDied):
        org.service.delete(org.a, "x", kind=SEATS)
    org.service.delete(org.a, "v", kind=SEATS)
    return org


@pytest.mark.parametrize("d2", ["applied", "never sent"])
def test_a_member_delete_whose_accounts_release_nothing_can_confirm_is_released_once_at_each_level(
    settings: Settings, clients: Clients, stream: StreamReader, d2: str
) -> None:
    # Given an organization of 4: a holds x, v and u, b holds y
    # When a's delete of x dies after its claim: after its account's release, or before it;
    # and a's delete of v overwrites both levels' last_release, every record late (a batch in
    # the retry queue past the grace period)
    org = _x_dead_then_v_deleted(
        settings,
        clients,
        stream,
        lambda org: injected(
            org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1 if d2 == "applied" else 0
        ),
    )
    # and the client retries the delete of x past the grace period: its account's level is
    # settled by the census of x's range (no second release), its organization's is left to
    # that organization's census (503)
    org.clock.now += settings.pending_grace_seconds + 1
    with pytest.raises(InProgress):
        org.service.delete(org.a, "x", kind=SEATS)
    with pytest.raises(NotFound):
        org.service.get(org.a, "x", kind=SEATS)  # released at its account: hidden
    usage = org.service.usage(org.a).kinds[SEATS]
    assert (usage.best_effort, usage.eventual) == (1, 1)  # u's: x released there once
    org.sweep_after_the_grace_period()
    # Then x is gone, released exactly once at each level, whatever the late records say
    assert org.held(org.a) == [("live", 1)]
    org.exact()
    assert org.org_counters() == (2, 2)
    # And the organization admits exactly up to its limit again
    for n in range(2):
        org.service.create(org.a, f"z{n}", {}, kind=SEATS)
    with pytest.raises(LimitExceeded):
        org.service.create(org.b, "z2", {}, kind=SEATS)


def test_a_members_takeover_whose_claims_response_is_lost_releases_nothing_twice_at_either_level(
    settings: Settings, clients: Clients, stream: StreamReader
) -> None:
    # Given an organization of 4: a holds x, v and u, b holds y; a's delete of x dies after both
    # its releases, before it removes x; then a's delete of v overwrites both levels'
    # last_release, every record late
    org = _x_dead_then_v_deleted(
        settings, clients, stream, lambda org: injected(org.clients.dynamodb, "DeleteItem", when="crash")
    )
    assert org.service.usage(org.a).kinds[SEATS].best_effort == 1  # u
    assert org.org_counters()[0] == 2  # u, y
    # When the client retries the delete of x past the grace period and the response to its
    # takeover of the claim is lost (applied; botocore resends it)
    org.clock.now += settings.pending_grace_seconds + 1
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        retry = race.start("DELETE x", lambda: org.service.delete(org.a, "x", kind=SEATS))
        race.until(retry, "UpdateItem")  # its plain claim, refused (x claimed, stale)
        assert race.next_call(retry) == "UpdateItem"  # the takeover
        race.step(retry, fault="lost")
        race.finish(retry)
    # Then nothing was released a second time, at either level (review of the census)
    assert (org.service.usage(org.a).kinds[SEATS].best_effort, org.org_counters()[0]) == (1, 2)
    # And once the sweeper has finished it, both levels are exact
    org.sweep_after_the_grace_period()
    assert org.held(org.a) == [("live", 1)]
    org.exact()


def test_a_retried_delete_that_finds_its_claim_settled_at_its_account_only_answers_503_not_404(
    settings: Settings, clients: Clients, stream: StreamReader
) -> None:
    # Given an organization of 4: a holds x, v and u, b holds y; a's delete of x dies after its
    # account's release, before its organization's; a's delete of v overwrites last_release
    org = _x_dead_then_v_deleted(
        settings,
        clients,
        stream,
        lambda org: injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", skip=1),
    )
    # And a create running in x's range (its pending item, young): the range cannot stand still
    busy = next(f"p{n}" for n in range(1_000) if range_of(f"p{n}") == range_of("x"))
    org.service._table.put_pending(pending_item(org.a, busy, "running", {}, "i", now=org.clock(), kind=SEATS))
    # When the client retries the delete of x past the grace period: its takeover leaves x's
    # account level to the census of x's range, which is busy (503)
    org.clock.now += settings.pending_grace_seconds + 1
    with pytest.raises(InProgress):
        org.service.delete(org.a, "x", kind=SEATS)
    # and that create ends without an admission (its item removed), then the client retries
    # again: the census settles x at its account (no second release there)
    org.clients.dynamodb.delete_item(TableName=settings.table_name, Key=resource_key(org.a, busy, kind=SEATS))
    # Then that retry answers 503, not 404: x's organization still holds its slot (its release
    # is owed to that organization's census), and a 404 would leave a refusal by the
    # organization that no order of the answers explains (before: 404)
    with pytest.raises(InProgress):
        org.service.delete(org.a, "x", kind=SEATS)
    assert org.service.usage(org.a).kinds[SEATS].best_effort == 1  # u's: x released there once
    with pytest.raises(InProgress):  # a PUT of x waits for the organization's census too
        org.service.create(org.a, "x", {}, resource_id="x", kind=SEATS)
    org.service.create(org.b, "z0", {}, kind=SEATS)
    with pytest.raises(LimitExceeded) as refused:
        org.service.create(org.b, "z1", {}, kind=SEATS)  # x, u, y, z0: explained, x not deleted yet
    assert refused.value.scope == "organization"
    # And once the sweeper has finished x at its organization, a retry answers 404, and a PUT
    # of x creates it again in the slot x held there
    org.sweep_after_the_grace_period()
    with pytest.raises(NotFound):
        org.service.delete(org.a, "x", kind=SEATS)
    assert org.service.create(org.a, "x", {}, resource_id="x", kind=SEATS)[1]
    org.exact()
    with pytest.raises(LimitExceeded):
        org.service.create(org.b, "z1", {}, kind=SEATS)


def _claimed_and_released_at_the_org_the_old_way(org: Org, x: str) -> dict:
    """A claim as the code before 2026-11-26 made it (no ``account_first``), and its release at
    the organization, which that code made first."""
    claimed = org.service._table.claim(org.a, x, "old-request", kind=SEATS)
    assert claimed.applied
    assert claimed.item is not None
    item = claimed.item
    org.clients.dynamodb.update_item(
        TableName=org.settings.table_name,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="REMOVE account_first",
    )
    released = org.service.orgs.release(
        org.org_id, org.a, x, item["incarnation"]["S"], kind=SEATS, units=1, counted=True, shard=0
    )
    assert released.applied
    return item


@pytest.mark.parametrize("then", ["dies", "hands off the old way"])
def test_a_claim_of_the_old_order_is_finished_at_its_account_by_the_new_code(org: Org, then: str) -> None:
    # Given a delete of the old order (a deploy in between): released at the organization, then
    # its request dies, or hands its account's release off as that code did
    x = _full_with_x(org)
    item = _claimed_and_released_at_the_org_the_old_way(org, x)
    if then != "dies":
        org.clients.dynamodb.update_item(
            TableName=org.settings.table_name,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET handoff = :req, org_released = :true",
            ExpressionAttributeValues={":req": {"S": "old-request"}, ":true": {"BOOL": True}},
        )
    # When the new stream path sees it (the old hand-off is not its to make), and the sweeper runs
    # past the grace period
    org.drain()
    assert org.held(org.a) == [("deleting", 1)]
    org.sweep_after_the_grace_period()
    # Then it is released at its account, once, and at its organization no more
    assert org.held(org.a) == []
    org.exact()
    assert org.org_counters() == (1, 1)


def test_a_hand_off_whose_response_is_lost_after_the_stream_path_finished_answers_204(org: Org) -> None:
    # Given the organization full; a's delete of x, its organization's release throttled on every
    # attempt, hands off; that write applies and its response is lost, and before botocore's
    # retry the stream path finishes the delete
    x = _full_with_x(org)
    seen: list[str] = []

    def the_hand_off(body: dict) -> bool:
        if "org_handoff" not in body.get("UpdateExpression", ""):
            return False
        seen.append("hand-off")
        if len(seen) == 2:
            org.drain()  # the retry is about to go: the stream path finishes the delete first
        return len(seen) == 1

    with (
        _org_release_throttled(org),
        injected(org.clients.dynamodb, "UpdateItem", when="after", where=the_hand_off),
    ):
        # When the retried hand-off is refused (the item is gone): then the delete answers done
        org.service.delete(org.a, x, kind=SEATS)
    assert seen == ["hand-off", "hand-off"]
    assert org.held(org.a) == []
    org.exact()
    assert org.org_counters() == (1, 1)
