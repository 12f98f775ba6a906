"""Turn DynamoDB stream records into the stream path's operations.

Only the counter items' records carry work (each kind of an account has its own counter item,
``COUNTER#<kind>``), because every API-path change that matters to the counters is a write to
one of them:

- ``last_admission`` changed: that resource was admitted -> CountOp (of ``last_admission_units``).
- ``last_release`` changed: that resource's delete released it -> FinishDeleteOp (usually
  dropped again by ``ops_from_records``, because the delete removed the item itself and its
  REMOVE record follows in the same batch). An organization's: that member's delete released it
  there too -> OrgReleasedOp.
- ``last_resize`` changed: a resize moved that resource's counters -> FinishResizeOp (dropped
  likewise when the resize's own write ending it follows).
- ``best_effort < eventual`` in the new image: best_effort drifted low -> HealOp.

Resource records carry little (a resource's INSERT is not an admission: the create may still be
refused). A member's delete handed off to the stream path (its account's release applied, its
organization's was refused) asks for that release and the removal (HandedOffDeleteOp). A REMOVE
of a resource cancels an earlier FinishDeleteOp of that incarnation; a REMOVE
of a *pending* resource by TTL (the record's userIdentity names the DynamoDB service, or the item
was past its ``expires_at`` when it went) asks for a census of its range (CensusOp): its create
died, and whether its admission holds a slot only the census can tell. Repair requests
(``REPAIR#``), limit changes (``CHANGE#``) and the sweeper's own items carry no work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from hybrid_counter.counters.state import (
    BEST_EFFORT,
    EVENTUAL,
    LAST_ADMISSION,
    LAST_ADMISSION_UNITS,
    LAST_RELEASE,
    LAST_RESIZE,
)
from hybrid_counter.counting.ops import (
    CensusOp,
    CountOp,
    FinishDeleteOp,
    FinishResizeOp,
    HandedOffDeleteOp,
    HealOp,
    Op,
    OrgReleasedOp,
    OrgResizedOp,
)
from hybrid_counter.keys import (
    CHANGE_PREFIX,
    CONTROL_PREFIX,
    COUNTER_PREFIX,
    EVENT_PREFIX,
    EXPIRED_PREFIX,
    HISTORY_PREFIX,
    ORG_PREFIX,
    PLANS_PK,
    PROFILE_SK,
    REPAIR_PREFIX,
    RESOURCE_PREFIX,
    parse_account_pk,
    parse_counter_sk,
    parse_kind_resource_sk,
    parse_member_token,
    parse_org_counter_sk,
    parse_org_pk,
    parse_org_resize_token,
    parse_resize_token,
    parse_token,
    range_of,
)
from hybrid_counter.resources import items

# How TTL deletions show in a stream record (DynamoDB developer guide, "TTL and streams").
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


class PoisonRecord(ValueError):
    """A record this code cannot interpret; it fails every time it is retried."""


def sequence_number(record: Mapping[str, Any]) -> str:
    try:
        return str(record["dynamodb"]["SequenceNumber"])
    except (KeyError, TypeError) as error:
        raise PoisonRecord("record has no dynamodb.SequenceNumber") from error


def ops_from_record(raw: Mapping[str, Any]) -> list[Op]:
    """The operations one record asks for (before the batch-level dropping of finished deletes)."""
    return list(_interpret(raw)[0])


# What a resource's own record shows finished: ("delete", account, kind, id, incarnation) for its
# REMOVE, ("resize", account, kind, id, request) for the write that ended a resize.
Finished = tuple[str, str, str, str, str]


def ops_from_records(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, Op]]:
    """(record index, op) for a batch, in record order. A FinishDeleteOp (FinishResizeOp) is
    dropped when the same batch shows the delete (resize) finishing that item itself, later: the
    usual case, so finishing costs the stream path nothing."""
    interpreted = [_interpret(record) for record in records]
    finished_at: dict[Finished, int] = {}
    for index, (_, finished) in enumerate(interpreted):
        if finished is not None:
            finished_at[finished] = index
    planned: list[tuple[int, Op]] = []
    for index, (ops, _) in enumerate(interpreted):
        for op in ops:
            done = _finishes(op)
            if done is not None and finished_at.get(done, -1) > index:
                continue
            planned.append((index, op))
    return planned


def _finishes(op: Op) -> Finished | None:
    if isinstance(op, FinishDeleteOp):
        return ("delete", op.account_id, op.kind, op.resource_id, op.incarnation)
    if isinstance(op, FinishResizeOp):
        return ("resize", op.account_id, op.kind, op.resource_id, op.request_id)
    return None


def _interpret(raw: Mapping[str, Any]) -> tuple[list[Op], Finished | None]:
    try:
        return _ops(DynamoDBRecord(dict(raw)))
    except PoisonRecord:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise PoisonRecord(f"cannot interpret stream record: {error!r}") from error


def _ops(record: DynamoDBRecord) -> tuple[list[Op], Finished | None]:
    stream = record.dynamodb
    if stream is None:
        raise PoisonRecord("record has no dynamodb section")
    keys = stream.keys
    pk, sk = str(keys["pk"]), str(keys["sk"])
    event = record.raw_event.get("eventName")
    if event not in ("INSERT", "MODIFY", "REMOVE"):
        raise PoisonRecord(f"unknown eventName {event!r}")
    if pk.startswith((CONTROL_PREFIX, HISTORY_PREFIX, CHANGE_PREFIX)) or pk == PLANS_PK:
        return [], None  # the sweeper's own bookkeeping, plans, limit changes and their history
    if pk.startswith(ORG_PREFIX):
        return _org_ops(record, parse_org_pk(pk), sk, event), None
    account_id = parse_account_pk(pk)
    if sk.startswith((REPAIR_PREFIX, EVENT_PREFIX, EXPIRED_PREFIX)) or sk == PROFILE_SK:
        return [], None  # census requests, events to publish, expired holds' tombstones, the plan
    if sk.startswith(RESOURCE_PREFIX):
        kind, resource_id = parse_kind_resource_sk(sk)
        return _resource_ops(record, account_id, kind, resource_id, event)
    if not sk.startswith(COUNTER_PREFIX):
        raise PoisonRecord(f"unknown item kind {sk!r}")
    kind = parse_counter_sk(sk)
    if event == "REMOVE":
        return [], None
    new, old = stream.new_image, stream.old_image
    if not new:
        raise PoisonRecord("INSERT/MODIFY record without NewImage (stream view must be NEW_AND_OLD_IMAGES)")
    try:
        ops = _counter_ops(account_id, kind, new, old)
    except ValueError as error:
        raise PoisonRecord(str(error)) from error
    if int(new.get(BEST_EFFORT, 0)) < int(new.get(EVENTUAL, 0)):
        ops.append(HealOp(account_id, kind))
    return ops, None


def _org_ops(record: DynamoDBRecord, org: str, sk: str, event: str) -> list[Op]:
    """An organization's counter item's write: a member's resource admitted there (count it
    there, once), released or resized there (note it on the claim, or finish a shrink), drifted
    (heal). Its profile and member items carry no work."""
    if not sk.startswith(COUNTER_PREFIX) or event == "REMOVE":
        return []
    kind, shard = parse_org_counter_sk(sk)
    stream = record.dynamodb
    assert stream is not None
    new, old = stream.new_image, stream.old_image or {}
    if not new:
        raise PoisonRecord("INSERT/MODIFY record without NewImage (stream view must be NEW_AND_OLD_IMAGES)")
    ops: list[Op] = []
    try:
        admitted, released = _changed(new, old, LAST_ADMISSION), _changed(new, old, LAST_RELEASE)
        resized = _changed(new, old, LAST_RESIZE)
        if resized is not None:
            account_id, resource_id, incarnation, request_id, undo = parse_org_resize_token(resized)
            ops.append(OrgResizedOp(account_id, resource_id, incarnation, request_id, kind, undo))
        if admitted is not None:
            account_id, resource_id, incarnation = parse_member_token(admitted)
            units = int(new.get(LAST_ADMISSION_UNITS, 1))
            ops.append(CountOp(account_id, resource_id, incarnation, kind, units, org, shard=shard))
        if released is not None:
            account_id, resource_id, incarnation = parse_member_token(released)
            ops.append(OrgReleasedOp(account_id, resource_id, incarnation, kind))
    except ValueError as error:
        raise PoisonRecord(str(error)) from error
    if int(new.get(BEST_EFFORT, 0)) < int(new.get(EVENTUAL, 0)):
        ops.append(HealOp("", kind, org, shard))
    return ops


def _changed(new: Mapping[str, Any], old: Mapping[str, Any], attribute: str) -> str | None:
    value = new.get(attribute)
    return None if value is None or value == old.get(attribute) else str(value)


def _counter_ops(account_id: str, kind: str, new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Op]:
    """What a counter item's write asks for: the tokens it changed."""
    ops: list[Op] = []

    def changed(attribute: str) -> str | None:
        value = new.get(attribute)
        return None if value is None or value == old.get(attribute) else str(value)

    if (admitted := changed(LAST_ADMISSION)) is not None:
        resource_id, incarnation = parse_token(admitted)
        units = int(new.get(LAST_ADMISSION_UNITS, 1))
        ops.append(CountOp(account_id, resource_id, incarnation, kind, units))
    if (released := changed(LAST_RELEASE)) is not None:
        resource_id, incarnation = parse_token(released)
        ops.append(FinishDeleteOp(account_id, resource_id, incarnation, kind))
    if (resized := changed(LAST_RESIZE)) is not None:
        resource_id, incarnation, request_id = parse_resize_token(resized)
        ops.append(FinishResizeOp(account_id, resource_id, incarnation, request_id, kind))
    return ops


