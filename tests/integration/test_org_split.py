"""An organization's counter split over S shard items with allowances (issue 24, design.md §10):
exact at every S, under concurrency, lost allowance, dead rebases and limit changes; against
DynamoDB Local, every component on one clock."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from hybrid_counter.aws import Clients, RetryPolicy
from hybrid_counter.counters.split import ShardSet, shard_of_resource
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import LimitExceeded, StoreUnavailable, Throttled
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, org_pk, org_rebase_key
from hybrid_counter.orgs.counters import org_counters
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.explorer.scheduler import Operation, Race
from tests.faults import ProcessDied, injected

pytestmark = pytest.mark.integration

SEATS = "seats"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class SplitOrg:
    """An organization of ``limit`` seats split over ``shards`` items, with ``members`` accounts
    that may each hold up to 100."""

    settings: Settings
    clients: Clients
    stream: StreamReader
    clock: Clock
    limit: int
    shards: int
    members: int = 4

    def __post_init__(self) -> None:
        self.service = self.new_service()
        self.counter = EventualCounter(
            self.settings.table_name, "batched", self.clients, sleep=lambda _: None, clock=self.clock
        )
        self.org_id, self.plan = f"org-{uuid.uuid4().hex[:8]}", f"plan-{uuid.uuid4().hex[:8]}"
        self.accounts = [f"m{n}-{uuid.uuid4().hex[:8]}" for n in range(self.members)]
        self.service.put_plan(self.plan, {SEATS: self.limit})
        self.service.put_org(self.org_id, self.plan, shards=self.shards)
        for account in self.accounts:
            self.service.set_limit(account, 100, kind=SEATS)
            self.service.add_member(self.org_id, account)

    def new_service(self) -> ResourceService:
        effects = Effects(clock=self.clock, waiter=Waiter(attempts=3, delay=0.01))
        return ResourceService(self.settings, self.clients, effects=effects)

    def picture(self) -> ShardSet:
        return org_counters(self.clients, self.settings.table_name, self.org_id).get(SEATS) or ShardSet()

    def drain(self) -> None:
        for pk in [account_pk(a) for a in self.accounts] + [org_pk(self.org_id)]:
            while records := self.stream.records_of(pk):
                assert process_stream_batch(records, self.counter).failed_sequence_numbers == []

    def sweep_after_the_grace_period(self) -> Any:
        self.clock.now += self.settings.pending_grace_seconds + 1
        grace = self.settings.pending_grace_seconds
        outcome = Sweeper(
            self.settings.table_name, self.counter, grace, self.clients, clock=self.clock
        ).sweep()
        self.drain()
        return outcome

    def live(self) -> dict[str, int]:
        """Live (or claimed) resources of every member: id -> units."""
        return {key: units for key, (units, _) in self.live_on_shards().items()}

    def live_on_shards(self) -> dict[str, tuple[int, int]]:
        """Live (or claimed) resources of every member: id -> (units, the shard that holds them)."""
        found: dict[str, tuple[int, int]] = {}
        for account in self.accounts:
            response = self.clients.dynamodb.query(
                TableName=self.settings.table_name,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={
                    ":pk": {"S": account_pk(account)},
                    ":prefix": {"S": RESOURCE_PREFIX},
                },
                ConsistentRead=True,
            )
            for item in response.get("Items", []):
                if item["state"]["S"] in ("live", "deleting"):
                    shard = int(item.get("org_shard", {}).get("N", "0"))
                    found[f"{account}/{item['resource_id']['S']}"] = (int(item["units"]["N"]), shard)
        return found

    def assert_exact(self, limit: int | None = None) -> None:
        """Claims within the basis; once drained, both summed counters equal the live units."""
        picture = self.picture()
        basis = picture.basis
        assert basis is not None
        assert basis.limit == (self.limit if limit is None else limit)
        assert picture.claims <= basis.limit, picture
        self.drain()
        picture = self.picture()
        live = self.live_on_shards()
        total = sum(units for units, _ in live.values())
        assert (picture.best_effort, picture.eventual) == (total, total)
        # and each shard counts what it admitted (its releases and counts went to it too)
        for number, shard in picture.shards.items():
            held = sum(units for units, n in live.values() if n == number)
            assert (shard.state.best_effort, shard.state.eventual) == (held, held), number


@pytest.fixture
def split_org(settings: Settings, clients: Clients, stream: StreamReader) -> Callable[..., SplitOrg]:
    def make(limit: int, shards: int, members: int = 4) -> SplitOrg:
        return SplitOrg(settings, clients, stream, Clock(), limit, shards, members)

    return make


def race(calls: list[Callable[[], Any]]) -> tuple[int, int, int]:
    """Run the calls at once; (admitted, refused, retryable)."""
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> None:
        start.wait()
        try:
            call()
            result = "admitted"
        except LimitExceeded as refused:
            result = "refused" if refused.scope == "organization" else f"refused by {refused.scope}"
        except (Throttled, StoreUnavailable):
            result = "retryable"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes.count("admitted"), outcomes.count("refused"), outcomes.count("retryable")


@pytest.mark.parametrize("shards", [2, 4, 16])
def test_concurrent_creates_of_many_accounts_admit_exactly_the_limit_at_every_shard_count(split_org, shards):
    # Given an organization of 12 seats split over S items, 4 member accounts of 100 each
    org = split_org(12, shards)
    # When 40 creates race (10 per account), each on a process of its own
    services = [org.new_service() for _ in range(40)]
    calls: list[Callable[[], Any]] = [
        partial(s.create, org.accounts[n % 4], "x", {}, kind=SEATS) for n, s in enumerate(services)
    ]
    admitted, refused, retryable = race(calls)
    # Then exactly the limit is admitted, whatever was refused or left to a retry
    assert admitted + refused + retryable == 40
    assert sum(org.live().values()) == admitted
    # And retries of the retryable ones fill the rest exactly, never past it
    for n in range(40):
        try:
            org.service.create(org.accounts[n % 4], "retry", {}, kind=SEATS)
        except LimitExceeded:
            break
    assert sum(org.live().values()) == 12
    # And the shards' claims stay within the limit, and their counters count every unit once
    org.assert_exact()
    assert set(org.picture().shards) == set(range(shards))


def test_creates_of_several_units_gather_fragmented_allowance_and_the_refusal_is_exact(split_org):
    # Given 10 seats over 4 shards
    org = split_org(10, 4)
    # When creates of 3 seats follow one another from every member
    for n in range(3):
        org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS, units=3)
    # Then the fourth is refused by the organization, with its numbers
    with pytest.raises(LimitExceeded) as refused:
        org.service.create(org.accounts[3], "r3", {}, kind=SEATS, units=3)
    assert (refused.value.scope, refused.value.limit, refused.value.used) == ("organization", 10, 9)
    # And one of 1 seat still fits, exactly
    org.service.create(org.accounts[0], "one", {}, kind=SEATS, units=1)
    with pytest.raises(LimitExceeded):
        org.service.create(org.accounts[1], "two", {}, kind=SEATS, units=1)
    org.assert_exact()


def test_a_release_on_one_shard_makes_room_for_a_create_on_another(split_org):
    # Given a full organization of 8 seats over 4 shards
    org = split_org(8, 4)
    made = [org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)[0] for n in range(8)]
    with pytest.raises(LimitExceeded):
        org.service.create(org.accounts[0], "full", {}, kind=SEATS)
    # When one resource is deleted
    victim = made[0]
    org.service.delete(victim.account_id, victim.resource_id, kind=SEATS)
    # Then a create is admitted again, whichever shard it goes to, and exactly one
    admitted = 0
    for n in range(6):
        try:
            org.service.create(org.accounts[(n + 1) % 4], f"again{n}", {}, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    assert admitted == 1
    org.assert_exact()


def test_a_delete_releases_on_the_shard_that_admitted_its_resource(split_org):
    # Given 8 seats over 4 shards and one resource admitted on each (ids that go to each shard),
    # counted by the stream path
    org = split_org(8, 4)
    ids = [f"r{n}" for n in range(200)]
    made = {}
    for shard in range(4):
        rid = next(i for i in ids if shard_of_resource(i, 4) == shard)
        made[shard], _ = org.service.create(org.accounts[shard], rid, {}, rid, kind=SEATS)
    org.drain()
    assert [org.picture().get(n).state.best_effort for n in range(4)] == [1, 1, 1, 1]
    # When the resource admitted on shard 3 is deleted
    gone = made[3]
    org.service.delete(gone.account_id, gone.resource_id, kind=SEATS)
    # Then shard 3 holds one fewer and every other shard what it held, at both counters
    org.drain()
    after = org.picture()
    assert [(after.get(n).state.best_effort, after.get(n).state.eventual) for n in range(4)] == [
        (1, 1),
        (1, 1),
        (1, 1),
        (0, 0),
    ]
    org.assert_exact()


def test_allowance_lost_by_a_move_that_died_is_returned_by_a_reconcile_never_created(split_org):
    # Given 6 seats over 4 shards, 5 held
    org = split_org(6, 4)
    for n in range(5):
        org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)
    before = org.picture()
    assert sum(max(0, shard.room) for shard in before.shards.values()) == 1
    # When a create whose shard has no room left (an id that goes to one) dies between the two
    # writes of a move (the donor's allowance taken, the receiver's not credited)
    rid = next(f"dies{n}" for n in range(100) if before.get(shard_of_resource(f"dies{n}", 4)).room < 1)
    credit = {"where": lambda body: "ADD #allowance" in body.get("UpdateExpression", "")}
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", **credit) as fault,
        pytest.raises(ProcessDied),
    ):
        org.new_service().create(org.accounts[0], "dies", {}, rid, kind=SEATS)
    assert fault.fired == 1
    # Then the allowance is short of the limit (lost), never over it
    lost = org.picture()
    assert lost.claims < 6
    # And the last seat is still admitted (a reconcile hands the lost allowance out), and no more
    org.service.create(org.accounts[1], "last", {}, kind=SEATS)
    with pytest.raises(LimitExceeded):
        org.service.create(org.accounts[2], "over", {}, kind=SEATS)
    # And the dead create's pending item is rolled back by the sweeper (it was never admitted)
    org.sweep_after_the_grace_period()
    assert sum(org.live().values()) == 6
    org.assert_exact()


def crediting(op: Operation) -> bool:
    """``op`` is waiting at the second write of a move: the receiver's allowance credited."""
    return op.pending is not None and "ADD #allowance" in op.pending.body.get("UpdateExpression", "")


