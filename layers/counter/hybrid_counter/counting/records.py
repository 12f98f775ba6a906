"""Turn DynamoDB stream records into counting operations.

- Counter item, ``last_admission`` changed: the API admitted that resource -> CountOp.
- Resource item, ``deleted`` false -> true: soft delete -> UncountOp (counted = the flag in the
  new image; counting needs ``deleted = false``, so the flag cannot change after the soft delete).
- Everything else (resource INSERT, the stream path's own writes, REMOVE) -> nothing.

Counting is triggered by the admission, not by the resource's INSERT, so the eventual counter
never includes a resource the API is about to roll back for being over the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from hybrid_counter.counting.ops import CountOp, Op, UncountOp
from hybrid_counter.keys import COUNTER_SK, RESOURCE_PREFIX, parse_account_pk, parse_resource_sk


class PoisonRecord(ValueError):
    """A record this code cannot interpret; it fails every time it is retried."""


def sequence_number(record: Mapping[str, Any]) -> str:
    try:
        return str(record["dynamodb"]["SequenceNumber"])
    except (KeyError, TypeError) as error:
        raise PoisonRecord("record has no dynamodb.SequenceNumber") from error


def ops_from_record(raw: Mapping[str, Any]) -> list[Op]:
    try:
        return _ops(DynamoDBRecord(dict(raw)))
    except PoisonRecord:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise PoisonRecord(f"cannot interpret stream record: {error!r}") from error


def _ops(record: DynamoDBRecord) -> list[Op]:
    stream = record.dynamodb
    if stream is None:
        raise PoisonRecord("record has no dynamodb section")
    keys = stream.keys
    pk, sk = str(keys["pk"]), str(keys["sk"])
    event = record.raw_event.get("eventName")
    if event not in ("INSERT", "MODIFY", "REMOVE"):
        raise PoisonRecord(f"unknown eventName {event!r}")
    if event == "REMOVE":
        return []
    new, old = stream.new_image, stream.old_image
    if not new:
        raise PoisonRecord("INSERT/MODIFY record without NewImage (stream view must be NEW_AND_OLD_IMAGES)")
    account_id = parse_account_pk(pk)
    if sk == COUNTER_SK:
        admission = new.get("last_admission")
        if admission is None or admission == old.get("last_admission"):
            return []
        resource_id, sep, incarnation = str(admission).rpartition("#")
        if not sep or not resource_id or not incarnation:
            raise PoisonRecord(f"malformed last_admission {admission!r}")
        return [CountOp(account_id, resource_id, incarnation)]
    if sk.startswith(RESOURCE_PREFIX):
        if event == "MODIFY" and new.get("deleted") is True and old.get("deleted") is not True:
            return [
                UncountOp(
                    account_id,
                    parse_resource_sk(sk),
                    str(new["incarnation"]),
                    counted=bool(new["counter_processed"]),
                )
            ]
        return []
    raise PoisonRecord(f"unknown item kind {sk!r}")
