"""Single-item writes on resource items, each conditional on the state it moves the item from.

Every one is idempotent by its condition, so botocore may retry it after a lost response; a
condition failure returns the item as it is now (ReturnValuesOnConditionCheckFailure), which is
how a flow recognises its own earlier write and how it learns what another flow did. Every
method takes the resource's kind (its key and its counter item are the kind's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, error_code, retry_conflicts, store_error
from hybrid_counter.effects import Effects
from hybrid_counter.keys import DEFAULT_KIND, iso_utc, resource_key
from hybrid_counter.resources.items import DELETING, LIVE, PENDING, epoch_number, pending_index
from hybrid_counter.resources.items import kind_of as items_kind
from hybrid_counter.resources.items import since as items_since

Item = dict[str, Any]
NOT_RESIZING = "attribute_not_exists(resize_request)"
# Into the PendingIndex, unless already there (its first date kept).
INDEXED = (
    "pending_shard = if_not_exists(pending_shard, :pending_shard), "
    "pending_since = if_not_exists(pending_since, :pending_since)"
)
RESIZE_FIELDS = "resize_request, resize_from, resize_to, resizing_since, org_resized, org_unresized, settling, settling_since"
# A resize's claim puts its item in the PendingIndex (one not yet counted has its entry already,
# for its count), so that the sweeper ends the resize if its request dies: one counted everywhere
# was in no index, and nothing but a retried request or an audit ever ended it (review 43: a
# hold's units, or a member's grow at its organization, held for good).
RESIZE_INDEXED = (
    "pending_shard = if_not_exists(pending_shard, :pending_shard), "
    "pending_since = if_not_exists(pending_since, :pending_since)"
)
COUNTED_EVERYWHERE = "counter_processed = :counted AND (attribute_not_exists(org) OR org_counted = :counted)"


def unindexed(write: dict[str, Any]) -> list[dict[str, Any]]:
    """A write that ends a resize (its update ends with a REMOVE), first as it also takes the item
    out of the PendingIndex, on condition that it is counted at every level (then the entry is
    the resize's own: nothing else needs it there), then as it is (the entry kept for a count)."""
    first = {
        **write,
        "UpdateExpression": f"{write['UpdateExpression']}, pending_shard, pending_since",
        "ConditionExpression": f"({write['ConditionExpression']}) AND {COUNTED_EVERYWHERE}",
        "ExpressionAttributeValues": {**write["ExpressionAttributeValues"], ":counted": {"BOOL": True}},
    }
    return [first, write]


@dataclass(frozen=True)
class Written:
    """A conditional write's result: ``item`` is None when it applied, else the item that refused it."""

    item: Item | None
    applied: bool


class ResourceTable:
    def __init__(self, table_name: str, clients: Clients, effects: Effects) -> None:
        self._table = table_name
        self._clients = clients
        self._effects = effects

    @property
    def name(self) -> str:
        return self._table

    @property
    def clients(self) -> Clients:
        return self._clients

    def get(self, account_id: str, resource_id: str, *, kind: str = DEFAULT_KIND) -> Item | None:
        response = self._clients.dynamodb.get_item(
            TableName=self._table, Key=resource_key(account_id, resource_id, kind=kind), ConsistentRead=True
        )
        return response.get("Item")

    def _write(self, call: Callable[[], Any]) -> Written:
        try:
            response = retry_conflicts(call, self._effects.retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return Written(dict(error.response.get("Item") or {}) or None, applied=False)  # type: ignore[call-overload]
        return Written(dict(response.get("Attributes") or {}) or None, applied=True)

    def _update(self, account_id: str, resource_id: str, kind: str, **kwargs: Any) -> Written:
        return self._write(
            lambda: self._clients.dynamodb.update_item(
                TableName=self._table,
                Key=resource_key(account_id, resource_id, kind=kind),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **kwargs,
            )
        )

    def _delete(self, account_id: str, resource_id: str, kind: str, **kwargs: Any) -> Written:
        return self._write(
            lambda: self._clients.dynamodb.delete_item(
                TableName=self._table,
                Key=resource_key(account_id, resource_id, kind=kind),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **kwargs,
            )
        )

    # ---- create -----------------------------------------------------------------------------
    def put_pending(self, item: Item) -> Written:
        return self._write(
            lambda: self._clients.dynamodb.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        )

    def move_org_shard(
        self, account_id: str, resource_id: str, incarnation: str, *, kind: str, was: int, to: int
    ) -> bool:
        """Before a pending member's admission is tried on another shard of its organization's
        split counter (the one it named was throttled: nothing applied there), the item names that
        shard instead, so whoever finishes or rolls back the create looks there. True once it does
        (this write, or botocore's resend of it after a lost response)."""
        written = self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression="SET org_shard = :to",
            ConditionExpression="incarnation = :inc AND #state = :pending AND attribute_not_exists(undoing) "
            "AND "
            + ("(attribute_not_exists(org_shard) OR org_shard = :was)" if was == 0 else "org_shard = :was"),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":inc": {"S": incarnation},
                ":pending": {"S": PENDING},
                ":was": {"N": str(was)},
                ":to": {"N": str(to)},
            },
        )
        found = written.item
        return written.applied or (
            found is not None
            and found.get("incarnation", {}).get("S") == incarnation
            and int(found.get("org_shard", {}).get("N", "0")) == to
        )

    def make_live(
        self, account_id: str, resource_id: str, incarnation: str, *, index: bool, kind: str = DEFAULT_KIND
    ) -> Written:
        """pending -> live. ``index``: also put it in the sweeper's PendingIndex (its admission
        outcome is unknown, so the stream path may never count it). Never a create being undone
        (``undoing``: its account refused it and its organization's admission is released, so
        neither level would hold it; review 35)."""
        values: dict[str, Any] = {":inc": {"S": incarnation}, ":pending": {"S": PENDING}}
        update = self._set_live(account_id, resource_id, kind, values, index=index)
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression=f"{update} REMOVE expires_at",
            ConditionExpression="incarnation = :inc AND #state = :pending AND attribute_not_exists(undoing)",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
        )

    def _set_live(
        self, account_id: str, resource_id: str, kind: str, values: dict[str, Any], *, index: bool
    ) -> str:
        """The SET clause that makes an item live, its values added to ``values``; with ``index``,
        the item also goes into the sweeper's PendingIndex."""
        values[":live"] = {"S": LIVE}
        if not index:
            return "SET #state = :live"
        values.update(pending_index(account_id, resource_id, self._effects.clock(), kind=kind))
        return "SET #state = :live, pending_shard = :pending_shard, pending_since = :pending_since"

    def roll_back(
        self, account_id: str, resource_id: str, incarnation: str, *, kind: str = DEFAULT_KIND
    ) -> Written:
        """Remove a pending item whose admission was refused (it never held a slot)."""
        return self._delete(
            account_id,
            resource_id,
            kind,
            ConditionExpression="incarnation = :inc AND #state = :pending",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":inc": {"S": incarnation}, ":pending": {"S": PENDING}},
        )

    def mark_undoing(self, account_id: str, resource_id: str, incarnation: str, *, kind: str) -> Written:
        """A pending create its account refused, whose organization's admission is undone: no
        longer counted there by the stream path, and in the PendingIndex, so the sweeper finishes
        the undoing if this request cannot (org_level.py). Applied: ``item`` as marked."""
        values: dict[str, Any] = {
            ":inc": {"S": incarnation},
            ":pending": {"S": PENDING},
            ":true": {"BOOL": True},
            **pending_index(account_id, resource_id, self._effects.clock(), kind=kind),
        }
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression="SET undoing = :true, pending_shard = :pending_shard, pending_since = :pending_since",
            ConditionExpression="incarnation = :inc AND #state = :pending AND attribute_not_exists(undoing)",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )

    def drop_undone(self, account_id: str, resource_id: str, incarnation: str, *, kind: str) -> Written:
        """Remove a create whose organization's admission has been undone (still pending: never
        a resource anyone was told exists)."""
        return self._delete(
            account_id,
            resource_id,
            kind,
            ConditionExpression="incarnation = :inc AND undoing = :true AND #state = :pending",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":inc": {"S": incarnation},
                ":true": {"BOOL": True},
                ":pending": {"S": PENDING},
            },
        )

    # ---- delete -----------------------------------------------------------------------------
    def claim(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        taking_over: str | None = None,
        incarnation: str | None = None,
        kind: str = DEFAULT_KIND,
        expiring: float | None = None,
    ) -> Written:
        """live -> deleting, owned by ``request_id`` (never while a resize is in flight: the
        resize owns the counters until it ends). With ``taking_over``: take a stale claim of that
        request over instead, only on the incarnation it was judged on (``incarnation``): a repair
        must never act on a resource created again under the same id since it read it. With
        ``expiring``: a hold's expiry (holds.py), only if ``incarnation`` is still the hold whose
        deadline that is and it is past by this process's clock (of a confirm and an expiry that
        race, exactly one applies); ``expired`` marks the claim, so a later confirm answers
        HoldExpired. Applied: ``item`` is the item as claimed (ALL_NEW)."""
        now = self._effects.clock()
        values: dict[str, Any] = {
            ":req": {"S": request_id},
            ":now": {"S": iso_utc(now)},
            ":deleting": {"S": DELETING},
        }
        update = "SET #state = :deleting, delete_request = :req, deleting_since = :now"
        if taking_over is None:
            # account_first: released at its account, then at its organization (delete.py); a
            # claim without it (made before) is finished the old way by the stream path
            update += ", account_first = :first"
            values[":first"] = {"BOOL": True}
            condition = f"#state = :live AND {NOT_RESIZING}"
            values[":live"] = {"S": LIVE}
            if expiring is not None:
                if incarnation is None:
                    raise ValueError("an expiry names the incarnation of the hold it expires")
                condition += " AND incarnation = :inc AND hold_until = :until AND hold_until <= :clock"
                # in the PendingIndex too: an expiry whose process dies after its claim leaves a
                # claim the sweeper takes over past the grace period, as any dead delete (the
                # HoldIndex passes over a claim; review 40: its units were held for good)
                update += (
                    ", expired = :true, expiry_request = :req,"
                    " pending_shard = :pending_shard, pending_since = :pending_since"
                )
                values |= {
                    ":inc": {"S": incarnation},
                    ":until": epoch_number(expiring),
                    ":clock": epoch_number(now),
                    ":true": {"BOOL": True},
                    **pending_index(account_id, resource_id, now, kind=kind),
                }
        else:
            if incarnation is None:
                raise ValueError("a takeover names the incarnation whose claim it takes over")
            # never a claim left to the census: only the census finishes it (dead_claims.py); taken
            # over, it would be seen again though its slot may be free already
            condition = (
                "#state = :deleting AND delete_request = :old AND incarnation = :inc "
                "AND (attribute_not_exists(left_to_census) OR left_to_census <> :old)"
            )
            values[":old"] = {"S": taking_over}
            values[":inc"] = {"S": incarnation}
            # on the claim: a lost response's resend, refused, still finds it was a takeover
            update += ", took_over = :old"
        if taking_over is None:
            update += " REMOVE took_over"
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )

    def confirm_hold(
        self, account_id: str, resource_id: str, *, kind: str, incarnation: str, until: float
    ) -> Written:
        """A hold made permanent: out of the HoldIndex, only if this incarnation is still live and
        still the hold that expires at ``until``, and that is still ahead by this process's clock,
        and no expiry has claimed it (``expired``, kept when that claim is reverted: a confirm may
        have been told HoldExpired by it; review 57)."""
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression="REMOVE hold_until, hold_account, hold_org",
            ConditionExpression="#state = :live AND incarnation = :inc AND hold_until = :until "
            "AND hold_until > :clock AND attribute_not_exists(expired)",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":live": {"S": LIVE},
                ":inc": {"S": incarnation},
                ":until": epoch_number(until),
                ":clock": epoch_number(self._effects.clock()),
            },
            ReturnValues="ALL_NEW",
        )

    def revert(
        self, account_id: str, resource_id: str, request_id: str, *, index: bool, kind: str = DEFAULT_KIND
    ) -> Written:
        """deleting -> live, when the claim's release was refused (nothing was released). An
        uncounted item goes to the PendingIndex: the stream path skipped it while it was claimed."""
        values: dict[str, Any] = {":req": {"S": request_id}, ":deleting": {"S": DELETING}}
        update = self._set_live(account_id, resource_id, kind, values, index=index)
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression=f"{update} REMOVE delete_request, deleting_since",
            ConditionExpression="#state = :deleting AND delete_request = :req",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
        )

    def hand_off(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        incarnation: str,
        kind: str = DEFAULT_KIND,
    ) -> Written:
        """A member's delete whose account's release applied and whose organization's was
        refused gives that release to the stream path (design.md §10.4): ``org_handoff = <its
        request>`` on its own claim. From this write on, the request never releases at the
        organization: the stream path does, with the removal, in one transaction conditional on
        this same claim."""
        return self._on_own_claim(
            account_id,
            resource_id,
            request_id,
            incarnation=incarnation,
            kind=kind,
            update="SET org_handoff = :req",
            values={},
        )

    def mark_account_released(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        incarnation: str,
        kind: str = DEFAULT_KIND,
    ) -> Written:
        """What the stream path notes from a member's account release (counting/eventual.py),
        written by a takeover that found that release in ``last_release``: hidden, out of the
        HoldIndex, in the PendingIndex."""
        return self._on_own_claim(
            account_id,
            resource_id,
            request_id,
            incarnation=incarnation,
            kind=kind,
            update=f"SET account_released = :true, {INDEXED} REMOVE hold_account",
            values={
                ":true": {"BOOL": True},
                **pending_index(account_id, resource_id, self._effects.clock(), kind=kind),
            },
        )

    def leave_to_census(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        incarnation: str,
        kind: str = DEFAULT_KIND,
        sweep_from: float,
    ) -> Written:
        """A takeover that cannot tell whether the dead delete's release at the account applied
        leaves that level to the census of the range (resources/dead_claims.py): ``left_to_census
        = <its request>`` on its own claim. From this write on, its owner never releases at the
        account, and readers no longer see it (items.visible; out of the HoldIndex): its slot may
        be held for nothing until the census, never given away while it is seen. In the
        PendingIndex since ``sweep_from``, so that the sweeper's next run takes that census."""
        return self._on_own_claim(
            account_id,
            resource_id,
            request_id,
            incarnation=incarnation,
            kind=kind,
            update=f"SET left_to_census = :req, {INDEXED} REMOVE hold_account",
            values=pending_index(account_id, resource_id, sweep_from, kind=kind),
        )

    def remove_left(self, item: Item) -> Written:
        """Remove a claim left to the census, once the census made its range hold nothing for it:
        only as it was read (the same owner and incarnation; the stream path's removal wins)."""
        return self._delete(
            str(item["account_id"]["S"]),
            str(item["resource_id"]["S"]),
            items_kind(item),
            ConditionExpression="#state = :deleting AND delete_request = :req AND incarnation = :inc "
            "AND left_to_census = :req",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":deleting": {"S": DELETING},
                ":req": item["delete_request"],
                ":inc": item["incarnation"],
            },
        )

    def _on_own_claim(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        incarnation: str,
        kind: str,
        update: str,
        values: dict[str, Any],
    ) -> Written:
        """``update`` on a member's claim, only while ``request_id`` still owns it on that
        incarnation."""
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression=update,
            ConditionExpression="#state = :deleting AND delete_request = :req AND incarnation = :inc",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":req": {"S": request_id},
                ":deleting": {"S": DELETING},
                ":inc": {"S": incarnation},
                **values,
            },
        )

    def remove(
        self, account_id: str, resource_id: str, request_id: str, *, kind: str = DEFAULT_KIND
    ) -> Written:
        """Delete the item of a claim whose release has applied."""
        return self._delete(
            account_id,
            resource_id,
            kind,
            ConditionExpression="#state = :deleting AND delete_request = :req",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":deleting": {"S": DELETING}, ":req": {"S": request_id}},
        )

    def adopt(
        self, account_id: str, resource_id: str, incarnation: str, *, kind: str = DEFAULT_KIND
    ) -> Written:
        """A pending item older than the grace period (its create is long gone) -> live, indexed
        so the sweeper counts it. Its admission may never have applied: best_effort may then
        undercount it until it is counted and healed, never overcount."""
        return self.make_live(account_id, resource_id, incarnation, index=True, kind=kind)

    # ---- resize -----------------------------------------------------------------------------
    def claim_resize(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        kind: str,
        incarnation: str,
        units: int,
        target: int,
        not_expired_at: float | None = None,
    ) -> Written:
        """Make ``request_id`` the one request that moves this live incarnation's counters from
        ``units`` to ``target`` (the stream path does not count it, and no delete claims it, while
        the claim stands). ``not_expired_at``: a hold's grow, only while its deadline is after
        that time (the other side of its expiry's claim, holds.py). Applied: ``item`` is the item
        as claimed (ALL_NEW)."""
        deadline, deadline_values = "", {}
        if not_expired_at is not None:
            deadline = (
                " AND (attribute_not_exists(hold_until) OR hold_until > :not_expired_at)"
                " AND attribute_not_exists(expired)"
            )
            deadline_values = {":not_expired_at": epoch_number(not_expired_at)}
        return self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression="SET resize_request = :req, resize_from = :from, resize_to = :to, resizing_since = :now, "
            + RESIZE_INDEXED,
            ConditionExpression=f"#state = :live AND incarnation = :inc AND #units = :from AND {NOT_RESIZING}"
            + deadline,
            ExpressionAttributeNames={"#state": "state", "#units": "units"},
            ExpressionAttributeValues={
                **deadline_values,
                **pending_index(account_id, resource_id, self._effects.clock(), kind=kind),
                ":req": {"S": request_id},
                ":now": {"S": iso_utc(self._effects.clock())},
                ":inc": {"S": incarnation},
                ":live": {"S": LIVE},
                ":from": {"N": str(units)},
                ":to": {"N": str(target)},
            },
            ReturnValues="ALL_NEW",
        )

    def lease_settlement(
        self,
        account_id: str,
        resource_id: str,
        request_id: str,
        *,
        kind: str,
        settler: str,
        stale_before: float,
    ) -> Item | None:
        """The one settler of a dead member resize (resize_settlement.py): the claim names it,
        unless another settler named itself since ``stale_before`` (epoch seconds). The item as
        leased, or None (the claim ended, or another settler holds it)."""
        written = self._update(
            account_id,
            resource_id,
            kind,
            UpdateExpression="SET settling = :me, settling_since = :now",
            ConditionExpression="resize_request = :req AND "
            "(attribute_not_exists(settling) OR settling_since < :stale)",
            ExpressionAttributeValues={
                ":me": {"S": settler},
                ":now": {"S": iso_utc(self._effects.clock())},
                ":req": {"S": request_id},
                ":stale": {"S": iso_utc(stale_before)},
            },
            ReturnValues="ALL_NEW",
        )
        return written.item if written.applied else None

    def finish_resize(self, account_id: str, resource_id: str, request_id: str, *, kind: str) -> Written:
        """The resize's counters moved (or a settlement found they hold its target): the resource
        now holds ``resize_to`` units."""
        return self._end_resize(
            account_id,
            resource_id,
            request_id,
            kind,
            {
                "UpdateExpression": f"SET #units = resize_to REMOVE {RESIZE_FIELDS}",
                "ExpressionAttributeNames": {"#units": "units"},
            },
        )

    def revert_resize(self, account_id: str, resource_id: str, request_id: str, *, kind: str) -> Written:
        """The resize's counters did not move (or a settlement found they hold its old size): the
        resource keeps its units."""
        return self._end_resize(
            account_id, resource_id, request_id, kind, {"UpdateExpression": f"REMOVE {RESIZE_FIELDS}"}
        )

    def _end_resize(
        self, account_id: str, resource_id: str, request_id: str, kind: str, write: dict[str, Any]
    ) -> Written:
        """End the claim, taking the item out of the PendingIndex where nothing else needs it
        there (``unindexed``); one more write only for an item not yet counted everywhere."""
        mine = {":req": {"S": request_id}}
        for variant in unindexed(
            {**write, "ConditionExpression": "resize_request = :req", "ExpressionAttributeValues": mine}
        ):
            written = self._update(account_id, resource_id, kind, **variant)
            if (
                written.applied
                or written.item is None
                or items_since(written.item, "resize_request") != request_id
            ):
                return written
        return written


def guarded[T](call: Callable[[], T], what: str) -> T:
    """Run a store call, turning AWS errors into the domain's retryable errors."""
    try:
        return call()
    except (ClientError, BotoCoreError) as error:
        raise store_error(error, what) from error