def test_a_moves_credit_held_back_past_a_rebase_never_lands_on_the_allowances_it_laid_out(split_org):
    # Given 10 seats over 4 shards, 4 held on one shard (ids that go to it: its first create laid
    # all 10 out there, the other shards have none)
    org = split_org(10, 4)
    ids = [f"r{n}" for n in range(200)]
    full = shard_of_resource(ids[0], 4)
    for n, held in enumerate([i for i in ids if shard_of_resource(i, 4) == full][:4]):
        org.service.create(org.accounts[n % 4], held, {}, held, kind=SEATS)
    assert org.picture().get(full).allowance == 10
    # And a create on another shard: it has no room, so it moves allowance there first
    rid = next(i for i in ids if shard_of_resource(i, 4) != full)
    mover = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        create = race.start("create", lambda: mover.create(org.accounts[0], "moves", {}, rid, kind=SEATS))
        # When its move's debit has applied (the donor's allowance taken) and its credit waits
        while not crediting(create):
            assert not create.done, "the create never moved allowance"
            race.step(create)
        # And meanwhile an operator lowers the limit to 9: a rebase freezes every shard, lays the
        # allowances out from what they hold (the debited k is in none of them) and applies them
        org.new_service().set_org_limit(org.org_id, SEATS, 9)
        laid_out = org.picture()
        assert not laid_out.frozen
        assert laid_out.claims == 9
        # When the credit goes, then the create goes on
        race.finish(create)
    # Then the credit was refused (the shards are at a later epoch): the claims are still the
    # new limit, not k more, and the create was admitted within them
    assert org.picture().claims <= 9
    assert create.error is None
    # And exactly 9 are ever held
    for n in range(8):
        try:
            org.service.create(org.accounts[n % 4], f"more{n}", {}, kind=SEATS)
        except LimitExceeded:
            break
    assert sum(org.live().values()) == 9
    org.assert_exact(9)


