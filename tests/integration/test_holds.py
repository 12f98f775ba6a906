"""Holds (issue 25, resources/holds.py): units reserved by a create with ``hold_seconds``, made
permanent by a confirm or released at their deadline (by the sweeper, or by the account's next
create refused for room), exactly once, against DynamoDB Local, every component on one clock."""

from __future__ import annotations

import threading
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
from hybrid_counter.errors import HoldExpired, LimitExceeded, NotFound, ValidationError
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, counter_key, org_pk, resource_sk
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources import holds as holds_module
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader

pytestmark = pytest.mark.integration

SEATS = "seats"


class Clock:
    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    settings: Settings
    clients: Clients
    stream: StreamReader
    clock: Clock

    def __post_init__(self) -> None:
        self.service = self.service_at(self.clock)
        self.counter = EventualCounter(
            self.settings.table_name, "batched", self.clients, sleep=lambda _: None, clock=self.clock
        )
        self.account = f"hold-{uuid.uuid4().hex[:10]}"
        self.service.set_limit(self.account, 3, kind=SEATS)

    def service_at(self, clock: Clock) -> ResourceService:
        effects = Effects(clock=clock, waiter=Waiter(attempts=3, delay=0.01))
        return ResourceService(self.settings, self.clients, effects=effects)

    def sweeper(self) -> Sweeper:
        grace = self.settings.pending_grace_seconds
        return Sweeper(self.settings.table_name, self.counter, grace, self.clients, clock=self.clock)

    def drain(self, *pks: str) -> None:
        for pk in pks or (account_pk(self.account),):
            while records := self.stream.records_of(pk):
                assert process_stream_batch(records, self.counter).failed_sequence_numbers == []

    def counters(self, account: str | None = None) -> tuple[int, int]:
        item = self.clients.dynamodb.get_item(
            TableName=self.settings.table_name,
            Key=counter_key(account or self.account, kind=SEATS),
            ConsistentRead=True,
        ).get("Item", {})
        return int(item.get("best_effort", {"N": "0"})["N"]), int(item.get("eventual", {"N": "0"})["N"])

    def visible_units(self, account: str | None = None) -> int:
        found = self.clients.dynamodb.query(
            TableName=self.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account or self.account)},
                ":prefix": {"S": RESOURCE_PREFIX},
            },
            ConsistentRead=True,
        )["Items"]
        return sum(int(i["units"]["N"]) for i in found if i["state"]["S"] in ("live", "deleting"))

    def assert_exact(self, account: str | None = None) -> None:
        self.drain(account_pk(account or self.account))
        visible = self.visible_units(account)
        assert self.counters(account) == (visible, visible)

    def hold(self, rid: str, units: int = 1, seconds: int = 60, **kwargs: Any) -> Any:
        resource, _ = self.service.create(
            self.account, rid, {}, rid, kind=SEATS, units=units, hold_seconds=seconds, **kwargs
        )
        return resource


@pytest.fixture
def world(settings: Settings, clients: Clients, stream: StreamReader) -> World:
    return World(settings, clients, stream, Clock())


def test_a_hold_counts_shows_its_deadline_and_a_confirm_makes_it_permanent_once(world: World) -> None:
    # Given a hold of 2 seats for a minute, under a limit of 3
    held = world.hold("h", units=2, seconds=60)
    body = held.to_json()
    assert body["held"] is True
    assert body["expires_at"].startswith(time.strftime("%Y-%m-%dT", time.gmtime(world.clock.now + 60)))
    # Then it counts against the limit like any resource, and usage shows it held
    with pytest.raises(LimitExceeded):
        world.service.create(world.account, "x", {}, "x", kind=SEATS, units=2)
    usage = world.service.usage(world.account).kinds[SEATS].to_json()
    assert (usage["used"], usage["held"]) == (2, 2)
    # When it is confirmed, twice (a retry)
    confirmed = world.service.confirm(world.account, "h", kind=SEATS)
    again = world.service.confirm(world.account, "h", kind=SEATS)
    # Then it is permanent: no deadline, no longer held, still counted, and no expiry releases it
    assert confirmed.to_json()["held"] is False
    assert "expires_at" not in confirmed.to_json()
    assert again.to_json() == confirmed.to_json()
    assert world.service.usage(world.account).kinds[SEATS].to_json()["held"] == 0
    world.clock.now += 3600
    assert world.sweeper().sweep().holds_expired == 0
    assert world.service.get(world.account, "h", kind=SEATS).units == 2
    world.assert_exact()


