"""Resizes whose request died, or could not revert its claim, are ended at the size their counters
hold (issue 23, items 1 to 3; design.md §4.4): never grown where the grow was not admitted, by
whoever finds them first (a later PATCH or DELETE, the audit, a recount, the sweeper), against
DynamoDB Local, with every component on one injected clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.recount import Recounter
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import InProgress, LimitExceeded, StoreUnavailable
from hybrid_counter.healing import Healer
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, counter_key, range_of, resource_key
from hybrid_counter.recount_requests import RecountRequests
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.explorer.pytest_glue import retries_without_backoff
from tests.explorer.scheduler import Call, Race
from tests.faults import ProcessDied, injected
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration

SEATS = "seats"


class Clock:
    """Behind the wall clock by an hour, so a stamp taken from the wall clock instead of this one
    would look an hour in the future to the sweeper (issue 23, item 5)."""

    def __init__(self) -> None:
        self.now = time.time() - 3600

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    settings: Settings
    clients: Clients
    stream: StreamReader
    clock: Clock

    def __post_init__(self) -> None:
        effects = Effects(clock=self.clock, waiter=Waiter(attempts=3, delay=0.01))
        self.service = ResourceService(self.settings, self.clients, effects=effects)
        self.counter = EventualCounter(
            self.settings.table_name, "batched", self.clients, sleep=lambda _: None, clock=self.clock
        )
        grace = self.settings.pending_grace_seconds
        self.sweeper = Sweeper(self.settings.table_name, self.counter, grace, self.clients, clock=self.clock)
        self.recounter = Recounter(
            self.settings.table_name,
            self.service.counters,
            self.counter,
            Healer(self.settings.table_name, self.clients),
            self.clients,
            service=self.service,
            grace_seconds=grace,
            clock=self.clock,
            sleep=lambda _: None,
        )

    def drain(self, account: str) -> None:
        while records := self.stream.records_for(account):
            outcome = process_stream_batch(records, self.counter)
            assert outcome.failed_sequence_numbers == [], outcome.error

    def pass_the_grace_period(self) -> None:
        self.clock.now += self.settings.pending_grace_seconds + 1

    def item(self, account: str, rid: str) -> dict[str, Any] | None:
        return self.clients.dynamodb.get_item(
            TableName=self.settings.table_name,
            Key=resource_key(account, rid, kind=SEATS),
            ConsistentRead=True,
        ).get("Item")

    def counters(self, account: str) -> tuple[int, int]:
        item = self.clients.dynamodb.get_item(
            TableName=self.settings.table_name, Key=counter_key(account, kind=SEATS), ConsistentRead=True
        ).get("Item", {})
        return int(item.get("best_effort", {"N": "0"})["N"]), int(item.get("eventual", {"N": "0"})["N"])

    def visible_units(self, account: str) -> int:
        items = self.clients.dynamodb.query(
            TableName=self.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": RESOURCE_PREFIX}},
            ConsistentRead=True,
        )["Items"]
        return sum(int(i["units"]["N"]) for i in items if i["state"]["S"] in ("live", "deleting"))

    def census_owed(self, account: str, rid: str) -> int:
        requests = RecountRequests(self.settings.table_name, self.clients, self.clock)
        return requests.count(account, range_of(rid), kind=SEATS)

    def quiesce(self, account: str) -> None:
        """Stream drained, the sweeper's passes (census requests included: a settlement may ask
        for one while a census it did not know of is being taken), the heal."""
        self.drain(account)
        for _ in range(3):
            self.sweeper.sweep()
            self.drain(account)
        Healer(self.settings.table_name, self.clients).heal_account(account, kind=SEATS)


@pytest.fixture(scope="module", autouse=True)
def without_backoff() -> Iterator[None]:
    """Botocore retries each throttled call as often as its config says, without its backoff
    sleeps between attempts (up to 1 + 2 s each in standard mode): every component here runs on
    the injected clock, one call at a time, so those sleeps only cost wall time (the throttled
    revert's four cases, about 30 s of them)."""
    with retries_without_backoff():
        yield


@pytest.fixture
def world(settings: Settings, clients: Clients, stream: StreamReader) -> World:
    return World(settings, clients, stream, Clock())


# Who finds the dead resize after the grace period, and ends it.
def by_patch(world: World, account: str, rid: str, units: int) -> None:
    world.service.resize(account, rid, units, kind=SEATS)  # the size it has: a no-op once settled


def by_delete(world: World, account: str, rid: str, _: int) -> None:
    world.service.delete(account, rid, kind=SEATS)


def by_audit(world: World, account: str, rid: str, _: int) -> None:
    world.sweeper.request_audit("test")
    assert world.sweeper.audit().resizes_ended == 1


def by_recount(world: World, account: str, rid: str, _: int) -> None:
    world.recounter.recount(account, fix=True, kind=SEATS)


SETTLERS = {"patch": by_patch, "delete": by_delete, "audit": by_audit, "recount": by_recount}
Settler = Callable[[World, str, str, int], None]


def assert_exact(world: World, account: str) -> None:
    best_effort, eventual = world.counters(account)
    visible = world.visible_units(account)
    assert (best_effort, eventual) == (visible, visible)


@pytest.mark.parametrize("settler", SETTLERS.values(), ids=SETTLERS.keys())
def test_a_grow_refused_with_409_whose_revert_is_throttled_never_takes_effect(
    world: World, account: str, settler: Settler
) -> None:
    # Given 10 seats of 10 used: a team of 7 and a team of 3, both counted
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team-a", kind=SEATS, units=7)
    world.service.create(account, "b", {}, "team-b", kind=SEATS, units=3)
    world.drain(account)
    # When team-b's grow to 6 is refused (409) and its claim's revert is throttled on every
    # attempt (the claim, the first UpdateItem of the retrying client, goes through)
    with (
        injected(world.clients.dynamodb, "UpdateItem", error="ThrottlingException", times=100, skip=1),
        pytest.raises(LimitExceeded),
    ):
        world.service.resize(account, "team-b", 6, kind=SEATS)
    assert "resize_request" in (world.item(account, "team-b") or {})
    # And whoever finds the claim after the grace period ends it
    world.pass_the_grace_period()
    settler(world, account, "team-b", 3)
    # Then the grow never took effect: team-b holds 3 seats (or is gone), the counters hold what
    # is live, exactly, and no seat is free
    item = world.item(account, "team-b")
    assert item is None or (int(item["units"]["N"]) == 3 and "resize_request" not in item)
    world.quiesce(account)
    assert_exact(world, account)
    assert world.visible_units(account) <= 10
    if item is not None:
        with pytest.raises(LimitExceeded):
            world.service.create(account, "c", {}, kind=SEATS, units=1)


@pytest.mark.parametrize("settler", SETTLERS.values(), ids=SETTLERS.keys())
def test_a_grow_whose_process_died_after_its_claim_is_never_settled_as_grown(
    world: World, account: str, settler: Settler
) -> None:
    # Given a counted team of 2 seats under a limit of 10
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=2)
    world.drain(account)
    # When its PATCH to 8 dies after its claim, before any counter write
    with (
        injected(world.clients.dynamodb_single_attempt, "UpdateItem", when="crash"),
        pytest.raises(ProcessDied),
    ):
        world.service.resize(account, "team", 8, kind=SEATS)
    # And, past the grace period, a later request or a repair finds the claim
    world.pass_the_grace_period()
    settler(world, account, "team", 2)
    world.quiesce(account)
    # Then the team holds 2 seats (or is gone), and the counters exactly what is live
    item = world.item(account, "team")
    assert item is None or (int(item["units"]["N"]) == 2 and "resize_request" not in item)
    assert_exact(world, account)
    # And a create of 8 fits (2 + 8 = 10), one more seat does not: never 16 live under 10
    world.service.create(account, "b", {}, kind=SEATS, units=8)
    if item is None:  # deleted: 2 seats are free
        world.service.create(account, "c", {}, kind=SEATS, units=2)
    with pytest.raises(LimitExceeded):
        world.service.create(account, "c", {}, kind=SEATS, units=1)
    world.quiesce(account)
    assert_exact(world, account)
    assert world.visible_units(account) <= 10