def test_a_rebase_whose_process_died_is_finished_by_the_next_create(split_org):
    # Given 10 seats over 4 shards, 4 held
    org = split_org(10, 4)
    for n in range(4):
        org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)
    # When an operator lowers the organization's limit to 7 and its process dies after freezing
    # the shards, before laying the allowances out
    apply = {"where": lambda body: "REMOVE #rebasing" in body.get("UpdateExpression", "")}
    with injected(org.clients.dynamodb, "UpdateItem", when="crash", **apply), pytest.raises(ProcessDied):
        org.new_service().set_org_limit(org.org_id, SEATS, 7)
    frozen = org.picture()
    assert frozen.frozen
    # Then the next create finishes the rebase, for the new limit, and is admitted
    org.new_service().create(org.accounts[0], "next", {}, kind=SEATS)
    # And exactly 7 are ever held
    for n in range(5):
        try:
            org.service.create(org.accounts[n % 4], f"more{n}", {}, kind=SEATS)
        except LimitExceeded:
            break
    assert sum(org.live().values()) == 7
    assert (
        org.clients.dynamodb.get_item(
            TableName=org.settings.table_name, Key=org_rebase_key(org.org_id, SEATS)
        ).get("Item")
        is None
    )
    org.assert_exact(7)


def test_the_sweeper_finishes_a_rebase_nobody_creates_after(split_org):
    org = split_org(10, 4)
    org.service.create(org.accounts[0], "r", {}, kind=SEATS)
    freeze_then_die = {"where": lambda body: "REMOVE #rebasing" in body.get("UpdateExpression", "")}
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", **freeze_then_die),
        pytest.raises(ProcessDied),
    ):
        org.new_service().set_org_limit(org.org_id, SEATS, 5)
    assert org.picture().frozen
    outcome = org.sweep_after_the_grace_period()
    assert outcome.rebases_finished == 1
    picture = org.picture()
    assert not picture.frozen
    assert picture.basis is not None
    assert picture.basis.limit == 5
    org.assert_exact(5)


