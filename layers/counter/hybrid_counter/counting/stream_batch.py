"""Fail-fast processing of one stream batch for the Lambda event source mapping.

The batch is applied; if something cannot be, the first record whose work is not known to be
applied, and every record after it, are reported as failed. Lambda then checkpoints just before
it and redelivers the rest (Powertools' BatchProcessor would carry on past a failure). Applying
records again or out of order is harmless (ops.py); reporting from the first failure keeps the
mapping from moving past work that was never done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hybrid_counter.counting.eventual import ApplyReport, ChunkFailed, EventualCounter
from hybrid_counter.counting.records import PoisonRecord, ops_from_record, ops_from_records, sequence_number
from hybrid_counter.governance.thresholds import CrossingNotRecorded, ThresholdWatcher
from hybrid_counter.keys import counter_key


@dataclass
class BatchOutcome:
    failed_sequence_numbers: list[str]
    report: ApplyReport
    error: str | None = None

    def lambda_response(self) -> dict[str, list[dict[str, str]]]:
        return {"batchItemFailures": [{"itemIdentifier": seq} for seq in self.failed_sequence_numbers]}


def first_poison(records: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    for index, record in enumerate(records):
        try:
            ops_from_record(record)
        except PoisonRecord as poison:
            return index, f"poison record: {poison}"
    return None


def process_stream_batch(
    records: Sequence[Mapping[str, Any]], counter: EventualCounter, watcher: ThresholdWatcher | None = None
) -> BatchOutcome:
    first_failed: int | None = None
    error: str | None = None
    poison = first_poison(records)
    if poison is not None:
        first_failed, error = poison
    planned = ops_from_records(records if first_failed is None else records[:first_failed])

    report = ApplyReport()
    try:
        report = counter.apply([op for _, op in planned])
    except ChunkFailed as failure:
        failed_at = min(planned[position][0] for position in failure.unapplied)
        if first_failed is None or failed_at < first_failed:
            first_failed, error = failed_at, str(failure)

    if watcher is not None:
        applied = records if first_failed is None else records[:first_failed]
        try:
            watcher.observe(applied)
        except CrossingNotRecorded as failure:
            # Redeliver from the first record of that counter item: its crossings are judged
            # again (the counting of the records before it is idempotent).
            at = _first_of(applied, failure.account_id, failure.kind)
            if first_failed is None or at < first_failed:
                first_failed, error = at, str(failure)
    if first_failed is None:
        return BatchOutcome([], report)
    failed = [_seq_or_empty(record) for record in records[first_failed:]]
    return BatchOutcome(failed, report, error)


def _first_of(records: Sequence[Mapping[str, Any]], account_id: str, kind: str) -> int:
    wanted = counter_key(account_id, kind=kind)
    for index, record in enumerate(records):
        if (record.get("dynamodb") or {}).get("Keys") == wanted:
            return index
    return 0


def _seq_or_empty(record: Mapping[str, Any]) -> str:
    # A record without a sequence number makes Lambda treat the whole batch as failed, which is
    # the right outcome for a record we cannot even identify.
    try:
        return sequence_number(record)
    except PoisonRecord:
        return ""
