"""Events when an (account, kind)'s use crosses a threshold of its limit: exactly one per crossing.

``used`` is max(best_effort, eventual), in units; a threshold t (``UsageThresholds``, percent of
the effective limit) is *reached* when used >= t% of the limit and *cleared* again only when
used falls below (t - h)% (``ThresholdHysteresisPercent``), so use that hovers around t makes no
storm of events. Which thresholds are reached is state on the kind's counter item
(``alert_reached``, a bit per threshold) with a count of transitions (``alert_seq``).

The stream path sees every write to a counter item. For each counter item in a batch it replays
the images of its records in order against that state, and when one moves it, writes the move
in one transaction: the counter item's new state, conditional on ``alert_seq`` being the one it
moved from, and one event item per threshold crossed (the outbox, publisher.py), keyed by the new
``alert_seq``. A record delivered twice, by two workers, bisected, retried or replayed later
finds ``alert_seq`` moved on: its transaction is refused and it judges the item as it is now, so
a crossing is recorded once, and its event id (account, kind, transition, threshold) is the same
however often it is published. Then the events are published and taken off the outbox; a
PutEvents that fails leaves them for the sweeper, and never fails the batch.

A split organization (counters/split.py) has no item that holds its use: a batch that wrote any
of its shards judges it once, on its shards summed as they are then, with its state on an item
of its own (``ALERT#<kind>``, design.md §10.7a).

What counts as a crossing is what the counter item's writes show: use that crosses a threshold
and comes back between two writes of the item shows none. A plan's limits changing moves no
counter item (a plan may hold a million accounts): the accounts it moves across a threshold are
judged on their next counter write; an override change is a counter write, judged at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import error_code
from hybrid_counter.counters import CounterState, Judged
from hybrid_counter.counters.split import Shard, ShardSet
from hybrid_counter.counters.state import ALLOWANCE, REBASING
from hybrid_counter.errors import InProgress
from hybrid_counter.governance.publisher import OUTBOX, THRESHOLD_CLEARED, THRESHOLD_REACHED, OutboxEvent
from hybrid_counter.governance.usage_over import (
    OVER_ALL,
    OVER_KIND,
    OVER_LIMIT,
    OVER_SINCE,
    OVER_USED,
    highest_reached,
    index_update,
)
from hybrid_counter.keys import (
    COUNTER_PREFIX,
    ORG_PREFIX,
    account_pk,
    counter_key,
    iso_utc,
    org_alert_key,
    org_counter_key,
    org_key,
    org_pk,
    parse_account_pk,
    parse_counter_sk,
    parse_org_counter_sk,
    parse_org_pk,
    pending_shard,
)
from hybrid_counter.orgs.counters import creation_in, org_counter_items, org_is, org_lives

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.governance.changes import LimitChanges
    from hybrid_counter.observability import Observability
    from hybrid_counter.plans import Limits

ACCOUNT, ORGANIZATION = "account", "organization"  # whose counter item: an event's scope
ALERT_REACHED = "alert_reached"
ALERT_SEQ = "alert_seq"
RETRYABLE = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)
ATTEMPTS = 5


@dataclass(frozen=True)
class Thresholds:
    percents: tuple[int, ...] = (80, 100)
    hysteresis: int = 5

    def reached(self, previous: int, used: int, limit: int) -> int:
        """The thresholds reached (a bit each) once ``used`` is seen, coming from ``previous``."""
        mask = previous
        for index, percent in enumerate(self.percents):
            bit = 1 << index
            if limit <= 0:  # a kind the plan does not include: any use is over it
                at, below = used > 0, used <= 0
            else:
                at = used * 100 >= percent * limit
                below = used * 100 < (percent - self.hysteresis) * limit
            if not mask & bit and at:
                mask |= bit
            elif mask & bit and below:
                mask &= ~bit
        return mask


@dataclass(frozen=True)
class Image:
    """What one write left on a counter item: its counts, its override, its alert state.
    ``account_id`` is the owner: an account, or (``scope`` organization) an organization."""

    account_id: str
    kind: str
    state: CounterState
    reached: int
    seq: int
    scope: str = ACCOUNT
    # a split organization's (its shards summed): its state lives on an item of its own, which
    # ``fresh`` says does not exist yet (its first state is the one shard 0 had before the split)
    split: bool = False
    fresh: bool = False
    # an organization's: the creation of its id whose counter this is (its epoch_base, read from
    # the counter's mark or its shards' epochs; None if they do not say, and for an account). Its
    # events are numbered from there, so an organization created again under the id, whose
    # alert state starts over, never repeats an event id (nor the key of an EVENT# item the log
    # still keeps); and it is judged, and its state moved, only while that creation lives
    creation: int | None = None

    @property
    def key(self) -> dict[str, dict[str, str]]:
        if self.split:
            return org_alert_key(self.account_id, self.kind)
        return owner_key(self.account_id, self.kind, self.scope)

    @classmethod
    def of(cls, account_id: str, kind: str, item: Mapping[str, Any], scope: str = ACCOUNT) -> Image:
        state = CounterState.from_item(item)
        reached = int(item.get(ALERT_REACHED, {}).get("N", "0"))
        seq = int(item.get(ALERT_SEQ, {}).get("N", "0"))
        # (an account's counter item carries its membership's org_epoch: not its own creation)
        creation = state.org_epoch if scope == ORGANIZATION else None
        return cls(account_id, kind, state, reached, seq, scope, creation=creation)


def owner_key(owner: str, kind: str, scope: str) -> dict[str, dict[str, str]]:
    return counter_key(owner, kind=kind) if scope == ACCOUNT else org_counter_key(owner, kind=kind)


def counter_images(
    records: Sequence[Mapping[str, Any]], split: set[tuple[str, str]] | None = None
) -> dict[tuple[str, str, str], list[Image]]:
    """The new images of the counter items' records, per (scope, owner, kind), in record order:
    accounts' counter items and organizations' (ORG#). A split organization's shards have no
    image of the whole: its (organization, kind) goes into ``split`` instead."""
    found: dict[tuple[str, str, str], list[Image]] = {}
    for raw in records:
        record = DynamoDBRecord(dict(raw))
        stream = record.dynamodb
        if stream is None or record.raw_event.get("eventName") not in ("INSERT", "MODIFY"):
            continue
        keys = raw["dynamodb"].get("Keys", {})
        sk = str(keys.get("sk", {}).get("S", ""))
        if not sk.startswith(COUNTER_PREFIX) or "NewImage" not in raw["dynamodb"]:
            continue
        pk = str(keys["pk"]["S"])
        if pk.startswith(ORG_PREFIX):
            kind, shard = parse_org_counter_sk(sk)
            image = raw["dynamodb"]["NewImage"]
            if shard or "allowance" in image or "rebasing" in image:
                # A shard holds a part of the use: the organization is judged on them all
                if split is not None:
                    split.add((parse_org_pk(pk), kind))
                continue
            owner, scope = parse_org_pk(pk), ORGANIZATION
        else:
            owner, kind, scope = parse_account_pk(pk), parse_counter_sk(sk), ACCOUNT
        found.setdefault((scope, owner, kind), []).append(
            Image.of(owner, kind, raw["dynamodb"]["NewImage"], scope)
        )
    return found


class CrossingNotRecorded(RuntimeError):
    """A counter item's crossing could not be recorded (the store refused, not the condition)."""

    def __init__(self, account_id: str, kind: str, cause: Exception) -> None:
        super().__init__(f"could not record a threshold crossing of {account_id}/{kind}: {cause!r}")
        self.account_id = account_id
        self.kind = kind


class ThresholdWatcher:
    def __init__(
        self,
        table_name: str,
        thresholds: Thresholds,
        *,
        limits: Limits,
        changes: LimitChanges,
        clients: Clients,
        obs: Observability,
        enabled: bool,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = table_name
        self._thresholds = thresholds
        self._limits = limits
        self._changes = changes  # publishes the outbox
        self._clients = clients
        self._obs = obs
        self._enabled = enabled
        self._clock = clock
        self._sleep = sleep

    def observe(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Judge every counter item these records wrote; returns the events published. Raises
        (the batch is then retried) only when a crossing could not be recorded."""
        if not self._enabled:
            return 0
        published = 0
        split: set[tuple[str, str]] = set()
        for (scope, account_id, kind), images in counter_images(records, split).items():
            try:
                published += self._follow(account_id, kind, images, scope)
            except (ClientError, BotoCoreError) as error:
                raise CrossingNotRecorded(account_id, kind, error) from error
        for org_id, kind in sorted(split):
            # one read of its shards a batch: its use as it is now, not as each write left it
            try:
                image = self._split_image(org_id, kind)
                published += self._follow(org_id, kind, [image], ORGANIZATION) if image else 0
            except (ClientError, BotoCoreError) as error:
                raise CrossingNotRecorded(org_id, kind, error) from error
        return published

    def _follow(self, account_id: str, kind: str, images: list[Image], scope: str = ACCOUNT) -> int:
        judge = (self._limits.judge if scope == ACCOUNT else self._limits.org_judge)(account_id, kind)
        reached, seq = images[0].reached, images[0].seq
        events: list[OutboxEvent] = []
        for image in images:
            if image.seq > seq:  # another worker moved the state before this write
                reached, seq = image.reached, image.seq
            moved = self._move(image, judge(image.state), reached, seq)
            if moved is None:  # refused: the state moved on elsewhere; judge the item as it is now
                now = (
                    self._split_image(account_id, kind)
                    if image.split
                    else self._current(account_id, kind, scope)
                )
                moved = self._move(now, judge(now.state), now.reached, now.seq) if now else None
                if moved is not None:
                    events += moved[2]
                break
            reached, seq, crossed = moved
            events += crossed
        return self._changes.publish(events) if events else 0

    def _move(
        self, image: Image, judged: Judged, reached: int, seq: int
    ) -> tuple[int, int, list[OutboxEvent]] | None:
        """Record the crossings ``image`` shows from (reached, seq): the new (reached, seq) and
        the events to publish; the same if none; None if the item's state was no longer that."""
        used = image.state.used
        target = self._thresholds.reached(reached, used, judged.limit)
        if target == reached and not image.fresh:
            return reached, seq, []
        # (a split organization's first judgement writes its ALERT# item even with no crossing:
        # it takes over the near-limit row shard 0 had, _split_image)
        events = [
            self._event(image, judged, seq + 1, percent, reached_now=bool(target & (1 << index)))
            for index, percent in enumerate(self._thresholds.percents)
            if (target ^ reached) & (1 << index)
        ]
        if not self._transition(image, seq, target=target, events=events, limit=judged.limit):
            return None
        self._obs.count("ThresholdCrossings", len(events))
        return target, seq + 1, events

    def _event(
        self, image: Image, judged: Judged, seq: int, percent: int, *, reached_now: bool
    ) -> OutboxEvent:
        owner = image.account_id if image.scope == ACCOUNT else f"org:{image.account_id}"
        number = (image.creation or 0) + seq
        event_id = f"{owner}/{image.kind}/{number}/{percent}/{'reached' if reached_now else 'cleared'}"
        whose = {"account_id": image.account_id} if image.scope == ACCOUNT else {"org_id": image.account_id}
        detail = {
            "event_id": event_id,
            "scope": image.scope,
            **whose,
            "kind": image.kind,
            "threshold": percent,
            "used": image.state.used,
            "limit": judged.limit,
            "limit_source": judged.source,
            "time": iso_utc(self._clock()),
        }
        pk = account_pk(image.account_id) if image.scope == ACCOUNT else org_pk(image.account_id)
        # (a split organization's outbox items apart from its counter item's, which a record from
        # before the split may still move: the two never write one key)
        split = "split#" if image.split else ""
        key = {"pk": {"S": pk}, "sk": {"S": f"EVENT#{image.kind}#{split}{number:012d}#{percent}"}}
        return OutboxEvent(THRESHOLD_REACHED if reached_now else THRESHOLD_CLEARED, detail, key)

    def _transition(
        self, image: Image, seq: int, target: int, events: list[OutboxEvent], *, limit: int
    ) -> bool:
        """One transaction: the counter item's new state (conditional on the state it moves
        from), with its place in the near-limit indexes (usage_over.py), and the events' outbox
        items; an organization's, with a check that it is there and not being deleted (a
        judgement that lands after DELETE /orgs read its items would write them back: design.md
        §10.2). False if the state was no longer that, or the organization is gone."""
        exists = seq and not image.fresh
        condition = f"{ALERT_SEQ} = :seq" if exists else f"attribute_not_exists({ALERT_SEQ})"
        if image.scope == ORGANIZATION and not image.split:
            # the organization's one item, still: a record from before its split, delivered late,
            # moves nothing there (its state lives on ALERT# since; shard 0's moved again listed
            # it twice and announced a crossing twice; review 40): refused, judged on the sum
            condition += f" AND attribute_not_exists({ALLOWANCE}) AND attribute_not_exists({REBASING})"
        values: dict[str, Any] = {":reached": {"N": str(target)}, ":next": {"N": str(seq + 1)}}
        if exists:
            values[":seq"] = {"N": str(seq)}
        key = image.key  # (a split organization's: its ALERT# item)
        over = index_update(
            str(key["pk"]["S"]),
            image.kind,
            highest_reached(target, self._thresholds.percents),
            since=str(events[0].detail["time"]) if events else iso_utc(self._clock()),
            used=image.state.used,
            limit=limit,
        )
        values |= over.values
        expression = ", ".join((f"{ALERT_REACHED} = :reached", f"{ALERT_SEQ} = :next", *over.sets))
        expression = f"SET {expression}" + (f" REMOVE {', '.join(over.removes)}" if over.removes else "")
        actions: list[Any] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": key,
                    "UpdateExpression": expression,
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        org_check = image.scope == ORGANIZATION
        for event in events:
            actions.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            **event.key,
                            OUTBOX: {"S": event.text()},
                            "pending_shard": {
                                "S": pending_shard(image.account_id, event.event_id, kind="event")
                            },
                            "pending_since": {"S": str(event.detail["time"])},
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        if org_check:
            # the creation the image is of: a record of a deleted one, delivered again (or judged
            # late) once the id was created again, moves nothing of the new one's (review 34)
            named = org_is(image.creation) if image.creation is not None else ("", {})
            actions.append(org_lives(self._table, image.account_id, *named))
        delay = 0.05
        for attempt in range(ATTEMPTS):
            try:
                self._clients.dynamodb.transact_write_items(TransactItems=actions)
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
                if org_check and len(reasons) == len(actions) and reasons[-1] == "ConditionalCheckFailed":
                    return self._org_gone(image)
                if reasons and reasons[0] == "ConditionalCheckFailed":
                    return False
                if not any(reason in RETRYABLE for reason in reasons) or attempt == ATTEMPTS - 1:
                    raise
                self._sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            return True
        return False

    def _org_gone(self, image: Image) -> bool:
        """The organization refused a transition: gone, or another creation of its id than the
        image's (nothing of this one to judge: False; the item read again is the new one's, or
        not there), or being deleted (judged again once the deletion is done or refused: the
        batch is retried)."""
        org = self._clients.dynamodb.get_item(
            TableName=self._table, Key=org_key(image.account_id), ConsistentRead=True
        ).get("Item")
        if org is not None and "deleting" in org:
            cause = InProgress(f"organization {image.account_id} is being deleted")
            raise CrossingNotRecorded(image.account_id, image.kind, cause)
        return False

    def _current(self, account_id: str, kind: str, scope: str = ACCOUNT) -> Image | None:
        """The item as it is now. An organization's split since the record was written: its
        shards summed, as a split organization is judged (shard 0 alone is a part of its use:
        judged alone, it announced a crossing back and forth the use never made)."""
        item = self._clients.dynamodb.get_item(
            TableName=self._table, Key=owner_key(account_id, kind, scope), ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        if scope == ORGANIZATION and ("allowance" in item or "rebasing" in item):
            return self._split_image(account_id, kind)
        return Image.of(account_id, kind, dict(item), scope)

    def _split_image(self, org_id: str, kind: str) -> Image | None:
        """A split organization's use of ``kind`` (its shards summed, one consistent Query) with
        the thresholds it has reached (its alert item; before the first crossing since the split,
        what shard 0 had reached unsplit, so a crossing from before is not announced again)."""
        stored = org_counter_items(self._clients, self._table, org_id).get(kind)
        if stored is None:
            return None
        shards = ShardSet({n: Shard(n, CounterState.from_item(item)) for n, item in stored.items()})
        creation = creation_in(shards)
        alert = self._clients.dynamodb.get_item(
            TableName=self._table, Key=org_alert_key(org_id, kind), ConsistentRead=True
        ).get("Item")
        source = alert
        if source is None:
            source = stored.get(0, {})  # shard 0 as the same Query read it
            if OVER_KIND in source:
                self._unlist_shard_zero(org_id, kind)
        # (the sum named by its creation: judged by that creation's plan, not a cached one's)
        total = shards.total() if creation is None else replace(shards.total(), org_epoch=creation)
        return Image(
            org_id,
            kind,
            total,
            int(source.get(ALERT_REACHED, {}).get("N", "0")),
            int(source.get(ALERT_SEQ, {}).get("N", "0")),
            ORGANIZATION,
            split=True,
            fresh=alert is None,
            creation=creation,
        )

    def _unlist_shard_zero(self, org_id: str, kind: str) -> None:
        """Shard 0's near-limit row, from before the split, leaves the indexes before the ALERT#
        item's first write lists the organization again (the other order, cut short by a crash,
        would list it twice for good; this one, at worst, not at all until its next batch). Its
        condition: shard 0 split, or frozen by the first rebase and not laid out yet (review 79:
        only split, refused then, and the ALERT# item listed it beside that row for good); a frozen
        item only becomes split, or leaves with its organization, which the condition never
        writes back."""
        try:
            self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=org_counter_key(org_id, kind=kind),
                UpdateExpression=f"REMOVE {OVER_KIND}, {OVER_ALL}, {OVER_SINCE}, {OVER_USED}, {OVER_LIMIT}",
                ConditionExpression="attribute_exists(allowance) OR attribute_exists(rebasing)",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
