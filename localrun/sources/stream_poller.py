"""A DynamoDB Streams event source mapping, played locally against DynamoDB Local.

Reading (AWS Lambda developer guide, "Using AWS Lambda with Amazon DynamoDB" and
"Lambda parameters for Amazon DynamoDB event source mappings"):

* The stream is described periodically; every shard gets a reader thread. A child
  shard is read only after its parent has been read to its end and processed, so
  records of one item stay in order. Shard iterators start at StartingPosition
  (TRIM_HORIZON or LATEST; shards discovered later start at TRIM_HORIZON so nothing
  is skipped) and continue AFTER_SEQUENCE_NUMBER when an iterator expires.
* A batch holds up to BatchSize records and at most 6 MB of event (the synchronous
  invocation payload limit). Records are gathered until the batch is full or
  MaximumBatchingWindowInSeconds has passed since the first of them was read.
* One batch per shard is in flight at a time (ParallelizationFactor 1), and the next
  batch starts only when the current one is finished, so records are delivered in
  sequence-number order. A retry resends the same records; it never adds newer ones.
* The event is Lambda's: {"Records": [{eventID, eventName, eventVersion, eventSource
  "aws:dynamodb", awsRegion, dynamodb: {ApproximateCreationDateTime (epoch seconds),
  Keys, NewImage, OldImage, SequenceNumber, SizeBytes, StreamViewType},
  eventSourceARN}]}; AttributeValues are passed on as DynamoDB sends them.

Failures (developer guide, "Configuring partial batch response with DynamoDB and
Lambda" and "Error handling" for stream sources):

* A function error (an exception, or a run longer than the Timeout) fails the whole batch.
* With FunctionResponseTypes [ReportBatchItemFailures], a response with
  batchItemFailures [{"itemIdentifier": <SequenceNumber>}] checkpoints before the
  lowest reported sequence number: the records before it are done, the rest are
  retried. An empty or null list, `{}` or null is a success; an itemIdentifier that is
  missing, null, empty or not in the batch fails the whole batch. Without
  ReportBatchItemFailures the response is ignored.
* BisectBatchOnFunctionError: a batch of two or more records that fails as a whole is
  split in two halves, retried separately, first half first. "Splitting a batch does
  not count towards the retry quota": the halves start with the retries their parent
  had spent. With a partial-batch response the batch is split at the returned
  sequence number and only the remainder is retried (the same as without bisect).
* MaximumRetryAttempts counts retries of a batch (-1 = until the records expire):
  after the first invocation and N retries have failed, the records are given up.
  With an on-failure destination, Lambda sends it an invocation record with metadata
  only (condition RetryAttemptsExhausted, approximateInvokeCount, DDBStreamBatchInfo
  with shard id, first/last sequence number, arrival times, batch size and stream
  ARN), then continues after those records.

Local deviations: retries wait a short, growing pause (retry_backoff_seconds,
doubling, capped) instead of AWS's; MaximumRecordAgeInSeconds and
ParallelizationFactor > 1 are rejected when the template is loaded; records never
expire (DynamoDB Local keeps them); a handler cannot be stopped at its Timeout, so an
overrun is reported as a failure only after it returns.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from localrun.sources.stream_batches import BatchRunner, RetryPolicy, StoppedError
from localrun.sources.stream_events import StreamRecord, on_failure_record, stream_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger("localrun.stream")

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024 - 64 * 1024  # leave room for the envelope
_GET_RECORDS_LIMIT = 1000
_PAUSED_BUFFER_LIMIT = 10_000


@dataclass(frozen=True)
class StreamMapping:
    """Everything one event source mapping needs, resolved to local values."""

    function_name: str  # for logs
    function_arn: str
    invoke: Callable[[dict[str, Any]], Any]
    stream_arn: str
    starting_position: str
    batch_size: int
    batching_window_seconds: float
    policy: RetryPolicy
    on_failure_queue_url: str | None
    region: str
    poll_interval_seconds: float = 0.1
    describe_interval_seconds: float = 2.0


class _ShardReader:
    def __init__(
        self,
        poller: StreamPoller,
        shard_id: str,
        iterator_type: str,
    ) -> None:
        self._poller = poller
        self._mapping = poller.mapping
        self.shard_id = shard_id
        self._iterator_type = iterator_type
        self._iterator: str | None = None
        self._last_sequence: str | None = None
        self.buffer: deque[StreamRecord] = deque()
        self.closed = False
        self.finished = False
        self.finished_at = 0.0
        self.in_flight = False
        self.caught_up_at = 0.0  # start time of the latest GetRecords that found nothing new
        self.processed = 0
        self._runner = BatchRunner(
            invoke=self._invoke,
            policy=self._mapping.policy,
            on_done=self._done,
            on_exhausted=self._exhausted,
            stopping=poller.stopping,
            paused=lambda: poller.paused,
            label=f"{self._mapping.function_name} {shard_id}",
        )
        self.thread = threading.Thread(target=self._run, name=f"localrun-shard-{shard_id[-8:]}", daemon=True)

    @property
    def retry_pending(self) -> bool:
        return self._runner.retry_pending

    # -- reading ----------------------------------------------------------------------------------

    def _run(self) -> None:
        stopping = self._poller.stopping
        while not stopping.is_set():
            try:
                got_records = self._fetch_if_needed()
                if not self.buffer:
                    if self.closed:
                        self.finished_at = time.monotonic()
                        self.finished = True
                        self._poller.shard_finished()
                        return
                    if not got_records:
                        stopping.wait(self._mapping.poll_interval_seconds)
                    continue
                if self._poller.paused or not self._batch_ready():
                    if not got_records:
                        stopping.wait(self._mapping.poll_interval_seconds)
                    continue
                self._process(self._take_batch())
            except StoppedError:
                return
            except Exception:
                log.exception("%s: shard reader error; retrying", self.shard_id)
                stopping.wait(1.0)

    def _fetch_if_needed(self) -> bool:
        limit = _PAUSED_BUFFER_LIMIT if self._poller.paused else self._mapping.batch_size
        if self.closed or len(self.buffer) >= limit:
            return False
        started = time.monotonic()
        records = self._get_records()
        if records:
            self.buffer.extend(records)
            return True
        if not self.buffer and not self.in_flight:
            self.caught_up_at = started
        return False

    def _get_records(self) -> list[StreamRecord]:
        client = self._poller.streams
        if self._iterator is None:
            self._iterator = self._new_iterator()
        try:
            response = client.get_records(ShardIterator=self._iterator, Limit=_GET_RECORDS_LIMIT)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in {"ExpiredIteratorException", "TrimmedDataAccessException"}:
                log.info("%s: %s; getting a new iterator", self.shard_id, code)
                if code == "TrimmedDataAccessException":
                    self._last_sequence = None
                    self._iterator_type = "TRIM_HORIZON"
                self._iterator = None
                return []
            raise
        raw_records: list[Any] = list(response.get("Records", []))
        next_iterator = response.get("NextShardIterator")
        if next_iterator is None:
            self.closed = True
        self._iterator = next_iterator
        records = [
            stream_record(dict(raw), self._mapping.stream_arn, self._mapping.region) for raw in raw_records
        ]
        if records:
            self._last_sequence = records[-1].sequence_number
        return records

    def _new_iterator(self) -> str:
        client = self._poller.streams
        if self._last_sequence is not None:
            response = client.get_shard_iterator(
                StreamArn=self._mapping.stream_arn,
                ShardId=self.shard_id,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=self._last_sequence,
            )
        else:
            response = client.get_shard_iterator(
                StreamArn=self._mapping.stream_arn,
                ShardId=self.shard_id,
                ShardIteratorType=self._iterator_type,  # type: ignore[arg-type]
            )
        return response["ShardIterator"]

    # -- batching ---------------------------------------------------------------------------------

    def _batch_ready(self) -> bool:
        if len(self.buffer) >= self._mapping.batch_size or self.closed:
            return True
        waited = time.monotonic() - self.buffer[0].fetched_at
        return waited >= self._mapping.batching_window_seconds

    def _take_batch(self) -> list[StreamRecord]:
        batch: list[StreamRecord] = []
        size = 0
        for record in self.buffer:
            if len(batch) >= self._mapping.batch_size or (batch and size + record.size > MAX_PAYLOAD_BYTES):
                break
            batch.append(record)
            size += record.size
        return batch

    def _process(self, batch: list[StreamRecord]) -> None:
        self.in_flight = True
        try:
            self._runner.run(batch)
        finally:
            self.in_flight = False

    def _invoke(self, records: list[StreamRecord]) -> Any:
        return self._mapping.invoke({"Records": [record.event for record in records]})

    def _done(self, records: list[StreamRecord]) -> None:
        for record in records:
            head = self.buffer.popleft()
            if head.sequence_number != record.sequence_number:  # pragma: no cover - an invariant
                raise AssertionError(f"out of order: {head.sequence_number} != {record.sequence_number}")
        self.processed += len(records)

    def _exhausted(self, records: list[StreamRecord], invoke_count: int) -> None:
        queue_url = self._mapping.on_failure_queue_url
        if queue_url is None:
            log.warning(
                "%s: discarding records %s..%s (no on-failure destination)",
                self.shard_id,
                records[0].sequence_number,
                records[-1].sequence_number,
            )
            return
        message = on_failure_record(
            function_arn=self._mapping.function_arn,
            shard_id=self.shard_id,
            stream_arn=self._mapping.stream_arn,
            records=records,
            invoke_count=invoke_count,
        )
        for attempt in range(1, 6):
            try:
                self._poller.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(message))
                log.info(
                    "%s: sent on-failure record for %s..%s to %s",
                    self.shard_id,
                    records[0].sequence_number,
                    records[-1].sequence_number,
                    queue_url,
                )
                return
            except Exception:
                log.exception("%s: on-failure send failed (attempt %d)", self.shard_id, attempt)
                if self._poller.stopping.wait(0.5 * attempt):
                    raise StoppedError from None
        log.error("%s: on-failure record lost: %s", self.shard_id, json.dumps(message))


class StreamPoller:
    """Polls one stream for one function; `start()`/`stop()`, `pause()`/`resume()`, `busy()`."""

    def __init__(self, mapping: StreamMapping, streams: DynamoDBStreamsClient, sqs: SQSClient) -> None:
        self.mapping = mapping
        self.streams = streams
        self.sqs = sqs
        self.stopping = threading.Event()
        self.paused = False
        self._readers: dict[str, _ShardReader] = {}
        self._skipped: set[str] = set()
        self._described_at = 0.0  # start time of the last complete DescribeStream
        self._describe_now = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._coordinate, name="localrun-stream", daemon=True)

    @property
    def name(self) -> str:
        return f"{self.mapping.function_name} <- {self.mapping.stream_arn.rsplit('/', 3)[-3]} stream"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._describe_now.set()

    def join(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        if self._thread.ident is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            readers = list(self._readers.values())
        for reader in readers:
            if reader.thread.ident is not None:
                reader.thread.join(max(0.0, deadline - time.monotonic()))

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def shard_finished(self) -> None:
        self._describe_now.set()

    # -- shards -----------------------------------------------------------------------------------

    def _coordinate(self) -> None:
        first = True
        while not self.stopping.is_set():
            try:
                started = time.monotonic()
                shards = self._describe()
                self._start_readers(shards, first)
                first = False
                self._described_at = started
            except Exception:
                log.exception("%s: DescribeStream failed; retrying", self.name)
            self._describe_now.wait(self.mapping.describe_interval_seconds)
            self._describe_now.clear()

    def _describe(self) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        start: str | None = None
        while True:
            if start is None:
                description = self.streams.describe_stream(StreamArn=self.mapping.stream_arn)[
                    "StreamDescription"
                ]
            else:
                description = self.streams.describe_stream(
                    StreamArn=self.mapping.stream_arn, ExclusiveStartShardId=start
                )["StreamDescription"]
            shards.extend(dict(shard) for shard in description.get("Shards", []))
            start = description.get("LastEvaluatedShardId")
            if not start:
                return shards

    def _start_readers(self, shards: list[dict[str, Any]], first: bool) -> None:
        known = {shard["ShardId"] for shard in shards}
        for shard in shards:
            shard_id = shard["ShardId"]
            parent = shard.get("ParentShardId")
            with self._lock:
                if shard_id in self._readers or shard_id in self._skipped:
                    continue
                parent_reader = self._readers.get(parent) if parent else None
            closed = "EndingSequenceNumber" in shard.get("SequenceNumberRange", {})
            if first and self.mapping.starting_position == "LATEST":
                if closed:
                    self._skipped.add(shard_id)  # LATEST starts at the open shards' tips
                    continue
                iterator_type = "LATEST"
            else:
                parent_done = parent in self._skipped or (
                    parent_reader is not None and parent_reader.finished
                )
                if parent and parent in known and not parent_done:
                    continue  # read the parent to its end first
                iterator_type = self.mapping.starting_position if first else "TRIM_HORIZON"
            reader = _ShardReader(self, shard_id, iterator_type)
            with self._lock:
                self._readers[shard_id] = reader
            log.info("%s: reading shard %s from %s", self.name, shard_id, iterator_type)
            reader.thread.start()

    # -- idleness ---------------------------------------------------------------------------------

    def backlog(self) -> int:
        with self._lock:
            readers = list(self._readers.values())
        return sum(len(reader.buffer) for reader in readers)

    def progress(self) -> tuple[int, int]:
        with self._lock:
            readers = list(self._readers.values())
        return len(readers), sum(reader.processed for reader in readers)

    def busy(self, since: float) -> list[str]:
        """Why this mapping is not idle, given that anything written before `since` must be done."""
        reasons: list[str] = []
        if self._described_at < since:
            # New shards appear only through DescribeStream: look again now.
            self._describe_now.set()
            reasons.append(f"{self.name}: stream not described since the check began")
        with self._lock:
            readers = list(self._readers.values())
        for reader in readers:
            label = f"{self.name} {reader.shard_id}"
            if reader.finished:
                if reader.finished_at >= self._described_at:
                    reasons.append(f"{label}: finished; looking for child shards")
                continue
            if reader.in_flight:
                state = "retry pending" if reader.retry_pending else "batch in flight"
                reasons.append(f"{label}: {state}")
            elif reader.buffer:
                paused = " (stream paused)" if self.paused else ""
                reasons.append(f"{label}: {len(reader.buffer)} record(s) waiting{paused}")
            elif reader.caught_up_at < since:
                reasons.append(f"{label}: not yet read to its end")
        return reasons