def test_a_limit_lowered_below_use_admits_nothing_until_releases_bring_the_use_under_it(split_org):
    # Given 10 seats over 4 shards, all held
    org = split_org(10, 4)
    made = [org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)[0] for n in range(10)]
    # When the limit is lowered to 6, forced
    org.service.set_org_limit(org.org_id, SEATS, 6, force=True)
    # Then nothing is admitted while 6 or more are held, as one item would
    for keep in (10, 7, 6):
        while sum(org.live().values()) > keep:
            gone = made.pop()
            org.service.delete(gone.account_id, gone.resource_id, kind=SEATS)
        with pytest.raises(LimitExceeded) as refused:
            org.service.create(org.accounts[0], f"at{keep}", {}, kind=SEATS)
        assert (refused.value.limit, refused.value.used) == (6, keep)
    # And once 5 are held, exactly one more is admitted
    gone = made.pop()
    org.service.delete(gone.account_id, gone.resource_id, kind=SEATS)
    org.service.create(org.accounts[1], "fits", {}, kind=SEATS)
    with pytest.raises(LimitExceeded):
        org.service.create(org.accounts[2], "over", {}, kind=SEATS)
    org.assert_exact(6)


def test_an_organization_split_while_it_holds_resources_keeps_them_and_its_limit(split_org):
    # Given an organization of one counter item holding 6 of 10 seats
    org = split_org(10, 1)
    made = [org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)[0] for n in range(6)]
    assert not org.picture().split
    # When it is split over 4 items
    org.service.put_org(org.org_id, org.plan, shards=4)
    picture = org.picture()
    assert picture.split
    assert set(picture.shards) == {0, 1, 2, 3}
    assert picture.get(0).allowance >= 6
    assert picture.claims <= 10
    assert {shard for _, shard in org.live_on_shards().values()} == {0}
    # Then exactly 4 more are admitted, on any shard
    fresh = org.new_service()
    admitted = 0
    for n in range(8):
        try:
            fresh.create(org.accounts[n % 4], f"new{n}", {}, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    assert admitted == 4
    # And the old resources are released from the item that held them (shard 0)
    for old in made:
        org.service.delete(old.account_id, old.resource_id, kind=SEATS)
    org.assert_exact()


def test_a_plan_change_is_laid_out_by_the_first_create_that_sees_it_and_a_stale_process_never_undoes_it(
    split_org,
):
    # Given 10 seats over 4 shards, 6 held, and a process that has read the plan
    org = split_org(10, 4)
    stale = org.new_service()
    for n in range(6):
        stale.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)
    # When the plan is lowered to 8 and a fresh process creates
    org.service.put_plan(org.plan, {SEATS: 8})
    fresh = org.new_service()
    fresh.create(org.accounts[0], "fresh", {}, kind=SEATS)
    assert org.picture().basis.limit == 8
    # Then the stale process, whose cache still says 10, does not lay them out for 10 again
    admitted = 0
    for n in range(4):
        try:
            stale.create(org.accounts[n % 4], f"stale{n}", {}, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    assert admitted == 1
    assert sum(org.live().values()) == 8
    org.assert_exact(8)
    # And raising it to 12 lets exactly 4 more in
    org.service.put_plan(org.plan, {SEATS: 12})
    later = org.new_service()
    for n in range(6):
        try:
            later.create(org.accounts[n % 4], f"later{n}", {}, kind=SEATS)
        except LimitExceeded:
            break
    assert sum(org.live().values()) == 12
    org.assert_exact(12)


def test_deletes_and_creates_racing_on_a_split_counter_never_pass_its_limit(split_org):
    # Given 8 seats over 4 shards, full
    org = split_org(8, 4)
    made = [org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)[0] for n in range(8)]
    # When 4 deletes and 12 creates race
    services = [org.new_service() for _ in range(16)]
    calls: list[Callable[[], Any]] = [
        partial(services[n].delete, made[n].account_id, made[n].resource_id, kind=SEATS) for n in range(4)
    ]
    calls += [partial(services[4 + n].create, org.accounts[n % 4], "x", {}, kind=SEATS) for n in range(12)]
    race(calls)
    # Then never more than 8 are held, and the counters count what is held
    assert sum(org.live().values()) <= 8
    org.assert_exact()


