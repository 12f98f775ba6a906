"""Re-process a failed stream batch named by an on-failure invocation record.

Lambda's on-failure record for a DynamoDB stream carries only metadata (shard, first and last
sequence numbers, stream ARN). The records are read back from the stream: GetShardIterator
AT_SEQUENCE_NUMBER, then GetRecords up to the last sequence number. All records in the range
are applied (their order does not matter, see ops.py); if any cannot be, ReplayFailed is raised
so the message is received again and, after the queue's maxReceiveCount, moves to the operator
queue.

If the records are gone (older than the stream's 24-hour retention, or the stream was
replaced), the table itself still holds the unfinished work: the replay asks the sweeper for an
audit of the table (sweeper.py), which runs in the sweeper's own schedule and budget, and the
message succeeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.counting.eventual import ApplyReport, CountingError, EventualCounter
from hybrid_counter.counting.ops import Op
from hybrid_counter.counting.records import ops_from_records, sequence_number
from hybrid_counter.counting.stream_batch import first_poison
from hybrid_counter.counting.sweeper import Sweeper

RECORDS_GONE = frozenset(
    {"TrimmedDataAccessException", "ResourceNotFoundException", "ExpiredIteratorException"}
)
MAX_EMPTY_PAGES = 50


class ReplayFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class BatchInfo:
    stream_arn: str
    shard_id: str
    start: str
    end: str
    batch_size: int

    @classmethod
    def from_failure_record(cls, record: Mapping[str, Any]) -> BatchInfo:
        try:
            info = record["DDBStreamBatchInfo"]
            return cls(
                stream_arn=str(info["streamArn"]),
                shard_id=str(info["shardId"]),
                start=str(info["startSequenceNumber"]),
                end=str(info["endSequenceNumber"]),
                batch_size=int(info.get("batchSize", 0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ReplayFailed(f"not a DynamoDB stream on-failure record: {error!r}") from error


@dataclass
class ReplayOutcome:
    records_read: int
    report: ApplyReport
    audit_requested: bool = False


class Replayer:
    def __init__(self, counter: EventualCounter, sweeper: Sweeper, clients: Clients | None = None) -> None:
        self._counter = counter
        self._sweeper = sweeper
        self._clients = clients or Clients()

    def read_range(self, info: BatchInfo) -> list[dict[str, Any]]:
        streams = self._clients.streams_client()
        iterator: str | None = streams.get_shard_iterator(
            StreamArn=info.stream_arn,
            ShardId=info.shard_id,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info.start,
        )["ShardIterator"]
        end = int(info.end)
        records: list[dict[str, Any]] = []
        empty_pages = 0
        while iterator and empty_pages < MAX_EMPTY_PAGES:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            batch = page.get("Records", [])
            empty_pages = 0 if batch else empty_pages + 1
            for record in batch:
                if int(sequence_number(record)) > end:
                    return records
                records.append(dict(record))
                if int(sequence_number(record)) == end:
                    return records
            iterator = page.get("NextShardIterator")
        return records

    def replay(self, failure_record: Mapping[str, Any]) -> ReplayOutcome:
        info = BatchInfo.from_failure_record(failure_record)
        try:
            records = self.read_range(info)
        except ClientError as error:
            code = error_code(error)
            if code not in RECORDS_GONE:
                raise
            self._sweeper.request_audit(f"records of {info.shard_id} from {info.start} are gone ({code})")
            return ReplayOutcome(records_read=0, report=ApplyReport(), audit_requested=True)

        poison: list[str] = []
        usable: list[dict[str, Any]] = []
        for record in records:
            bad = first_poison([record])
            if bad is None:
                usable.append(record)
            else:
                poison.append(f"{record.get('dynamodb', {}).get('SequenceNumber', '?')}: {bad[1]}")
        ops: list[Op] = [op for _, op in ops_from_records(usable)]
        try:
            report = self._counter.apply(ops)
        except CountingError as error:
            raise ReplayFailed(f"counting failed while replaying {info.shard_id}: {error}") from error
        if poison:
            raise ReplayFailed(f"records that cannot be applied: {'; '.join(poison)}")
        return ReplayOutcome(records_read=len(records), report=report)
