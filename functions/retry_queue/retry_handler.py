"""Retry-queue function: each message is Lambda's on-failure record for a failed stream batch.

The records are read back from the stream and applied. Messages are independent, so Powertools'
BatchProcessor reports the ones that failed; SQS redelivers them and, after maxReceiveCount,
moves them to the operator queue.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from hybrid_counter.runtime import Components


@cache
def components() -> Components:
    return Components.from_env()


def replay_message(record: SQSRecord) -> None:
    parts = components()
    outcome = parts.replayer.replay(json.loads(record.body))
    parts.obs.count("OnFailureReplayed")
    parts.obs.logger.info(
        "replayed a failed stream batch",
        extra={
            "message_id": record.message_id,
            "receive_count": record.attributes.approximate_receive_count,
            "records_read": outcome.records_read,
            "audit_requested": outcome.audit_requested,
            "counted": outcome.report.counted,
            "deletes_finished": outcome.report.finished_deletes,
            "already_done": outcome.report.already_done,
        },
    )


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    processor = BatchProcessor(event_type=EventType.SQS)
    return process_partial_response(  # type: ignore[return-value]
        event=event, record_handler=replay_message, processor=processor, context=context
    )