def test_a_create_throttled_on_its_shard_is_admitted_on_another_and_counted_there(split_org):
    # Given 8 seats over 4 shards
    org = split_org(8, 4)
    rid = "hot"
    home = shard_of_resource(rid, 4)
    # When the admission on its own shard is throttled on every attempt (6: RetryPolicy's)
    with injected(org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=6):
        org.service.create(org.accounts[0], rid, {}, rid, kind=SEATS)
    # Then it was admitted on another shard, which its item names, and counted there: exact
    (units, shard) = org.live_on_shards()[f"{org.accounts[0]}/{rid}"]
    assert (units, shard != home) == (1, True)
    org.assert_exact()
    # And deleting it releases it there
    org.service.delete(org.accounts[0], rid, kind=SEATS)
    org.assert_exact()


def test_a_create_throttled_on_every_shard_is_a_429_and_holds_nothing(split_org):
    # Given 8 seats over 4 shards, every write on them throttled (retried without pauses)
    org = split_org(8, 4)
    effects = Effects(
        clock=org.clock, waiter=Waiter(attempts=3, delay=0.01), retry=RetryPolicy(sleep=lambda _: None)
    )
    service = ResourceService(org.settings, org.clients, effects=effects)
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", error="ThrottlingException", times=1000),
        pytest.raises(Throttled),
    ):
        service.create(org.accounts[0], "x", {}, "x", kind=SEATS)
    # Then nothing is held, at either level, and the limit is whole
    assert org.live() == {}
    org.assert_exact()
    for n in range(8):
        org.service.create(org.accounts[n % 4], f"r{n}", {}, kind=SEATS)
    with pytest.raises(LimitExceeded):
        org.service.create(org.accounts[0], "one-more", {}, kind=SEATS)