def test_a_confirm_after_the_deadline_is_refused_and_the_units_are_released_exactly_once(
    world: World,
) -> None:
    # Given a hold of 2 seats for 10 s, counted
    world.hold("h", units=2, seconds=10)
    world.drain()
    # When its deadline passes, and it is confirmed
    world.clock.now += 11
    with pytest.raises(HoldExpired):
        world.service.confirm(world.account, "h", kind=SEATS)
    # Then the sweeper releases it, once, however many run
    assert world.sweeper().sweep().holds_expired == 1
    assert world.sweeper().sweep().holds_expired == 0
    with pytest.raises(NotFound):
        world.service.get(world.account, "h", kind=SEATS)
    # And a confirm now is still told the hold expired (not that it never was)
    with pytest.raises(HoldExpired):
        world.service.confirm(world.account, "h", kind=SEATS)
    # And nothing is counted for it: the counters hold what is live, and the 3 seats are free
    world.assert_exact()
    world.service.create(world.account, "x", {}, "x", kind=SEATS, units=3)
    world.assert_exact()


def test_a_create_refused_for_room_reclaims_the_accounts_expired_holds_first(world: World) -> None:
    # Given a hold of 3 seats (the whole limit) whose deadline passed, no sweeper run since
    world.hold("h", units=3, seconds=5)
    world.clock.now += 6
    # When a create of 1 seat comes
    created, _ = world.service.create(world.account, "x", {}, "x", kind=SEATS)
    # Then it was admitted: the expired hold was released first, and judged again
    assert created.units == 1
    with pytest.raises(NotFound):
        world.service.get(world.account, "h", kind=SEATS)
    world.assert_exact()
    # And a hold not expired yet is never reclaimed: a create past the limit is still refused
    world.hold("h2", units=2, seconds=60)
    with pytest.raises(LimitExceeded):
        world.service.create(world.account, "y", {}, "y", kind=SEATS)
    assert world.service.get(world.account, "h2", kind=SEATS).units == 2


def test_a_refusal_for_room_and_usage_look_for_holds_only_on_an_account_that_ever_held(world: World) -> None:
    # Given an account at its limit of 3 seats that never held, and a count of HoldIndex queries
    for rid in ("a", "b", "c"):
        world.service.create(world.account, rid, {}, rid, kind=SEATS)
    queries: list[str] = []

    def on_query(params: dict[str, Any], **_: Any) -> None:
        if params.get("IndexName") == "HoldIndex":  # (usage's read of the counter items is a Query too)
            queries.append("HoldIndex")

    events = world.clients.dynamodb.meta.events
    events.register("provide-client-params.dynamodb.Query", on_query)
    try:
        # When a create, a dry run and a grow are refused for room
        with pytest.raises(LimitExceeded) as refused:
            world.service.create(world.account, "d", {}, "d", kind=SEATS)
        assert refused.value.holds is False
        assert not world.service.would_create(world.account, "d", {}, "d", kind=SEATS).would_admit
        with pytest.raises(LimitExceeded):
            world.service.resize(world.account, "a", 2, kind=SEATS)
        # Then none of them looked for expired holds: the counter item says none was ever admitted
        assert queries == []
        # (nor does the usage read, which shows nothing held)
        assert world.service.usage(world.account).kinds[SEATS].held == 0
        assert queries == []
        # And once a hold was admitted (after a delete made room), a refusal looks again
        world.service.delete(world.account, "c", kind=SEATS)
        world.hold("h", units=1, seconds=60)
        with pytest.raises(LimitExceeded) as refused:
            world.service.create(world.account, "d", {}, "d", kind=SEATS)
        assert refused.value.holds is True
        assert queries == ["HoldIndex"]
        # and the usage read looks for the holds too: one held seat
        assert world.service.usage(world.account).kinds[SEATS].held == 1
        assert queries == ["HoldIndex", "HoldIndex"]
    finally:
        events.unregister("provide-client-params.dynamodb.Query", on_query)


