"""One stream batch through Lambda's error handling: retries, bisection, partial failures.

`BatchRunner.run(records)` returns once every record of the batch is either processed
or handed to the on-failure handler, invoking the function as often as the mapping's
settings say (see `localrun.sources.stream_poller` for the rules and their sources). It never
reorders records: the first unfinished record always goes first.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from localrun.sources.batch_response import BatchOutcome, failed, read_batch_response
from localrun.sources.stream_events import StreamRecord

log = logging.getLogger("localrun.stream")


class StoppedError(Exception):
    """The poller is stopping; the batch is abandoned unfinished (nothing is checkpointed)."""


@dataclass(frozen=True)
class RetryPolicy:
    maximum_retry_attempts: int  # -1 = infinite
    bisect_on_function_error: bool
    report_batch_item_failures: bool
    backoff_seconds: float = 0.2
    max_backoff_seconds: float = 2.0

    def exhausted(self, retries: int) -> bool:
        return self.maximum_retry_attempts != -1 and retries >= self.maximum_retry_attempts

    def backoff(self, consecutive_failures: int) -> float:
        if self.backoff_seconds <= 0:
            return 0.0
        return float(
            min(self.backoff_seconds * 2 ** max(0, consecutive_failures - 1), self.max_backoff_seconds)
        )


@dataclass
class _Attempt:
    records: list[StreamRecord]
    retries: int = 0  # retries already spent on these records
    invokes: int = 0  # invocations that carried these records


class BatchRunner:
    def __init__(
        self,
        *,
        invoke: Callable[[list[StreamRecord]], Any],
        policy: RetryPolicy,
        on_done: Callable[[list[StreamRecord]], None],
        on_exhausted: Callable[[list[StreamRecord], int], None],
        stopping: threading.Event,
        paused: Callable[[], bool],
        label: str,
    ) -> None:
        self._invoke = invoke
        self._policy = policy
        self._on_done = on_done
        self._on_exhausted = on_exhausted
        self._stopping = stopping
        self._paused = paused
        self._label = label
        self.retry_pending = False

    def run(self, records: list[StreamRecord]) -> None:
        work: deque[_Attempt] = deque([_Attempt(list(records))])
        consecutive_failures = 0
        while work:
            attempt = work[0]
            self._wait_until_resumed()
            outcome = self._call(attempt.records)
            attempt.invokes += 1
            if outcome.success:
                work.popleft()
                self._on_done(attempt.records)
                consecutive_failures = 0
                self.retry_pending = bool(work)
                continue
            consecutive_failures += 1
            self.retry_pending = True
            if outcome.whole_batch_failed:
                if self._policy.bisect_on_function_error and len(attempt.records) > 1:
                    # Splitting does not count towards the retry quota; each half is a new batch.
                    half = (len(attempt.records) + 1) // 2
                    work.popleft()
                    work.appendleft(_Attempt(attempt.records[half:], attempt.retries))
                    work.appendleft(_Attempt(attempt.records[:half], attempt.retries))
                    log.info(
                        "%s: batch of %d failed (%s); bisecting into %d + %d",
                        self._label,
                        len(attempt.records),
                        outcome.reason,
                        half,
                        len(attempt.records) - half,
                    )
                    self._sleep(self._policy.backoff(consecutive_failures))
                    continue
            else:
                # Partial failure: checkpoint before the lowest failed sequence number; the rest is retried.
                lowest = min(outcome.failed_ids, key=int)
                index = next(
                    i for i, record in enumerate(attempt.records) if record.sequence_number == lowest
                )
                if index:
                    self._on_done(attempt.records[:index])
                    attempt.records = attempt.records[index:]
            if self._policy.exhausted(attempt.retries):
                work.popleft()
                log.warning(
                    "%s: retries exhausted for %d record(s) %s..%s after %d invocation(s)",
                    self._label,
                    len(attempt.records),
                    attempt.records[0].sequence_number,
                    attempt.records[-1].sequence_number,
                    attempt.invokes,
                )
                self._on_exhausted(attempt.records, attempt.invokes)
                self._on_done(attempt.records)
                self.retry_pending = bool(work)
                continue
            attempt.retries += 1
            log.info(
                "%s: retry %d for %d record(s) from %s (%s)",
                self._label,
                attempt.retries,
                len(attempt.records),
                attempt.records[0].sequence_number,
                outcome.reason,
            )
            self._sleep(self._policy.backoff(consecutive_failures))
        self.retry_pending = False

    def _call(self, records: list[StreamRecord]) -> BatchOutcome:
        try:
            response = self._invoke(records)
        except Exception as error:
            log.warning("%s: function error: %s: %s", self._label, type(error).__name__, error)
            return failed(f"function error {type(error).__name__}")
        return read_batch_response(
            response, {record.sequence_number for record in records}, self._policy.report_batch_item_failures
        )

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise StoppedError

    def _wait_until_resumed(self) -> None:
        while self._paused():
            if self._stopping.wait(0.05):
                raise StoppedError
        if self._stopping.is_set():
            raise StoppedError
