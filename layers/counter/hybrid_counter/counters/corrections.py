"""The recounts' writes on a counter item (an account's, or one shard of an organization's):
a range's correction, conditional on the range's version, and the totals set back to the sums
of their shares. Both are conditional deltas, so a write that lands in between refuses them
rather than being overwritten (counting/recount.py, counting/org_recount.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import CONDITION_FAILED, Clients, error_code
from hybrid_counter.counters import expressions
from hybrid_counter.counters.state import CounterState


def _applied(clients: Clients, args: dict[str, Any]) -> bool:
    """One conditional UpdateItem: False if its condition refused it."""
    try:
        clients.dynamodb.update_item(**args)
    except ClientError as error:
        if error_code(error) != CONDITION_FAILED:
            raise
        return False
    return True


def correct_range(
    clients: Clients,
    table: str,
    key: dict[str, Any],
    range_id: str,
    deltas: tuple[int, int],
    *,
    version: int,
    creation: Sequence[tuple[str, int | None]] = (),
) -> bool:
    """The range's shares moved by (best_effort, eventual) deltas, with the totals, if its version
    is still ``version`` (and an organization's item still of the creation ``creation`` names:
    expressions.correction); False if a write of the range came since."""
    correction = expressions.correction(range_id, *deltas, version, creation=creation)
    return _applied(clients, correction.update_key(table, key))


def fix_totals(
    clients: Clients,
    table: str,
    key: dict[str, Any],
    read: Callable[[], CounterState],
    *,
    attempts: int,
    first: CounterState | None = None,
) -> tuple[int, int] | None:
    """The totals set back to the sums of their shares (a heal raises a total alone): the
    (best_effort, eventual) deltas written, (0, 0) if nothing was off, None if heals kept landing
    in between for ``attempts`` reads. ``first``: the state already read."""
    state = first
    for _ in range(attempts):
        state = state or read()
        best_effort, eventual = state.totals_mismatch()
        if best_effort == 0 and eventual == 0:
            return (0, 0)
        args = expressions.totals_correction(-best_effort, -eventual, state.heals).update_key(table, key)
        if _applied(clients, args):
            return (-best_effort, -eventual)
        state = None  # a heal landed in between: the mismatch moved, read it again
    return None
