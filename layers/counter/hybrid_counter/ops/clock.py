"""The time by which operator tools judge what is stale: DynamoDB's, never the operator's machine's.

Repairs take over deletes claimed, and roll back creates started, longer ago than the grace
period, judged against timestamps the functions wrote with their own (NTP-synchronised) clocks.
An operator's laptop ten minutes fast would take over a delete that is still running. So the ops
tool reads the time off DynamoDB itself: every response carries an HTTP ``Date`` header (whole
seconds). A response dated D was stamped while the request was in flight, so, with the local
clock read just before (t0) and after (t1), the server's clock minus ours lies in
[D - t1, D + 1 - t0]. Several samples narrow that interval; the clock used is the *low* end, a
lower bound of the server's time, so "older than the grace period" is only ever said of what is
older by every possible reading. If no sample has a Date, or the interval stays wider than
``MAX_UNCERTAINTY`` seconds, the tool refuses to act (ClockUnknown).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from hybrid_counter.keys import CONTROL_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_UNCERTAINTY = 5.0
SAMPLES = 3
PROBE_KEY = {"pk": {"S": f"{CONTROL_PREFIX}clock"}, "sk": {"S": "probe"}}


class ClockUnknown(RuntimeError):
    """The server's time could not be bounded closely enough to judge what is stale."""


@dataclass(frozen=True)
class ServerClock:
    low: float  # server minus local, lower bound
    high: float  # upper bound
    local: Callable[[], float] = time.time

    @property
    def uncertainty(self) -> float:
        return self.high - self.low

    def __call__(self) -> float:
        return self.local() + self.low

    def describe(self) -> dict[str, float]:
        return {
            "offset_seconds": round((self.low + self.high) / 2, 3),
            "uncertainty_seconds": round(self.uncertainty, 3),
        }


def server_date(response: dict[str, Any]) -> float | None:
    """The epoch seconds of a response's Date header, if it has one."""
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    value = headers.get("date")
    if not value:
        return None
    try:
        return parsedate_to_datetime(str(value)).timestamp()
    except (TypeError, ValueError):
        return None


def calibrate(
    dynamodb: DynamoDBClient,
    table_name: str,
    *,
    local: Callable[[], float] = time.time,
    samples: int = SAMPLES,
    max_uncertainty: float = MAX_UNCERTAINTY,
) -> ServerClock:
    """Bound the server's clock from a few cheap reads (a missing key: half a read unit each)."""
    low, high = float("-inf"), float("inf")
    for _ in range(samples):
        before = local()
        response: Any = dynamodb.get_item(TableName=table_name, Key=PROBE_KEY)
        after = local()
        dated = server_date(response)
        if dated is None:
            continue
        low, high = max(low, dated - after), min(high, dated + 1 - before)
    if low == float("-inf"):
        raise ClockUnknown("DynamoDB's responses carry no Date header: the server's time is unknown")
    if high < low:
        raise ClockUnknown("the local clock jumped while it was compared with the server's")
    if high - low > max_uncertainty:
        raise ClockUnknown(
            f"the server's time is known only within {high - low:.1f} s (more than {max_uncertainty} s): "
            "the network is too slow to judge what is stale safely"
        )
    return ServerClock(low, high, local)