def test_a_grow_that_applied_before_its_process_died_is_settled_grown(world: World, account: str) -> None:
    # Given a counted team of 2 whose PATCH to 5 moved the counters and then died before it
    # gave the team its new size, with the stream's record of it never delivered
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=2)
    world.drain(account)
    with injected(world.clients.dynamodb, "UpdateItem", when="crash", skip=1), pytest.raises(ProcessDied):
        world.service.resize(account, "team", 5, kind=SEATS)
    world.stream.records_for(account)  # read and dropped: the stream path never sees them
    assert world.counters(account) == (5, 5)
    # When a DELETE finds the claim after the grace period
    world.pass_the_grace_period()
    world.service.delete(account, "team", kind=SEATS)
    # Then the resize was ended at 5 (the counters held 5) and the delete released 5
    assert world.item(account, "team") is None
    assert world.counters(account) == (0, 0)


def is_counter_move(call: Call) -> bool:
    """A resize's move of its account's counter (Z3)."""
    return call.operation == "UpdateItem" and call.key.startswith("COUNTER#")


# (fixed, found over HTTP by a hostile pass: a count that met a resize in flight was left to the
# sweeper, and no record asked for it again, so a burst of PATCHes right after the creates left
# eventual at 0 for the sweeper's minutes, 7 to 10 of them. The record of the write that ends the
# resize now counts it, as it already did at an organization.)
@pytest.mark.parametrize(("origin", "target"), [(2, 5), (5, 2)])
def test_a_count_that_met_a_resize_in_flight_is_made_when_the_resize_ends(
    world: World, account: str, origin: int, target: int
) -> None:
    # Given a resource the stream path has not counted yet, whose PATCH has made its claim
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=origin)
    created = world.stream.records_for(account)
    with Race(world.clients.dynamodb, world.clients.dynamodb_single_attempt) as race:
        resize = race.start("resize", lambda: world.service.resize(account, "team", target, kind=SEATS))
        stop_before(race, resize, is_counter_move)
        # When the stream path counts the create meanwhile: it finds the claim, and leaves it
        counted = race.run("count", lambda: process_stream_batch(created, world.counter))
        assert counted.error is None, counted.error
        item = world.item(account, "team") or {}
        assert not item["counter_processed"]["BOOL"]
        # ... and the PATCH then ends
        race.finish(resize)
    assert resize.error is None, resize.error
    # Then the record of the write that ended it counts the resource, at its new size, without
    # the sweeper (nothing is left in its index)
    world.drain(account)
    item = world.item(account, "team") or {}
    assert int(item["units"]["N"]) == target
    assert item["counter_processed"]["BOOL"]
    assert "pending_shard" not in item
    assert world.counters(account) == (target, target)


