"""Turn DynamoDB stream records into the stream path's operations.

Only the counter item's records carry work, because every API-path change that matters to the
counters is a write to it:

- ``last_admission`` changed: that resource was admitted -> CountOp.
- ``last_release`` changed: that resource's delete released it -> FinishDeleteOp (usually
  dropped again by ``ops_from_records``, because the delete removed the item itself and its
  REMOVE record follows in the same batch).
- ``best_effort < eventual`` in the new image: best_effort drifted low -> HealOp.

Resource records carry none (a resource's INSERT is not an admission: the create may still be
refused). A REMOVE of a resource cancels an earlier FinishDeleteOp of that incarnation; a REMOVE
of a *pending* resource by TTL (the record's userIdentity names the DynamoDB service, or the item
was past its ``expires_at`` when it went) asks for a census of its range (CensusOp): its create
died, and whether its admission holds a slot only the census can tell. Repair requests
(``REPAIR#``) and the sweeper's own items carry no work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from hybrid_counter.counters.state import BEST_EFFORT, EVENTUAL, LAST_ADMISSION, LAST_RELEASE
from hybrid_counter.counting.ops import CensusOp, CountOp, FinishDeleteOp, HealOp, Op
from hybrid_counter.keys import (
    CONTROL_PREFIX,
    COUNTER_SK,
    REPAIR_PREFIX,
    RESOURCE_PREFIX,
    parse_account_pk,
    parse_resource_sk,
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


def ops_from_records(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, Op]]:
    """(record index, op) for a batch, in record order. A FinishDeleteOp is dropped when the
    same batch shows the delete removing that incarnation itself, which is the usual case."""
    interpreted = [_interpret(record) for record in records]
    removed_at: dict[tuple[str, str, str], int] = {}
    for index, (_, removal) in enumerate(interpreted):
        if removal is not None:
            removed_at[removal] = index
    planned: list[tuple[int, Op]] = []
    for index, (ops, _) in enumerate(interpreted):
        for op in ops:
            if isinstance(op, FinishDeleteOp):
                key = (op.account_id, op.resource_id, op.incarnation)
                if removed_at.get(key, -1) > index:
                    continue
            planned.append((index, op))
    return planned


def _interpret(raw: Mapping[str, Any]) -> tuple[list[Op], tuple[str, str, str] | None]:
    try:
        return _ops(DynamoDBRecord(dict(raw)))
    except PoisonRecord:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise PoisonRecord(f"cannot interpret stream record: {error!r}") from error


def _ops(record: DynamoDBRecord) -> tuple[list[Op], tuple[str, str, str] | None]:
    stream = record.dynamodb
    if stream is None:
        raise PoisonRecord("record has no dynamodb section")
    keys = stream.keys
    pk, sk = str(keys["pk"]), str(keys["sk"])
    event = record.raw_event.get("eventName")
    if event not in ("INSERT", "MODIFY", "REMOVE"):
        raise PoisonRecord(f"unknown eventName {event!r}")
    if pk.startswith(CONTROL_PREFIX):
        return [], None  # the sweeper's own bookkeeping
    account_id = parse_account_pk(pk)
    if sk.startswith(REPAIR_PREFIX):
        return [], None  # a census request (recount_requests.py): the sweeper's to take up
    if sk.startswith(RESOURCE_PREFIX):
        return _resource_ops(record, account_id, parse_resource_sk(sk), event)
    if sk != COUNTER_SK:
        raise PoisonRecord(f"unknown item kind {sk!r}")
    if event == "REMOVE":
        return [], None
    new, old = stream.new_image, stream.old_image
    if not new:
        raise PoisonRecord("INSERT/MODIFY record without NewImage (stream view must be NEW_AND_OLD_IMAGES)")
    ops: list[Op] = []
    for attribute, kind in ((LAST_ADMISSION, CountOp), (LAST_RELEASE, FinishDeleteOp)):
        value = new.get(attribute)
        if value is not None and value != old.get(attribute):
            try:
                resource_id, incarnation = parse_token(str(value))
            except ValueError as error:
                raise PoisonRecord(str(error)) from error
            ops.append(kind(account_id, resource_id, incarnation))
    if int(new.get(BEST_EFFORT, 0)) < int(new.get(EVENTUAL, 0)):
        ops.append(HealOp(account_id))
    return ops, None


def _resource_ops(
    record: DynamoDBRecord, account_id: str, resource_id: str, event: str
) -> tuple[list[Op], tuple[str, str, str] | None]:
    """A resource's REMOVE: what it cancels, and a census if TTL removed a pending one."""
    old = record.dynamodb.old_image if record.dynamodb else None
    if event != "REMOVE" or not old:
        return [], None
    removal = (account_id, resource_id, str(old["incarnation"]))
    if old.get("state") == items.PENDING and _expired(record):
        reason = f"TTL removed the pending {resource_id}"
        return [CensusOp(account_id, range_of(resource_id), reason)], removal
    return [], removal


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
