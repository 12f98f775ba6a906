"""Recount an account from its resource items and fix its counters, under any traffic.

The truth is in the table: ``eventual`` must equal the resources the stream path counted that
no delete has released (with no delete in flight: the counted live ones), and ``best_effort``
must not exceed the resources holding a slot (pending, live or claimed). A census of 10^5 items
takes seconds, during which traffic moves both, so the account is recounted one *range* at a
time (keys.py: 16 ranges, each contiguous in the partition): the counter item keeps each range's
share of both counters and a version that every write changing them bumps. A range's census is
taken between two reads of its version; if the version did not move and no delete of the range
was in flight, the census and the shares are of the same instant, and the difference is that
range's drift. Normal traffic leaves a drift unchanged (every write changes the share and the
census alike), so the fix is a conditional delta on that range alone, applied only if the
version is still the one seen. A busy range is simply tried again; the chance that a range of
n/16 resources sees no write during its census is what makes this converge where a census of the
whole account fenced by one version could not. Progress is per range: a run cut off is resumed
from its continuation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import Clients
from hybrid_counter.counters import CounterStore
from hybrid_counter.counters.corrections import correct_range, fix_totals
from hybrid_counter.counting.eventual import EventualCounter
from hybrid_counter.counting.ops import ops_for_item
from hybrid_counter.effects import Effects
from hybrid_counter.errors import DomainError
from hybrid_counter.healing import Healer
from hybrid_counter.keys import DEFAULT_KIND, all_ranges, counter_key
from hybrid_counter.resources.census import CensusTaker, RangeCensus
from hybrid_counter.resources.repairs import Repairs

if TYPE_CHECKING:
    from hybrid_counter.observability import Observability


class HasRepairs(Protocol):
    """What the recount and the audit need of the API path's service: its repairs."""

    @property
    def repairs(self) -> Repairs: ...


MAX_ATTEMPTS = 20


@dataclass
class RangeResult:
    range_id: str
    best_effort: int = 0
    eventual: int = 0
    census: RangeCensus = field(default_factory=RangeCensus)
    settled: bool = False  # a census of one instant was taken
    attempts: int = 0

    @property
    def eventual_drift(self) -> int:
        return self.census.eventual_drift(self.eventual)

    @property
    def best_effort_excess(self) -> int:
        return self.census.best_effort_excess(self.best_effort)


@dataclass
class RecountReport:
    account_id: str
    kind: str = DEFAULT_KIND
    best_effort: int = 0
    eventual: int = 0
    best_effort_before: int = 0
    totals_mismatch: tuple[int, int] = (0, 0)  # each total minus the sum of its range shares
    ranges: list[RangeResult] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    continuation: str | None = None

    def to_json(self) -> dict[str, Any]:
        settled = [r for r in self.ranges if r.settled]
        live = sum(r.census.live for r in self.ranges)
        return {
            "account_id": self.account_id,
            "kind": self.kind,
            "best_effort": self.best_effort,
            "eventual": self.eventual,
            "live_resources": live,
            "counted_live_units": sum(r.census.counted_live for r in self.ranges),
            "pending_resources": sum(r.census.pending for r in self.ranges),
            "deleting_resources": sum(r.census.deleting for r in self.ranges),
            "eventual_drift": sum(r.eventual_drift for r in settled) + self.totals_mismatch[1],
            "best_effort_excess": sum(r.best_effort_excess for r in settled)
            + max(0, self.totals_mismatch[0]),
            "best_effort_deficit": max(
                0, sum(r.census.slot_units for r in self.ranges) - self.best_effort_before
            ),
            "totals_mismatch": {"best_effort": self.totals_mismatch[0], "eventual": self.totals_mismatch[1]},
            "ranges_unsettled": [r.range_id for r in self.ranges if not r.settled],
            "census_attempts": sum(r.attempts for r in self.ranges),
            "actions": self.actions,
            "continuation": self.continuation,
        }