def _resource_ops(
    record: DynamoDBRecord, account_id: str, kind: str, resource_id: str, event: str
) -> tuple[list[Op], Finished | None]:
    """A resource's own record: the delete or resize it shows finished, and a census if TTL
    removed a pending one."""
    stream = record.dynamodb
    assert stream is not None
    old, new = stream.old_image or {}, stream.new_image or {}
    if event == "MODIFY" and "resize_request" in old and "resize_request" not in new:
        # A member's resource its organization has not counted yet: its count there, refused
        # while the resize held it, is made now (no other record asks for it again, and its
        # account's count takes it out of the PendingIndex). Once, whoever comes first (org_counted).
        ended: list[Op] = [_org_count(account_id, kind, resource_id, new)] if _uncounted_member(new) else []
        # The same at its account: a count that met the resize was left to the sweeper (its
        # PendingIndex entry, which this count removes), minutes away; made now, at the size the
        # resize left it with. Once, whoever comes first (counter_processed).
        if _uncounted(new):
            ended.append(_account_count(account_id, kind, resource_id, new))
        return ended, ("resize", account_id, kind, resource_id, str(old["resize_request"]))
    if event == "MODIFY" and _handed_off(new) and not _handed_off(old):
        # Its request will not release at its organization (resources/delete.py): the stream
        # path does, with the removal.
        return [_finish_handed_off(account_id, kind, resource_id, new)], None
    if event == "MODIFY" and _made_live_unsure_of_its_org(old, new):
        # Its organization's admission may not have applied (outcome unknown, not resolved):
        # then no record of that counter will ever count it there, and its account's count
        # takes it out of the PendingIndex. Counted there from its own record instead, once
        # (org_counted): if that admission did apply, whichever of the two counts comes first.
        return [_org_count(account_id, kind, resource_id, new)], None
    if event != "REMOVE" or not old:
        return [], None
    removal = ("delete", account_id, kind, resource_id, str(old["incarnation"]))
    if old.get("state") == items.PENDING and _expired(record):
        reason = f"TTL removed the pending {resource_id}"
        return [CensusOp(account_id, range_of(resource_id), reason, kind)], removal
    return [], removal


