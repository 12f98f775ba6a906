"""Stream function: counts a batch of the table's stream records into the eventual counter.

Fail-fast on purpose (see hybrid_counter.counting.stream_batch): the first record that cannot be
applied, and every record after it, are reported in batchItemFailures.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.runtime import Components


@cache
def components() -> Components:
    return Components.from_env()


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parts = components()
    records = event.get("Records") or []
    outcome = process_stream_batch(records, parts.eventual, parts.watcher)
    log = parts.obs.logger
    if outcome.failed_sequence_numbers:
        parts.obs.count("StreamRecordsFailed", len(outcome.failed_sequence_numbers))
        log.warning(
            "stream batch failed part-way; reporting the rest for redelivery",
            extra={
                "records": len(records),
                "failed": len(outcome.failed_sequence_numbers),
                "first_failed": outcome.failed_sequence_numbers[0],
                "reason": outcome.error,
            },
        )
    else:
        log.debug("stream batch applied", extra={"records": len(records)})
    return outcome.lambda_response()
