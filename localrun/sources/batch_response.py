"""How Lambda reads a batch handler's answer when `ReportBatchItemFailures` is enabled.

Success: a response that is null/None, `{}`, or has an empty or null `batchItemFailures`.
Partial failure: `batchItemFailures` lists `{"itemIdentifier": <id>}` entries, every id
belonging to the batch. Complete failure: any entry whose `itemIdentifier` is missing,
null, empty or not an id of the batch (and a `batchItemFailures` that is not a list).
Without `ReportBatchItemFailures`, any response is a success (Lambda ignores it).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("localrun.batch")


@dataclass(frozen=True)
class BatchOutcome:
    failed_ids: frozenset[str]  # empty with whole_batch_failed False = success
    whole_batch_failed: bool = False
    reason: str = ""

    @property
    def success(self) -> bool:
        return not self.whole_batch_failed and not self.failed_ids


SUCCESS = BatchOutcome(frozenset())


def failed(reason: str) -> BatchOutcome:
    return BatchOutcome(frozenset(), whole_batch_failed=True, reason=reason)


def read_batch_response(  # noqa: PLR0911 - one return per documented case
    response: Any, batch_ids: Collection[str], report_item_failures: bool
) -> BatchOutcome:
    if not report_item_failures or response is None:
        return SUCCESS
    if not isinstance(response, dict):
        log.warning("batch response %r is not an object; Lambda treats it as a success", response)
        return SUCCESS
    failures = response.get("batchItemFailures")
    if failures is None or failures == []:
        return SUCCESS
    if not isinstance(failures, list):
        return failed(f"batchItemFailures is not a list: {failures!r}")
    ids: set[str] = set()
    for entry in failures:
        identifier = entry.get("itemIdentifier") if isinstance(entry, dict) else None
        if not isinstance(identifier, str) or not identifier:
            return failed(f"invalid batch item failure {entry!r}")
        if identifier not in batch_ids:
            return failed(f"itemIdentifier {identifier!r} is not in the batch")
        ids.add(identifier)
    return BatchOutcome(frozenset(ids), reason=f"{len(ids)} item(s) reported as failed")