def _org_count(account_id: str, kind: str, resource_id: str, new: Mapping[str, Any]) -> CountOp:
    """The count at its organization of a live member's resource, as its record shows it."""
    units, org_shard = int(new.get("units", 1)), int(new.get("org_shard", 0))
    return CountOp(
        account_id,
        resource_id,
        str(new["incarnation"]),
        kind,
        units,
        str(new["org"]),
        shard=org_shard,
        hold="hold_until" in new,
    )


def _handed_off(image: Mapping[str, Any]) -> bool:
    """A claim its delete handed off (and still owns)."""
    return (
        image.get("state") == items.DELETING
        and "org_handoff" in image
        and "org" in image
        and image.get("org_handoff") == image.get("delete_request")
    )


def _finish_handed_off(
    account_id: str, kind: str, resource_id: str, new: Mapping[str, Any]
) -> HandedOffDeleteOp:
    return HandedOffDeleteOp(
        account_id,
        resource_id,
        str(new["incarnation"]),
        str(new["delete_request"]),
        str(new["org"]),
        kind,
        int(new.get("units", 1)),
        bool(new.get("org_counted")),
        int(new.get("org_shard", 0)),
    )


def _account_count(account_id: str, kind: str, resource_id: str, new: Mapping[str, Any]) -> CountOp:
    """The count at its account of a live resource, as its record shows it."""
    return CountOp(
        account_id,
        resource_id,
        str(new["incarnation"]),
        kind,
        int(new.get("units", 1)),
        hold="hold_until" in new,
    )


def _uncounted(new: Mapping[str, Any]) -> bool:
    return new.get("state") == items.LIVE and not new.get("counter_processed")


def _uncounted_member(new: Mapping[str, Any]) -> bool:
    return new.get("state") == items.LIVE and "org" in new and not new.get("org_counted")


def _made_live_unsure_of_its_org(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Made live, at an organization that has not counted it, by a create that indexed it (an
    admission's outcome unknown), or by its account's count (its create died before making it
    live: whether its organization's admission applied, nothing can say; the count takes it out
    of the PendingIndex). Before (the explorer's stall past the grace period, 2026-11-27), the
    second was counted there by nothing when that admission had not applied."""
    return (
        old.get("state") == items.PENDING
        and new.get("state") == items.LIVE
        and (
            "pending_shard" in new
            or (bool(new.get("counter_processed")) and not old.get("counter_processed"))
        )
        and "org" in new
        and not new.get("org_counted")
    )


def _expired(record: DynamoDBRecord) -> bool:
    """The removal was TTL's: by the record's identity, or the item was past its expiry."""
    identity = record.raw_event.get("userIdentity") or {}
    if all(identity.get(key) == value for key, value in TTL_IDENTITY.items()):
        return True
    stream = record.dynamodb
    assert stream is not None
    expires = stream.old_image.get("expires_at")
    when = _epoch(record.raw_event.get("dynamodb", {}).get("ApproximateCreationDateTime"))
    return expires is not None and when is not None and int(expires) <= when


def _epoch(value: object) -> float | None:
    """A record's ApproximateCreationDateTime: epoch seconds in Lambda's events, a datetime
    when the records come straight from boto3 (the retry path reads them back so)."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float | str):
        return float(value)
    return None
