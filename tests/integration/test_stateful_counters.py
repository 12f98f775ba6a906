"""A randomized model of the whole counting system against DynamoDB Local (hypothesis stateful).

Each example runs a random schedule of: creates and deletes (with injected faults: responses lost
after the write took effect, requests that never left, throttling), stream deliveries in order,
shuffled, duplicated, by two workers at once, or interrupted by a worker dying mid-batch (with
injected transaction conflicts, lost transaction responses and throttling); records that keep
failing go through the retry queue (replayed from the stream by their on-failure metadata) and
then to the operator queue; sweeps, heals and operator recounts at any time.

After every step, for every account: best_effort <= live resources (never overcounts), and
eventual == resources marked counted (nothing counted twice or lost from the count).
After the drain: eventual == live resources, best_effort <= live, and every resource is counted
(or its record is in the operator queue).

Example counts: HC_STATEFUL_PROFILE=ci (default, see PROFILES) or =nightly for the long run.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from hybrid_counter.capacity import item_size
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.records import ops_from_records
from hybrid_counter.counting.replay import Replayer, ReplayFailed
from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import LimitExceeded, NotFound, StoreUnavailable, Throttled, ValidationError
from hybrid_counter.healing import Healer
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk, counter_key
from hybrid_counter.ops.recount import Recounter
from hybrid_counter.resources import ResourceService
from tests.faults import injected

pytestmark = pytest.mark.integration

PROFILES = {
    "ci": {"max_examples": 30, "stateful_step_count": 40},
    "nightly": {"max_examples": 300, "stateful_step_count": 60},
}
PROFILE = PROFILES[os.environ.get("HC_STATEFUL_PROFILE", "ci")]
IDS = [f"res-{n}" for n in range(6)]
MAX_FAILURES = 3  # the event source mapping's MaximumRetryAttempts
MAX_RECEIVES = 3  # the retry queue's maxReceiveCount

CREATE_FAULTS = [None, ("admit", "after"), ("admit", "5xx"), ("admit", "throttle-all"), ("put", "after")]
DELETE_FAULTS = [
    None,
    ("claim", "after"),
    ("release", "after"),
    ("release", "throttle-all"),
    ("remove", "after"),
]
COUNT_FAULTS = [None, "conflict", "after", "throttle", "conflict-all"]

STATS: Counter[str] = Counter()


@dataclass
class Census:
    visible: int = 0
    live: int = 0
    counted_live: int = 0
    counted_visible: int = 0
    deleting: int = 0
    uncounted_live: int = 0


class World:
    """What every example shares: the clients and the stream reader of the integration stack."""

    def __init__(self, settings_: Any, clients: Any, stream: Any) -> None:
        self.settings = settings_
        self.clients = clients
        self.stream = stream


class CountingSystem(RuleBasedStateMachine):
    world: World

    def __init__(self) -> None:
        super().__init__()
        w = self.world
        self.clock = time.time()
        effects = Effects(clock=lambda: self.clock, waiter=Waiter(attempts=3, delay=0.01))
        self.service = ResourceService(w.settings, w.clients, effects=effects)
        self.counter = EventualCounter(w.settings.table_name, "batched", w.clients, sleep=lambda _: None)
        grace = w.settings.pending_grace_seconds
        self.sweeper = Sweeper(
            w.settings.table_name, self.counter, grace, w.clients, clock=lambda: self.clock
        )
        self.replayer = Replayer(self.counter, self.sweeper, w.clients)
        self.healer = Healer(w.settings.table_name, w.clients)
        self.recounter = Recounter(
            w.settings.table_name,
            self.service.counters,
            self.counter,
            self.healer,
            w.clients,
            service=self.service,
            grace_seconds=grace,
            clock=lambda: self.clock,
            sleep=lambda _: None,
        )
        self.accounts = [f"sm-{uuid.uuid4().hex[:10]}" for _ in range(2)]
        self.undelivered: list[dict[str, Any]] = []  # in stream order, like the mapping's cursor
        self.delivered: list[dict[str, Any]] = []
        self.failures: Counter[str] = Counter()
        self.retry_queue: list[tuple[dict[str, Any], int]] = []  # (on-failure record, receives)
        self.operator_queue: list[dict[str, Any]] = []
        self.known: dict[str, list[str]] = {account: [] for account in self.accounts}
        self.unadmitted = 0  # creates whose admission outcome stayed unknown (left to the sweeper)
        # Deletes answered 503 ("retry the request"): their callers retry them, at the latest
        # after the grace period, when a claim left behind is taken over (design.md §4).
        self.to_retry: list[tuple[str, str]] = []
        self.limit = 0
        self.overshoot_allowance: Counter[str] = Counter()  # per account: failures that may let one more in

    # ---- helpers -------------------------------------------------------------------------------
    def _pull(self) -> None:
        for account in self.accounts:
            self.undelivered.extend(self.world.stream.records_for(account))
        self.undelivered.sort(key=lambda r: int(r["dynamodb"]["SequenceNumber"]))

    def _apply(self, records: list[dict[str, Any]], fault: str | None) -> list[str]:
        client = self.world.clients.dynamodb
        if fault is None:
            return process_stream_batch(records, self.counter).failed_sequence_numbers
        kinds: dict[str, dict[str, Any]] = {
            "conflict": {"error": "TransactionCanceledException"},
            "conflict-all": {"error": "TransactionCanceledException", "times": 100},
            "after": {"when": "after"},
            "throttle": {"error": "ProvisionedThroughputExceededException"},
        }
        with injected(client, "TransactWriteItems", **kinds[fault]):
            STATS[f"fault:count:{fault}"] += 1
            return process_stream_batch(records, self.counter).failed_sequence_numbers

    def _settle(self, records: list[dict[str, Any]], failed: list[str]) -> None:
        """What the event source mapping does with a batch's outcome."""
        failed_set = set(failed)
        done = [r for r in records if r["dynamodb"]["SequenceNumber"] not in failed_set]
        self.delivered.extend(done)
        done_ids = {id(r) for r in done}
        self.undelivered = [r for r in self.undelivered if id(r) not in done_ids]
        for seq in failed:
            self.failures[seq] += 1
        exhausted = [r for r in records if self.failures[r["dynamodb"]["SequenceNumber"]] > MAX_FAILURES]
        if exhausted:
            STATS["on_failure_records"] += 1
            self.retry_queue.append((self._on_failure_record(exhausted), 0))
            gone = {id(r) for r in exhausted}
            self.undelivered = [r for r in self.undelivered if id(r) not in gone]

    def _on_failure_record(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        first, last = records[0], records[-1]
        return {
            "requestContext": {"condition": "RetryAttemptsExhausted"},
            "DDBStreamBatchInfo": {
                "shardId": self.world.stream.shard_of(first),
                "startSequenceNumber": first["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": last["dynamodb"]["SequenceNumber"],
                "batchSize": len(records),
                "streamArn": self.world.stream.arn,
            },
        }

    def _census(self, account: str) -> Census:
        census = Census()
        paginator = self.world.clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self.world.settings.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": RESOURCE_PREFIX}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                state, counted = item["state"]["S"], bool(item["counter_processed"]["BOOL"])
                census.visible += state in ("live", "deleting")
                census.live += state == "live"
                census.counted_live += counted and state == "live"
                census.counted_visible += counted and state in ("live", "deleting")
                census.deleting += state == "deleting"
                census.uncounted_live += not counted and state == "live"
        return census

    def _counters(self, account: str) -> tuple[int, int, dict[str, Any]]:
        item = self.world.clients.dynamodb.get_item(
            TableName=self.world.settings.table_name, Key=counter_key(account), ConsistentRead=True
        ).get("Item", {})
        return int(item.get("best_effort", {"N": "0"})["N"]), int(item.get("eventual", {"N": "0"})["N"]), item

    # ---- rules ---------------------------------------------------------------------------------
    @initialize(limit=st.integers(4, 10))
    def set_limits(self, limit: int) -> None:
        self.limit = limit
        for account in self.accounts:
            self.service.set_limit(account, limit)

    @rule(account=st.integers(0, 1), rid=st.sampled_from([*IDS, None]), fault=st.sampled_from(CREATE_FAULTS))
    def create(self, account: int, rid: str | None, fault: tuple[str, str] | None) -> None:
        acct = self.accounts[account]
        clients = self.world.clients
        try:
            if fault is None:
                resource, created = self.service.create(acct, "r", {}, rid)
            else:
                STATS[f"fault:create:{fault[0]}:{fault[1]}"] += 1
                op = "UpdateItem" if fault[0] == "admit" else "PutItem"
                kinds: dict[str, dict[str, Any]] = {
                    "throttle-all": {"error": "ThrottlingException", "times": 100},
                    "5xx": {"error": "InternalServerError"},
                    "after": {"when": "after"},
                }
                kind = kinds[fault[1]]
                # On every DynamoDB client, so the fault follows the call whichever client makes it.
                with (
                    injected(clients.dynamodb_single_attempt, op, **kind),
                    injected(clients.dynamodb, op, **kind) if fault[0] == "admit" else nullcontext(),
                ):
                    resource, created = self.service.create(acct, "r", {}, rid)
                unknown_admission = created and fault == ("admit", "5xx")
                self.unadmitted += unknown_admission
                self.overshoot_allowance[acct] += unknown_admission
            if created:
                self.known[acct].append(resource.resource_id)
            STATS["creates"] += 1
        except (LimitExceeded, ValidationError, StoreUnavailable, Throttled) as refused:
            STATS[f"create:{type(refused).__name__}"] += 1

    @rule(account=st.integers(0, 1), ids=st.lists(st.sampled_from([*IDS, None]), min_size=1, max_size=6))
    def create_burst(self, account: int, ids: list[str | None]) -> None:
        for rid in ids:
            self.create(account, rid, None)

    @rule(account=st.integers(0, 1), pick=st.integers(0, 2**16), fault=st.sampled_from(DELETE_FAULTS))
    def delete(self, account: int, pick: int, fault: tuple[str, str] | None) -> None:
        acct = self.accounts[account]
        candidates = self.known[acct] or IDS
        rid = candidates[pick % len(candidates)]
        clients = self.world.clients
        try:
            if fault is None:
                self.service.delete(acct, rid)
            else:
                STATS[f"fault:delete:{fault[0]}:{fault[1]}"] += 1
                kind: dict[str, Any] = (
                    {"error": "ThrottlingException", "times": 100}
                    if fault[1] == "throttle-all"
                    else {"when": "after"}
                )
                # The claim is the delete's UpdateItem on the retrying client, the release its
                # UpdateItem on the single-attempt client, the removal its DeleteItem.
                client, op = {
                    "claim": (clients.dynamodb, "UpdateItem"),
                    "release": (clients.dynamodb_single_attempt, "UpdateItem"),
                    "remove": (clients.dynamodb, "DeleteItem"),
                }[fault[0]]
                with injected(client, op, **kind):
                    self.service.delete(acct, rid)
            STATS["deletes"] += 1
            if rid in self.known[acct]:
                self.known[acct].remove(rid)
        except (NotFound, StoreUnavailable, Throttled) as refused:
            STATS[f"delete:{type(refused).__name__}"] += 1
            if isinstance(refused, StoreUnavailable):
                self.to_retry.append((acct, rid))

    @precondition(lambda self: any(self.known.values()))
    @rule(account=st.integers(0, 1), pick=st.integers(0, 2**16))
    def delete_then_heal(self, account: int, pick: int) -> None:
        """A heal landing right after a delete, before the stream has hard-deleted the resource."""
        self.deliver_everything()
        self.delete(account, pick, None)
        STATS["heals"] += self.healer.heal_account(self.accounts[account]).healed
        STATS["delete_then_heal"] += 1

    @rule(size=st.integers(1, 12), fault=st.sampled_from(COUNT_FAULTS))
    def deliver_in_order(self, size: int, fault: str | None) -> None:
        self._pull()
        batch = self.undelivered[:size]
        if batch:
            STATS["deliveries"] += 1
            self._settle(batch, self._apply(batch, fault))

    @rule()
    def deliver_everything(self) -> None:
        """The stream catches up (lets heals and recounts meet settled counters too)."""
        STATS["catch_ups"] += 1
        for _ in range(10):
            self._pull()
            if not self.undelivered:
                return
            batch = self.undelivered[:100]
            self._settle(batch, self._apply(batch, None))

    @rule(data=st.data())
    def deliver_shuffled(self, data: st.DataObject) -> None:
        self._pull()
        if not self.undelivered:
            return
        rng = random.Random(data.draw(st.integers(0, 2**16)))
        batch = rng.sample(self.undelivered, min(len(self.undelivered), rng.randint(1, 8)))
        STATS["shuffled_deliveries"] += 1
        self._settle(batch, self._apply(batch, None))

    @precondition(lambda self: self.delivered)
    @rule(data=st.data())
    def deliver_duplicates(self, data: st.DataObject) -> None:
        rng = random.Random(data.draw(st.integers(0, 2**16)))
        batch = rng.sample(self.delivered, min(len(self.delivered), rng.randint(1, 6)))
        STATS["duplicate_deliveries"] += 1
        assert self._apply(batch, None) == []

    @rule(size=st.integers(1, 10))
    def two_workers_on_one_batch(self, size: int) -> None:
        self._pull()
        batch = self.undelivered[:size]
        if not batch:
            return
        results: list[list[str]] = []

        def work() -> None:
            counter = EventualCounter(self.world.settings.table_name, "batched", self.world.clients)
            results.append(process_stream_batch(batch, counter).failed_sequence_numbers)

        threads = [threading.Thread(target=work) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        STATS["two_worker_deliveries"] += 1
        self._settle(batch, sorted(set(results[0]) | set(results[1])))

    @rule(size=st.integers(2, 10), survive=st.integers(0, 5))
    def worker_dies_mid_batch(self, size: int, survive: int) -> None:
        self._pull()
        batch = self.undelivered[:size]
        if not batch:
            return
        ops = [op for _, op in ops_from_records(batch)]
        dying = EventualCounter(self.world.settings.table_name, "per_record", self.world.clients)
        dying.apply(ops[: min(survive, len(ops))])  # then the process is gone: nothing reported
        STATS["worker_deaths"] += 1

    @precondition(lambda self: self.retry_queue)
    @rule(fault=st.sampled_from([None, "conflict-all"]))
    def retry_queue_pass(self, fault: str | None) -> None:
        remaining = []
        for record, receives in self.retry_queue:
            try:
                if fault is None:
                    self.replayer.replay(record)
                else:
                    with injected(
                        self.world.clients.dynamodb,
                        "TransactWriteItems",
                        error="TransactionCanceledException",
                        times=100,
                    ):
                        self.replayer.replay(record)
                STATS["retry_queue_replays_ok"] += 1
            except ReplayFailed:
                STATS["retry_queue_replays_failed"] += 1
                if receives + 1 >= MAX_RECEIVES:
                    self.operator_queue.append(record)
                else:
                    remaining.append((record, receives + 1))
        self.retry_queue = remaining

    @rule(account=st.integers(0, 1), task=st.sampled_from(["sweep", "heal", "recount"]))
    def maintenance(self, account: int, task: str) -> None:
        """What the scheduled sweeper (sweep, then heal) and operators (recount) do, at any time."""
        if task == "sweep":
            self.sweeper.sweep()
        elif task == "heal":
            STATS["heals"] += self.healer.heal_account(self.accounts[account]).healed
        else:
            self.recounter.recount(self.accounts[account], fix=True)
        STATS[f"maintenance:{task}"] += 1

    # ---- invariants ----------------------------------------------------------------------------
    @invariant()
    def counters_never_overcount_and_count_once(self) -> None:
        for account in self.accounts:
            best_effort, eventual, _ = self._counters(account)
            census = self._census(account)
            assert 0 <= best_effort <= census.visible, (account, best_effort, census)
            # eventual counts what the stream counted and no release took out (a claimed resource
            # whose release applied but whose removal failed is visible yet released)
            assert census.counted_live <= eventual <= census.counted_visible, (account, eventual, census)
            # The limit holds exactly, except for one create per admission whose outcome stayed unknown.
            assert census.visible <= self.limit + self.overshoot_allowance[account], (
                account,
                census,
                self.limit,
            )

    def teardown(self) -> None:
        # Drain: the mapping redelivers everything, the retry queue is replayed, the sweeper
        # finishes what the operator queue holds, as the operator's replay would.
        for _ in range(20):
            self._pull()
            if not self.undelivered:
                break
            batch = self.undelivered[:100]
            self._settle(batch, process_stream_batch(batch, self.counter).failed_sequence_numbers)
        for record, _ in self.retry_queue:
            self.replayer.replay(record)
        for record in self.operator_queue:
            self.replayer.replay(record)
        # Everything delivered: only creates whose admission outcome stayed unknown may still wait
        # (for the sweeper), and no released resource may be left. A stream path that dropped
        # work would hide behind the sweeper otherwise.
        waiting = [self._census(account) for account in self.accounts]
        assert sum(c.uncounted_live for c in waiting) <= self.unadmitted, (waiting, self.unadmitted)
        self.clock += self.world.settings.pending_grace_seconds + 1
        for acct, rid in self.to_retry:
            try:
                self.service.delete(acct, rid)
            except NotFound:
                STATS["retried_delete:NotFound"] += 1
        self.sweeper.sweep()
        self._pull()
        batch, self.undelivered = self.undelivered, []
        assert process_stream_batch(batch, self.counter).failed_sequence_numbers == []
        for account in self.accounts:
            self.healer.heal_account(account)
            best_effort, eventual, item = self._counters(account)
            census = self._census(account)
            assert census.deleting == 0, (account, census)
            assert eventual == census.visible == census.counted_visible, (account, eventual, census)
            assert best_effort == eventual, (account, best_effort, eventual)
            assert item_size(item) < 1024
        STATS["examples"] += 1


@pytest.mark.timeout(1800)
def test_counters_hold_under_random_schedules_and_faults(settings, clients, stream):
    CountingSystem.world = World(settings, clients, stream)
    run_state_machine_as_test(
        CountingSystem,
        settings=settings_for_profile(),
    )
    print(f"\nstateful profile {PROFILE}: {dict(sorted(STATS.items()))}")


def settings_for_profile() -> hypothesis_settings:
    return hypothesis_settings(
        max_examples=PROFILE["max_examples"],
        stateful_step_count=PROFILE["stateful_step_count"],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