class Recounter:
    def __init__(
        self,
        table_name: str,
        counters: CounterStore,
        counter: EventualCounter,
        healer: Healer,
        clients: Clients,
        *,
        service: HasRepairs | None = None,
        grace_seconds: float = 300,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = MAX_ATTEMPTS,
        repairs: Repairs | None = None,
        obs: Observability | None = None,
    ) -> None:
        self._table = table_name
        self._counters = counters
        self._counter = counter
        self._healer = healer
        self._clients = clients
        self._grace = grace_seconds
        self._clock = clock
        self._sleep = sleep
        self._attempts = attempts
        self._censuses = CensusTaker(table_name, clients, grace_seconds=grace_seconds, clock=clock)
        # Finishes deletes and rolls back creates stuck past the grace period, each on the
        # incarnation the census read (resources/repairs.py).
        self._repairs = repairs or (
            service.repairs
            if service is not None
            else Repairs.on(table_name, clients, counters, grace_seconds, Effects(clock=clock), obs=obs)
        )

    def kinds_of(self, account_id: str) -> list[str]:
        """Every kind the account has a counter item for."""
        return sorted(self._counters.read_all(account_id))

    def recount(
        self,
        account_id: str,
        *,
        fix: bool,
        finish_older_than: float | None = None,
        continuation: str | None = None,
        until: Callable[[], bool] | None = None,
        kind: str | None = None,
    ) -> RecountReport:
        kind = kind or self._counters.default_kind
        report = RecountReport(account_id, kind)
        first_read = self._counters.read(account_id, kind=kind)
        report.best_effort_before = first_read.best_effort
        report.totals_mismatch = first_read.totals_mismatch()
        if fix and report.totals_mismatch != (0, 0):
            self._fix_totals(account_id, kind, report.actions)
        ranges = all_ranges()
        first = int(json.loads(continuation)["range"]) if continuation else 0
        for index in range(first, len(ranges)):
            if until is not None and until():
                report.continuation = json.dumps({"range": index})
                break
            result = self._recount_range(
                account_id,
                kind,
                ranges[index],
                fix,
                finish_older_than=finish_older_than,
                actions=report.actions,
            )
            report.ranges.append(result)
        if fix and report.continuation is None:
            healed = self._healer.heal_account(account_id, kind=kind)
            if healed.healed:
                report.actions.append(
                    f"best_effort {healed.best_effort_before} -> {healed.eventual} (healed)"
                )
        state = self._counters.read(account_id, kind=kind)
        report.best_effort, report.eventual = state.best_effort, state.eventual
        return report

    @property
    def repairs(self) -> Repairs:
        return self._repairs

    def recount_range(
        self, account_id: str, range_id: str, *, fix: bool, kind: str | None = None
    ) -> tuple[RangeResult, list[str]]:
        """One range on its own (what a recount request asks for): its census, and with ``fix``
        its correction and the repairs of what died in it. Returns the result and the actions."""
        actions: list[str] = []
        kind = kind or self._counters.default_kind
        return self._recount_range(
            account_id, kind, range_id, fix, finish_older_than=None, actions=actions
        ), actions

    def _recount_range(
        self,
        account_id: str,
        kind: str,
        range_id: str,
        fix: bool,
        *,
        finish_older_than: float | None,
        actions: list[str],
    ) -> RangeResult:
        result = RangeResult(range_id)
        for attempt in range(1, self._attempts + 1):
            result.attempts = attempt
            before = self._counters.read(account_id, kind=kind).share(range_id)
            census = self.census(account_id, range_id, kind=kind)
            if fix and self._finish(census, finish_older_than, actions):
                continue  # the range changed: take its census again
            after = self._counters.read(account_id, kind=kind).share(range_id)
            result.best_effort, result.eventual, result.census = before.best_effort, before.eventual, census
            stuck = [
                d
                for d in census.in_flight
                if self._stale(
                    d, "deleting_since" if d in census.deleting_items else "resizing_since", self._grace
                )
            ]
            if stuck and not fix:
                actions.append(
                    f"range {range_id}: {len(stuck)} delete(s) or resize(s) stuck for longer than the grace period"
                )
                return result  # whether their counter writes applied is unknown: --fix finishes them
            if after.version != before.version or census.in_flight:
                self._sleep(min(0.02 * attempt, 0.2))  # a write landed, or a delete or resize is in flight
                continue
            result.settled = True
            if fix and (result.eventual_drift or result.best_effort_excess):
                if not self._correct(account_id, kind, range_id, result, after.version):
                    result.settled = False
                    continue
                actions.append(
                    f"range {range_id}: eventual {-result.eventual_drift:+d}, best_effort {-result.best_effort_excess:+d}"
                )
            if fix and census.dead_items:  # the range holds nothing for them now
                finished = self._repairs.dead_claims.finish(census.dead_items)
                actions.append(f"range {range_id}: finished {finished} delete(s) left to the census")
            elif census.dead_items:
                actions.append(
                    f"range {range_id}: {len(census.dead_items)} delete(s) left to the census "
                    "(--fix corrects the range and finishes them)"
                )
            left = census.stale_pending_items
            if fix:
                self._roll_back(account_id, left, actions)  # their slots are released: now remove them
            elif left:
                actions.append(
                    f"range {range_id}: {len(left)} create(s) left pending longer than the grace period "
                    "(--fix releases what the counter holds for them, then removes them)"
                )
            return result
        return result

    def _stale(self, item: dict[str, Any], attribute: str, older_than: float) -> bool:
        return self._censuses.stale(item, attribute, older_than)

    def census(self, account_id: str, range_id: str, *, kind: str | None = None) -> RangeCensus:
        return self._censuses.census(account_id, range_id, kind=kind or self._counters.default_kind)

    def _finish(self, census: RangeCensus, count_older_than: float | None, actions: list[str]) -> bool:
        """Finish the deletes claimed longer ago than the grace period (the takeover a retried
        DELETE does), roll back the creates left pending longer than that, and, with
        ``count_older_than``, count the live uncounted resources created before then (what the
        stream path would have done). Each repair acts only on the incarnation the census read.
        True when something changed."""
        changed = False
        if count_older_than is not None:
            ops = [
                op
                for item in census.uncounted_items
                if self._stale(item, "created_at", count_older_than)
                for op in ops_for_item(item)
            ]
            if ops:
                applied = self._counter.apply(ops)
                actions.append(f"counted {applied.counted} resources the stream path had not")
                changed = applied.counted > 0
        # (not the claims left to this census: finished once the range is corrected, below)
        for item in census.claims_in_flight + census.released_items:
            account_id, resource_id = str(item["account_id"]["S"]), str(item["resource_id"]["S"])
            try:
                finished = self._repairs.finish_stale_delete(account_id, resource_id, item)
            except DomainError as error:
                actions.append(f"could not finish the delete of {resource_id}: {error}")
                continue
            if finished:
                actions.append(f"finished the delete of {resource_id}")
                changed = True
        for item in census.resizing_items:
            account_id, resource_id = str(item["account_id"]["S"]), str(item["resource_id"]["S"])
            try:
                ended = self._repairs.settle_stale_resize(account_id, resource_id, item)
            except (ClientError, BotoCoreError) as error:
                actions.append(f"could not end the resize of {resource_id}: {error!r}")
                continue
            if ended:
                actions.append(f"ended the resize of {resource_id}, whose request died")
                changed = True
        return changed

    def _roll_back(self, account_id: str, stale: list[dict[str, Any]], actions: list[str]) -> None:
        """Remove creates left pending, once the range's best-effort share no longer counts them."""
        for item in stale:
            resource_id = str(item["resource_id"]["S"])
            try:
                if self._repairs.roll_back_stale_pending(account_id, resource_id, item):
                    actions.append(f"rolled back the create of {resource_id} left pending")
            except (ClientError, BotoCoreError) as error:
                # Still pending, no longer counted: a PUT may adopt it, TTL removes it.
                actions.append(f"could not roll back {resource_id}: {error!r}")

    def _fix_totals(self, account_id: str, kind: str, actions: list[str]) -> None:
        fixed = fix_totals(
            self._clients,
            self._table,
            counter_key(account_id, kind=kind),
            lambda: self._counters.read(account_id, kind=kind),
            attempts=self._attempts,
        )
        if fixed is None:
            actions.append("could not fix the totals: heals kept landing; run again")
        elif fixed == (0, 0):
            actions.append("totals already back to the sums of their shares (a heal fixed them)")
        else:
            actions.append(
                f"totals back to the sums of their shares: best_effort {fixed[0]:+d}, eventual {fixed[1]:+d}"
            )

    def _correct(self, account_id: str, kind: str, range_id: str, result: RangeResult, version: int) -> bool:
        deltas = (-result.best_effort_excess, -result.eventual_drift)
        return correct_range(
            self._clients, self._table, counter_key(account_id, kind=kind), range_id, deltas, version=version
        )
