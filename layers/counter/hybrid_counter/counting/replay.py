"""Re-process a failed stream batch named by an on-failure invocation record.

Lambda's on-failure record for a DynamoDB stream carries only metadata (shard, first and last
sequence numbers, stream ARN). The records are read back from the stream: GetShardIterator
AT_SEQUENCE_NUMBER, then GetRecords up to the last sequence number. All records in the range
are applied (their order does not matter, see ops.py); if any cannot be, ReplayFailed is raised
so the message is received again and, after the queue's maxReceiveCount, moves to the operator
queue.

A replay succeeds only if the read reached the range's end (a record at or past its last sequence
number). GetRecords may answer empty pages before a shard's records, and a shard may end (no
NextShardIterator) before the sequence number Lambda named; a read that stops short, on either or
on its page and time budget, raises ReplayFailed before applying anything: the message stays and
is read again, never deleted with part of its range unapplied.

If the records are gone (older than the stream's 24-hour retention, or the stream was
replaced), the table itself still holds the unfinished work: the replay asks the sweeper for an
audit of the table (sweeper.py), which runs in the sweeper's own schedule and budget, and the
message succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import Clients, error_code
from hybrid_counter.counting.eventual import ApplyReport, CountingError, EventualCounter
from hybrid_counter.counting.ops import Op
from hybrid_counter.counting.records import ops_from_records, sequence_number
from hybrid_counter.counting.stream_batch import first_poison
from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.governance.thresholds import CrossingNotRecorded, ThresholdWatcher

RECORDS_GONE = frozenset(
    {"TrimmedDataAccessException", "ResourceNotFoundException", "ExpiredIteratorException"}
)
# Empty pages in a row before a read gives up (the message is read again later). Each is one
# GetRecords call; DynamoDB Streams may take several to get to the part of a shard with records.
MAX_EMPTY_PAGES = 50
# The retry function has 60 s for up to 10 messages (template.yaml): a read that has not reached its
# range's end in this long fails that message alone instead of timing the whole batch out.
READ_SECONDS = 5.0


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


class RangeRead(list[dict[str, Any]]):
    """The records of a range as far as they were read, and whether the read reached its end (a
    record at or past the range's last sequence number); ``stopped`` says why it stopped."""

    def __init__(self, records: Iterable[dict[str, Any]], *, reached_end: bool, stopped: str) -> None:
        super().__init__(records)
        self.reached_end = reached_end
        self.stopped = stopped


@dataclass
class ReplayOutcome:
    records_read: int
    report: ApplyReport
    audit_requested: bool = False


class Replayer:
    def __init__(
        self,
        counter: EventualCounter,
        sweeper: Sweeper,
        clients: Clients | None = None,
        *,
        read_seconds: float = READ_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        watcher: ThresholdWatcher | None = None,
    ) -> None:
        self._counter = counter
        self._sweeper = sweeper
        self._clients = clients or Clients()
        self._read_seconds = read_seconds
        self._clock = clock
        self._watcher = watcher  # judges the replayed records' threshold crossings too

    def read_range(self, info: BatchInfo) -> RangeRead:
        """The range's records, read until one at or past its end; a read that stops before (the
        shard closed, too many empty pages, out of time) returns what it read with reached_end
        False."""
        streams = self._clients.streams_client()
        deadline = self._clock() + self._read_seconds
        iterator: str | None = streams.get_shard_iterator(
            StreamArn=info.stream_arn,
            ShardId=info.shard_id,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info.start,
        )["ShardIterator"]
        end = int(info.end)
        records: list[dict[str, Any]] = []
        empty_pages = 0
        while True:
            if not iterator:
                # A closed shard's last page has no NextShardIterator: nothing more will come.
                stopped = f"the shard ended before sequence number {info.end}"
                return RangeRead(records, reached_end=False, stopped=stopped)
            if empty_pages >= MAX_EMPTY_PAGES:
                stopped = f"{empty_pages} empty pages in a row before sequence number {info.end}"
                return RangeRead(records, reached_end=False, stopped=stopped)
            if self._clock() > deadline:
                stopped = f"{self._read_seconds:g} s spent before sequence number {info.end}"
                return RangeRead(records, reached_end=False, stopped=stopped)
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            batch = page.get("Records", [])
            empty_pages = 0 if batch else empty_pages + 1
            for record in batch:
                number = int(sequence_number(record))
                if number > end:
                    # Records come in sequence-number order: everything up to the end has been read.
                    return RangeRead(records, reached_end=True, stopped="past the end")
                records.append(dict(record))
                if number == end:
                    return RangeRead(records, reached_end=True, stopped="at the end")
            iterator = page.get("NextShardIterator")

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
        if not records.reached_end:
            # Applying the part that was read would be harmless (every operation is idempotent), but
            # the message must stay either way, and the next receive reads the whole range again.
            raise ReplayFailed(
                f"the read of {info.shard_id} from {info.start} stopped short: {records.stopped}; "
                "nothing applied, the message is received again"
            )

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
        if self._watcher is not None:
            try:
                self._watcher.observe(usable)
            except CrossingNotRecorded as error:
                raise ReplayFailed(str(error)) from error
        if poison:
            raise ReplayFailed(f"records that cannot be applied: {'; '.join(poison)}")
        return ReplayOutcome(records_read=len(records), report=report)
