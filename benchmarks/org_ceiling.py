"""An organization's ceiling: many member accounts loading one organization, in the throttling
simulator (throttle.py), against the model (ceiling_model.py), by the number S of counter items
the organization's counter is split over.

**What binds.** A member's create writes its resource item (put, made live), its account's
counter item (the admission) and its organization's counter item (the admission there); the
stream path counts it at both levels, each in a transaction per batch that writes the counter
item (2 units) and marks the resource (counted at its account, ``org_counted`` at its
organization). Spread over many accounts (``accounts``, 50), every account's counter item and
resource partitions take a small share of the load: the organization's counter item is the one
hot item, which pays one unit per create on the API path and 2 units per counting transaction of
its partition's batches. That is the single-account model with the organization's stream: its
partition holds one record per create (the organization's admission; its counting transaction's
own write adds one a batch), so its batches are bounded by the 99 counts of a transaction, not
by BatchSize. Split over S items (``put_org(org, plan, shards=S)``, each member's create on one
of them), each item takes its share: the model is S times one item's rate, each item's counts in
transactions of their own (one counter action, 2 units, and up to 99 resources).
The simulator gives each shard item its own bucket (``item:ORG#<org>:COUNTER#<kind>#<s>``), as
DynamoDB's split for heat would put each hot item on a partition of its own.

**The ladder** is ceiling.py's: open-loop creates at fractions of the model (round robin over the
accounts), steps back to back on one clock, a step that falls behind run once more, the ladder
stopped when it falls behind again; a step keeps up when >= 98 % of its creates are admitted and
the creates the organization's eventual counter does not count yet (best_effort minus eventual
over its counter items, read every quarter second through the step's second half) average under
two windows of admissions. Two stream consumers run alongside, as the mapping would (their
records are on different shards): the organization's partition, and the members' partitions
(a batch holds records of several accounts). After the ladder the stream path catches up with
no simulated capacity, and the organization is checked exact: its best_effort and eventual
equal the units live in its accounts (each account's too). Then a limit check under throttling:
an organization limit far below what its members are offered, every create retried until
admitted or refused: exactly the limit is admitted, and live.

At the simulator's C = 10 the top rung for S = 16 asks about 190
member creates/s of the machine (this two-core machine made about 75/s with no simulated
capacity and no stream path): the machine check (the top rung with no simulated capacity) says
whether the machine, not the model, bound a ladder.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from statistics import mean
from typing import Any

from benchmarks.ceiling import (
    FULL,
    QUICK,
    Capacity,
    Schedule,
    StreamConsumer,
    Uncounted,
    offered,
    ours_apply,
    pool_map,
    without_waits,
)
from benchmarks.ceiling_model import BATCH_RECORDS, COUNTS_PER_TRANSACTION, Units
from benchmarks.orgs import new_ids
from benchmarks.world import BenchWorld
from hybrid_counter.counting.eventual import ApplyReport
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import LimitExceeded, StoreUnavailable, Throttled
from hybrid_counter.keys import COUNTER_PREFIX, RESOURCE_PREFIX, account_pk, org_pk
from hybrid_counter.resources import ResourceService

SHARDS = (1, 4, 16)
FRACTIONS = (0.8, 0.9, 1.0, 1.1, 1.2)  # of the model; one account alone fell behind at 1.1
ORG_RECORDS_PER_CREATE = 1  # on the organization's partition: its admission's record


def org_stream_units(shards: int) -> Units:
    """Units one of the organization's S counter items pays to count the creates admitted on it
    in one cycle: 2 per counting transaction that writes it. The partition's batch holds every
    item's creates (S times as many); each item's counts get transactions of their own (one
    counter action and up to 99 resources: counting/eventual.py ``plan_chunks``), so an item
    pays one transaction per batch that holds its creates, or more past 99 of them."""

    def units(creates_on_item: float) -> float:
        creates = creates_on_item * shards
        transactions = max(
            1,
            math.ceil(creates_on_item / COUNTS_PER_TRANSACTION),
            math.ceil(creates * ORG_RECORDS_PER_CREATE / BATCH_RECORDS),
        )
        return 2.0 * transactions

    return units


def put_org(service: ResourceService, org: str, plan_id: str, shards: int) -> None:
    """The organization on its plan, split over ``shards`` counter items."""
    service.put_org(org, plan_id, shards=shards)


class PartitionsConsumer(StreamConsumer):
    """ceiling.StreamConsumer over several partitions: each window, the new records of all."""

    def __init__(self, world: BenchWorld, pks: list[str], apply: Any) -> None:
        super().__init__(world, "", apply)
        self.pks = pks

    def _pull(self) -> None:
        for pk in self.pks:
            self.backlog += self.world.stream.records_of(pk)

    def __exit__(self, *_: object) -> None:
        """Stopped: what it pulled and has not applied is applied now (the reader will not hand
        it out again), so the stream path misses nothing the ladder admitted."""
        super().__exit__()
        while self.backlog:
            batch = self.backlog[: self.world.batch_size]
            self.backlog = self.apply(batch) + self.backlog[len(batch) :]


@dataclass
class Org:
    """An organization loaded by its members, and how to read what it holds."""

    world: BenchWorld
    service: ResourceService
    org_id: str
    members: list[str]

    @property
    def kind(self) -> str:
        return self.world.settings.default_kind

    def counter_items(self) -> list[dict[str, Any]]:
        """The organization's counter items of the kind (one per shard), consistently."""
        response = self.world.clients.dynamodb.query(
            TableName=self.world.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": org_pk(self.org_id)},
                ":prefix": {"S": f"{COUNTER_PREFIX}{self.kind}#"},
            },
            ConsistentRead=True,
        )
        return sorted(response.get("Items", []), key=lambda item: str(item["sk"]["S"]))

    def totals(self) -> tuple[int, int, list[int]]:
        """best_effort and eventual over the shard items, and each item's best_effort."""
        items = self.counter_items()
        each = [int(item.get("best_effort", {}).get("N", "0")) for item in items]
        return sum(each), sum(int(item.get("eventual", {}).get("N", "0")) for item in items), each

    def uncounted(self) -> Uncounted:
        def read() -> int:
            best_effort, eventual, _ = self.totals()
            return max(0, best_effort - eventual)

        return read

    def live_units(self, account: str) -> int:
        units, start = 0, None
        while True:
            query: dict[str, Any] = {
                "TableName": self.world.table,
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
                "FilterExpression": "#state = :live",
                "ExpressionAttributeNames": {"#state": "state", "#units": "units"},
                "ExpressionAttributeValues": {
                    ":pk": {"S": account_pk(account)},
                    ":prefix": {"S": f"{RESOURCE_PREFIX}{self.kind}#"},
                    ":live": {"S": "live"},
                },
                "ProjectionExpression": "#units",
                "ConsistentRead": True,
            }
            if start:
                query["ExclusiveStartKey"] = start
            page = self.world.clients.dynamodb.query(**query)
            units += sum(int(item["units"]["N"]) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                return units

    def steady(self) -> None:
        """Each member's first create (its kind registered on its profile), counted at both
        levels: the steady state, from which a ladder starts."""
        pool_map(lambda account: self.service.create(account, "first", {}), self.members)
        self.drain()

    def drain(self) -> None:
        """The stream path catches up on every member and the organization, with no simulated
        capacity: the accounts' records, the organization's (its admissions, counted there), and
        the accounts' again (what counting at the organization wrote on their resources)."""
        counter = self.world.counter()
        for account in self.members:
            self.world.deliver(account, counter)
        self.world.deliver_org(self.org_id, counter)
        for account in self.members:
            self.world.deliver(account, counter)

    def exact(self) -> dict[str, Any]:
        """After the stream path caught up: both counters equal the units live, at every level.
        If not, the sweeper is run at once (grace 0: nothing is in flight any more) for what
        failure paths left it (an undo at the organization that was throttled), and judged
        again; what it found is reported."""
        self.drain()
        figures = self._judged()
        if not figures["exact"]:
            sweeper = Sweeper(self.world.table, self.world.counter(), 0.0, self.world.clients)
            swept = sweeper.sweep(older_than_seconds=0.0).summary()
            self.drain()
            figures = self._judged() | {"before_sweep": figures, "swept": swept}
        return figures

    def _judged(self) -> dict[str, Any]:
        best_effort, eventual, per_item = self.totals()
        live = {account: self.live_units(account) for account in self.members}
        accounts_exact = all(
            state.best_effort == state.eventual == live[account]
            for account in self.members
            for state in (self.service.counters.read(account, kind=self.kind),)
        )
        units_live = sum(live.values())
        return {
            "best_effort": best_effort,
            "eventual": eventual,
            "units_live": units_live,
            "per_counter_item": per_item,
            "accounts_exact": accounts_exact,
            "exact": best_effort == eventual == units_live and accounts_exact,
        }


def new_org(world: BenchWorld, shards: int, accounts: int, *, limit: int = 1_000_000) -> Org:
    """An organization on a plan of ``limit`` with ``accounts`` members (each with an override
    far above what it gets, so the organization's limit is the one that binds)."""
    service = world.service(without_waits())
    plan_id, org_id = new_ids()
    service.put_plan(plan_id, {world.settings.default_kind: limit})
    put_org(service, org_id, plan_id, shards)
    members = [world.account(f"org-ceiling-{shards}") for _ in range(accounts)]
    for account in members:
        service.add_member(org_id, account)
        service.set_limit(account, 1_000_000)
    return Org(world, service, org_id, members)


def run(
    world: BenchWorld, *, quick: bool, shards: tuple[int, ...] = SHARDS, accounts: int = 50
) -> dict[str, Any]:
    durations = QUICK if quick else FULL
    capacity = Capacity(10.0, 16, durations.step)
    return {
        "units_per_second": capacity.units_per_second,
        "partitions": capacity.partitions,
        "burst_seconds": capacity.burst_seconds,
        "accounts": accounts,
        "by_shards": {str(s): _ladder(world, s, accounts, capacity, durations.run) for s in shards},
    }


def model(capacity: Capacity, shards: int) -> dict[str, float]:
    units = org_stream_units(shards)
    one = capacity.model().within_two_windows(units)
    return {
        "per_item_per_second": round(one, 2),
        "model_per_second": round(shards * one, 2),
        "capacity_model_per_second": round(shards * capacity.model().by_capacity(units), 2),
    }


def _ladder(
    world: BenchWorld, shards: int, accounts: int, capacity: Capacity, run_seconds: float
) -> dict[str, Any]:
    org = new_org(world, shards, accounts)
    org.steady()
    figures = model(capacity, shards)
    rate = figures["model_per_second"]
    org_report, members_report, stream_clients = ApplyReport(), ApplyReport(), world.fresh_clients()
    turn = itertools.count()

    def create(rid: str) -> None:
        org.service.create(org.members[next(turn) % len(org.members)], "x", {}, resource_id=rid)

    steps, sustained = [], 0.0
    simulator = capacity.throttled(world.clients.dynamodb, world.clients.dynamodb_single_attempt)
    simulator.attach(stream_clients.dynamodb, stream_clients.dynamodb_single_attempt, wait=True)
    try:
        with (
            PartitionsConsumer(world, [org_pk(org.org_id)], ours_apply(world, org_report, stream_clients)),
            PartitionsConsumer(
                world, [account_pk(a) for a in org.members], ours_apply(world, members_report, stream_clients)
            ),
        ):
            schedule = Schedule()
            for fraction in FRACTIONS:
                step = offered(create, org.uncounted(), fraction * rate, capacity.seconds, schedule)
                steps.append(step)
                if not step.kept_up:  # once more, inheriting the backlog (ceiling._ladder says why)
                    step = offered(create, org.uncounted(), fraction * rate, capacity.seconds, schedule)
                    steps.append(step)
                    if not step.kept_up:
                        break
                sustained = step.offered_per_second
    finally:
        simulator.detach()
    exact = org.exact()
    return {
        "shards": shards,
        **figures,
        "sustained_per_second": sustained,
        "ratio": round(sustained / rate, 3),
        "step_seconds": capacity.seconds,
        "throttled_requests": simulator.throttled,
        "steps": [asdict(step) | {"kept_up": step.kept_up} for step in steps],
        "hottest_item_share": round(max(exact["per_counter_item"]) / max(1, exact["best_effort"]), 3),
        "exact_after": exact,
        "actions_per_counting_transaction": {
            "organization": _mean_size(org_report),
            "members": _mean_size(members_report),
        },
        "machine_check": _machine_check(world, shards, accounts, FRACTIONS[-1] * rate, run_seconds),
        "exact_limit_under_throttling": exact_limit(world, shards, capacity),
    }


def _mean_size(report: ApplyReport) -> float:
    sizes = report.transaction_sizes
    return round(mean(sizes), 1) if sizes else 0.0


def _machine_check(
    world: BenchWorld, shards: int, accounts: int, rate: float, seconds: float
) -> dict[str, Any]:
    """The machine is not what binds: the top rung with no simulated capacity at all."""
    org = new_org(world, shards, accounts)
    assert org is not None
    org.steady()
    apply = ours_apply(world, ApplyReport(), world.clients)
    turn = itertools.count()

    def create(rid: str) -> None:
        org.service.create(org.members[next(turn) % len(org.members)], "x", {}, resource_id=rid)

    with (
        PartitionsConsumer(world, [org_pk(org.org_id)], apply),
        PartitionsConsumer(world, [account_pk(a) for a in org.members], apply),
    ):
        step = offered(create, org.uncounted(), rate, seconds, Schedule())
    return asdict(step) | {"kept_up": step.kept_up}


def exact_limit(
    world: BenchWorld, shards: int, capacity: Capacity, *, limit: int = 40, accounts: int = 10
) -> dict[str, Any]:
    """Creates of many members, three times the organization's limit, each retried until admitted
    or refused, under throttling: exactly the limit is admitted, and live."""
    org = new_org(world, shards, accounts, limit=limit)

    def decided(n: int) -> int:
        account = org.members[n % len(org.members)]
        while True:
            try:
                org.service.create(account, "x", {}, resource_id=f"l{n}")
            except LimitExceeded:
                return 0
            except (Throttled, StoreUnavailable):
                continue
            return 1

    simulator = capacity.throttled(world.clients.dynamodb, world.clients.dynamodb_single_attempt)
    try:
        admitted = sum(pool_map(decided, range(3 * limit)))
    finally:
        simulator.detach()
    after = org.exact()
    return {
        "limit": limit,
        "accounts": accounts,
        "creates": 3 * limit,
        "admitted": admitted,
        "units_live": after["units_live"],
        "best_effort": after["best_effort"],
        "throttled_requests": simulator.throttled,
        "exact": admitted == limit == after["units_live"] and after["exact"],
    }
