"""Schedule events: invoke a function at its template rate with an EventBridge "Scheduled Event".

The first run comes one interval after start, as with a new EventBridge rule. The
interval can be overridden (for tests and demos). Local deviation: EventBridge
invokes asynchronously and Lambda retries a failed asynchronous invocation twice;
locally a failure is logged and the next run comes at the next interval.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from localrun.stack.template import ACCOUNT_ID, REGION

log = logging.getLogger("localrun.schedule")


@dataclass(frozen=True)
class ScheduledJob:
    function_name: str
    rule_name: str
    interval_seconds: float
    invoke: Callable[[dict[str, Any]], Any]
    input: str | None = None


def scheduled_event(rule_name: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{rule_name}"],
        "detail": {},
    }


class Scheduler:
    def __init__(self, jobs: list[ScheduledJob]) -> None:
        self._jobs = jobs
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._run, args=(job,), name=f"localrun-schedule-{job.rule_name}", daemon=True
            )
            for job in jobs
        ]
        self.in_flight = 0
        self.runs = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopping.set()

    def join(self, timeout: float = 10.0) -> None:
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(timeout)

    def _run(self, job: ScheduledJob) -> None:
        while not self._stopping.wait(job.interval_seconds):
            event = json.loads(job.input) if job.input is not None else scheduled_event(job.rule_name)
            with self._lock:
                self.in_flight += 1
            try:
                job.invoke(event)
                log.info("scheduled run of %s (%s) done", job.function_name, job.rule_name)
            except Exception:
                log.exception("scheduled run of %s (%s) failed", job.function_name, job.rule_name)
            finally:
                with self._lock:
                    self.in_flight -= 1
                    self.runs += 1

    def busy(self) -> list[str]:
        return [f"{self.in_flight} scheduled invocation(s) running"] if self.in_flight else []
