"""Fail-fast stream batches: nothing after a failure is applied, and it is all reported."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from hybrid_counter.counting.eventual import ApplyReport, ChunkFailed, EventualCounter
from hybrid_counter.counting.ops import Op
from hybrid_counter.counting.stream_batch import process_stream_batch
from tests.conftest import load_event


class RecordingCounter(EventualCounter):
    """Applies nothing; records what it was asked to apply and fails at a chosen op."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.applied: list[Op] = []
        self.fail_at = fail_at

    def apply(self, ops: Sequence[Op]) -> ApplyReport:
        if self.fail_at is not None and self.fail_at < len(ops):
            self.applied.extend(ops[: self.fail_at])
            raise ChunkFailed(range(self.fail_at, len(ops)), "injected")
        self.applied.extend(ops)
        return ApplyReport(counted=len(ops))


def admissions(count: int) -> list[dict]:
    base = load_event("stream_modify_admission.json")["Records"][0]
    records = []
    for n in range(count):
        record = copy.deepcopy(base)
        record["dynamodb"]["SequenceNumber"] = f"{100 + n:021d}"
        record["dynamodb"]["NewImage"]["last_admission"] = {"S": f"res-{n}#inc{n}"}
        record["dynamodb"]["OldImage"]["last_admission"] = {"S": f"res-{n}#previous"}
        records.append(record)
    return records


def test_all_records_applied_reports_no_failures():
    counter = RecordingCounter()
    outcome = process_stream_batch(admissions(5), counter)
    assert outcome.lambda_response() == {"batchItemFailures": []}
    assert [getattr(op, "resource_id", None) for op in counter.applied] == [f"res-{n}" for n in range(5)]


def test_failure_reports_the_failed_record_and_everything_after_it():
    records = admissions(5)
    counter = RecordingCounter(fail_at=2)
    outcome = process_stream_batch(records, counter)
    assert outcome.failed_sequence_numbers == [r["dynamodb"]["SequenceNumber"] for r in records[2:]]


def test_poison_record_stops_the_batch_there_and_earlier_records_are_applied():
    records = admissions(4)
    del records[1]["dynamodb"]["NewImage"]
    counter = RecordingCounter()
    outcome = process_stream_batch(records, counter)
    assert [getattr(op, "resource_id", None) for op in counter.applied] == ["res-0"]
    assert outcome.failed_sequence_numbers == [r["dynamodb"]["SequenceNumber"] for r in records[1:]]
    assert outcome.error is not None
    assert "poison" in outcome.error


def test_records_without_work_between_failures_are_reported_too():
    records = admissions(3)
    records.insert(1, load_event("stream_insert_resource.json")["Records"][0])
    counter = RecordingCounter(fail_at=1)  # second op = records[2]
    outcome = process_stream_batch(records, counter)
    assert outcome.failed_sequence_numbers == [r["dynamodb"]["SequenceNumber"] for r in records[2:]]