def race_once(world: World, rid: str, *, expiry_lag: float = 0.0) -> bool:
    """A hold whose deadline falls between a confirming process's clock and an expiring one's,
    both sent at once (the expiry ``expiry_lag`` seconds later); True if the confirm won."""
    world.hold(rid, units=1, seconds=30)
    until = world.clock.now + 30
    confirmer = world.service_at(Clock(until - 0.001))
    expirer = world.service_at(Clock(until + 0.001))
    item = world.clients.dynamodb.get_item(
        TableName=world.settings.table_name,
        Key={"pk": {"S": account_pk(world.account)}, "sk": {"S": resource_sk(rid, kind=SEATS)}},
        ConsistentRead=True,
    )["Item"]
    results: dict[str, Any] = {}
    start = threading.Barrier(2)

    def confirm() -> None:
        start.wait()
        try:
            results["confirm"] = confirmer.confirm(world.account, rid, kind=SEATS)
        except HoldExpired as error:
            results["confirm"] = error

    def expire() -> None:
        start.wait()
        time.sleep(expiry_lag)
        results["expire"] = expirer.holds.expire(world.account, rid, item)

    threads = [threading.Thread(target=confirm), threading.Thread(target=expire)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # exactly one of them won: confirmed (and not expired) or expired (and the confirm refused)
    confirmed = not isinstance(results["confirm"], HoldExpired)
    assert confirmed != results["expire"], results
    exists = rid in {r.resource_id for r in world.service.list(world.account, 100, kind=SEATS).items}
    assert exists == confirmed
    return confirmed


def test_a_confirm_and_an_expiry_that_race_end_with_exactly_one_of_them(world: World) -> None:
    outcomes = []
    for n in range(6):
        # (the confirm reads before it writes: the expiry, one write, wins the dead heats; a
        # little lag lets the confirm reach its write first in half of them)
        confirmed = race_once(world, f"race{n}", expiry_lag=0.0 if n % 2 else 0.3)
        outcomes.append(confirmed)
        if confirmed:
            world.service.delete(world.account, f"race{n}", kind=SEATS)
    # And the counters count each exactly once, whichever won
    world.assert_exact()
    assert any(outcomes), outcomes  # (the lagged expiries: the confirm had 0.3 s to write first)
    print(f"\nconfirm won {sum(outcomes)} of {len(outcomes)} races")


def test_hold_seconds_past_the_maximum_or_not_positive_are_refused_and_write_nothing(world: World) -> None:
    longest = world.settings.hold_max_seconds
    for seconds in (longest + 1, 0, -5):
        with pytest.raises(ValidationError):
            world.hold("h", seconds=seconds)
        with pytest.raises(ValidationError):
            world.service.would_create(world.account, "h", {}, "h", kind=SEATS, hold_seconds=seconds)
    assert world.visible_units() == 0
    # A hold of exactly the maximum is taken, and its dry run says it would be
    assert world.service.would_create(
        world.account, "h", {}, "h", kind=SEATS, hold_seconds=longest
    ).would_admit
    assert world.hold("h", seconds=longest).hold_until == pytest.approx(world.clock.now + longest)


def test_a_held_resource_deleted_is_released_and_a_confirm_then_finds_nothing(world: World) -> None:
    world.hold("h", units=2)
    world.service.delete(world.account, "h", kind=SEATS)
    with pytest.raises(NotFound):
        world.service.confirm(world.account, "h", kind=SEATS)
    world.assert_exact()
    assert world.counters() == (0, 0)


def test_a_retried_put_of_a_hold_answers_the_same_hold(world: World) -> None:
    first = world.hold("h", units=2, seconds=60)
    again, created = world.service.create(world.account, "h", {}, "h", kind=SEATS, units=2, hold_seconds=60)
    assert created is False
    assert again.to_json() == first.to_json()
    world.assert_exact()
    assert world.counters()[0] == 2


def test_a_resized_hold_releases_the_units_it_holds_when_it_expires(world: World) -> None:
    world.hold("h", units=1, seconds=10)
    assert world.service.resize(world.account, "h", 3, kind=SEATS).units == 3
    world.clock.now += 11
    assert world.sweeper().sweep().holds_expired == 1
    world.assert_exact()
    assert world.counters() == (0, 0)


def test_a_members_hold_is_released_at_both_levels_when_it_expires(world: World) -> None:
    # Given a member of an organization of 4 seats, holding 3 of them
    plan, org = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    world.service.put_plan(plan, {SEATS: 4})
    world.service.put_org(org, plan)
    world.service.add_member(org, world.account)
    world.service.set_limit(world.account, 10, kind=SEATS)
    world.hold("h", units=3, seconds=10)
    other = f"hold-{uuid.uuid4().hex[:10]}"
    world.service.set_limit(other, 10, kind=SEATS)
    world.service.add_member(org, other)
    with pytest.raises(LimitExceeded) as refused:
        world.service.create(other, "y", {}, "y", kind=SEATS, units=2)
    assert refused.value.scope == "organization"
    # When its deadline passes and the sweeper runs
    world.clock.now += 11
    assert world.sweeper().sweep().holds_expired == 1
    # Then both levels are released: the other member takes all 4
    world.service.create(other, "y", {}, "y", kind=SEATS, units=4)
    world.drain(account_pk(world.account), account_pk(other), org_pk(org))
    assert world.service.org_usage(org).kinds[SEATS].used == 4
    world.assert_exact()
    world.assert_exact(other)


def test_a_dry_run_and_a_grow_refused_for_room_count_without_the_expired_holds(world: World) -> None:
    # Given 3 seats: a permanent resource of 1 and a hold of 2 whose deadline passed
    world.service.create(world.account, "kept", {}, "kept", kind=SEATS)
    world.hold("h", units=2, seconds=5)
    world.clock.now += 6
    # Then a dry run of a create of 2 says it would be admitted (the create would release the
    # expired hold first), and writes nothing
    answer = world.service.would_create(world.account, "x", {}, "x", kind=SEATS, units=2)
    assert answer.would_admit is True
    assert world.service.get(world.account, "h", kind=SEATS).units == 2
    # And a grow of the permanent one to 3 is admitted: the expired hold is released first
    assert world.service.resize(world.account, "kept", 3, kind=SEATS).units == 3
    with pytest.raises(NotFound):
        world.service.get(world.account, "h", kind=SEATS)
    world.assert_exact()


class Ticking:
    """A clock that reads ``first`` once, then ``then`` ever after: a request whose deadline
    passes between its read and its write."""

    def __init__(self, first: float, then: float) -> None:
        self.values = [first]
        self.then = then

    def __call__(self) -> float:
        return self.values.pop() if self.values else self.then


def test_a_confirm_whose_deadline_passes_between_its_read_and_its_write_is_refused(world: World) -> None:
    # Given a hold whose deadline falls after the confirm reads it and before its write lands
    world.hold("h", units=1, seconds=30)
    until = world.clock.now + 30
    effects = Effects(clock=Ticking(until - 0.001, until + 0.001), waiter=Waiter(attempts=3, delay=0.01))
    late = ResourceService(world.settings, world.clients, effects=effects)
    # Then its write's own condition refuses it: HoldExpired, and the hold is not confirmed
    with pytest.raises(HoldExpired):
        late.confirm(world.account, "h", kind=SEATS)
    assert world.service.get(world.account, "h", kind=SEATS).hold_until == pytest.approx(until)


def test_expired_holds_of_other_kinds_never_hide_this_kinds_from_a_refusal(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given more expired holds of another kind than one page of the HoldIndex holds (a page of
    # 3 here; 100 in production), their deadlines before this kind's: a hold of 3 seats (the
    # whole limit), every deadline passed, no sweeper run since
    monkeypatch.setattr(holds_module, "RECLAIM_PAGE", 3)
    world.service.set_limit(world.account, 10, kind="projects")
    for n in range(5):
        world.service.create(world.account, f"p{n}", {}, f"p{n}", kind="projects", hold_seconds=2)
    world.hold("h", units=3, seconds=5)
    world.clock.now += 6
    # When a dry run, then a create of 1 seat come
    answer = world.service.would_create(world.account, "x", {}, "x", kind=SEATS)
    created, _ = world.service.create(world.account, "x", {}, "x", kind=SEATS)
    # Then both judged without the expired seats hold (it was found past the other kind's page
    # and released; before, the page of other kinds' holds hid it until the sweeper's run)
    assert answer.would_admit is True
    assert created.units == 1
    with pytest.raises(NotFound):
        world.service.get(world.account, "h", kind=SEATS)
    # And the seats counters hold x alone
    world.drain()
    assert world.counters() == (1, 1)