@pytest.mark.parametrize(("origin", "target"), [(2, 5), (5, 2)])
def test_the_sweeper_ends_a_dead_resize_of_an_uncounted_resource_and_counts_it(
    world: World, account: str, origin: int, target: int
) -> None:
    # Given a resource the stream path has not counted yet, whose resize died after its claim
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=origin)
    with (
        injected(world.clients.dynamodb_single_attempt, "UpdateItem", when="crash"),
        pytest.raises(ProcessDied),
    ):
        world.service.resize(account, "team", target, kind=SEATS)
    # And the stream path, finding it held by the resize, left its count to the sweeper
    world.drain(account)
    item = world.item(account, "team") or {}
    assert "pending_shard" in item
    assert not item["counter_processed"]["BOOL"]
    # When the sweeper runs past the grace period, and nothing else touches the resource
    world.pass_the_grace_period()
    outcome = world.sweeper.sweep()
    # Then it ended the resize at the size the counters hold (the counter write never happened)
    # and counted the resource: eventual holds it, exactly
    item = world.item(account, "team") or {}
    assert outcome.resizes_ended == 1
    assert int(item["units"]["N"]) == origin
    assert item["counter_processed"]["BOOL"]
    assert "pending_shard" not in item
    assert world.counters(account) == (origin, origin)


def test_a_dead_resize_whose_size_only_a_census_can_tell_is_left_to_the_sweeper(
    world: World, account: str
) -> None:
    # Given an uncounted team of 2 whose grow to 6 died after its claim, in a range where a
    # create that died long ago is left pending (it may or may not hold a slot)
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=2)
    with (
        injected(world.clients.dynamodb_single_attempt, "UpdateItem", when="crash"),
        pytest.raises(ProcessDied),
    ):
        world.service.resize(account, "team", 6, kind=SEATS)
    neighbour = next(f"n{n}" for n in range(1000) if range_of(f"n{n}") == range_of("team"))
    with (
        injected(world.clients.dynamodb_single_attempt, "UpdateItem", when="crash"),
        pytest.raises(ProcessDied),
    ):
        world.service.create(account, "n", {}, neighbour, kind=SEATS, units=1)
    world.drain(account)
    world.pass_the_grace_period()
    # When a PATCH finds the dead claim
    # Then it cannot tell the size from best_effort's share alone: it asks for a census and 503s
    with pytest.raises(InProgress):
        world.service.resize(account, "team", 3, kind=SEATS)
    assert world.census_owed(account, "team") >= 1
    # And the sweeper ends it at the smaller size, takes the census (which removes the dead
    # create), and counts the team; afterwards the PATCH goes through
    world.quiesce(account)
    assert int((world.item(account, "team") or {})["units"]["N"]) == 2
    assert world.item(account, neighbour) is None
    assert world.census_owed(account, "team") == 0
    assert_exact(world, account)
    assert world.service.resize(account, "team", 3, kind=SEATS).units == 3
    world.quiesce(account)
    assert_exact(world, account)


def test_a_resize_answered_503_is_settled_by_its_retry_at_the_size_the_counters_hold(
    world: World, account: str
) -> None:
    # Given a counted team of 4 whose grow to 6 got a 500 (never sent: not applied) and a 503
    world.service.set_limit(account, 10, kind=SEATS)
    world.service.create(account, "a", {}, "team", kind=SEATS, units=4)
    world.drain(account)
    with (
        injected(world.clients.dynamodb_single_attempt, "UpdateItem", error="InternalServerError"),
        pytest.raises(StoreUnavailable),
    ):
        world.service.resize(account, "team", 6, kind=SEATS)
    # When the client retries after the grace period, to 5
    world.pass_the_grace_period()
    assert world.service.resize(account, "team", 5, kind=SEATS).units == 5
    # Then the dead claim was ended at 4, and the retry moved the counters 4 -> 5, exactly
    world.quiesce(account)
    assert world.counters(account) == (5, 5)
