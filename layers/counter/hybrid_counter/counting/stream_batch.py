"""Fail-fast processing of one stream batch for the Lambda event source mapping.

Records are applied in order; at the first record that cannot be applied we stop and report it
and every record after it as failed. Lambda then checkpoints just before it and redelivers the
rest, so nothing after a failure is applied ahead of it (Powertools' BatchProcessor would carry
on past a failure). Out-of-order application would be harmless here too (see ops.py), but
stopping early avoids doing work that is redelivered anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hybrid_counter.counting.eventual import ApplyReport, ChunkFailed, EventualCounter
from hybrid_counter.counting.ops import Op
from hybrid_counter.counting.records import PoisonRecord, ops_from_record, sequence_number


@dataclass
class BatchOutcome:
    failed_sequence_numbers: list[str]
    report: ApplyReport
    error: str | None = None

    def lambda_response(self) -> dict[str, list[dict[str, str]]]:
        return {"batchItemFailures": [{"itemIdentifier": seq} for seq in self.failed_sequence_numbers]}


def process_stream_batch(records: Sequence[Mapping[str, Any]], counter: EventualCounter) -> BatchOutcome:
    ops: list[Op] = []
    op_record: list[int] = []
    first_failed: int | None = None
    error: str | None = None
    for index, record in enumerate(records):
        try:
            record_ops = ops_from_record(record)
        except PoisonRecord as poison:
            first_failed, error = index, f"poison record: {poison}"
            break
        ops.extend(record_ops)
        op_record.extend([index] * len(record_ops))

    report = ApplyReport()
    try:
        report = counter.apply(ops)
    except ChunkFailed as failure:
        failed_at = op_record[failure.first_unapplied]
        if first_failed is None or failed_at < first_failed:
            first_failed, error = failed_at, str(failure)

    if first_failed is None:
        return BatchOutcome([], report)
    failed = [_seq_or_empty(record) for record in records[first_failed:]]
    return BatchOutcome(failed, report, error)


def _seq_or_empty(record: Mapping[str, Any]) -> str:
    # A record without a sequence number makes Lambda treat the whole batch as failed, which is
    # the right outcome for a record we cannot even identify.
    try:
        return sequence_number(record)
    except PoisonRecord:
        return ""
