"""What a takeover of a delete whose process died costs (design.md §4), at accounts of growing
size: where ``last_release`` names the dead claim (its release applied: the takeover just removes
the item), where the release never applied but ``last_release`` names another delete (only the
census of the claim's range can tell: one range of the account's resources of the kind read), and
a plain delete for comparison. Requests, read and write units of the retried DELETE, per size."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from benchmarks import seed
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import NotFound
from hybrid_counter.keys import DEFAULT_KIND, range_of, token

if TYPE_CHECKING:
    from benchmarks.world import BenchWorld

SIZES = (100, 1_000, 10_000)
CASES = ("plain_delete", "takeover_known", "takeover_by_census")


def run(world: BenchWorld, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    return {"sizes": list(sizes), "by_size": {str(size): _at(world, size) for size in sizes}}


def _at(world: BenchWorld, size: int) -> dict[str, Any]:
    account = world.account(f"dead{size}")
    ids = seed.account_with(world.clients.dynamodb, world.table, account, size)
    now = time.time()
    service = world.service()
    later = world.service(
        Effects(clock=lambda: now + world.settings.pending_grace_seconds + 60, waiter=Waiter(attempts=1))
    )
    known, census, plain, other = ids[0], ids[1], ids[2], ids[3]
    # A delete of ``census`` that died before releasing, after which a delete of ``other`` wrote
    # last_release; then one of ``known`` that released (last_release names it) and died.
    service._table.claim(account, census, "dead-census")
    service.delete(account, other)
    service._table.claim(account, known, "dead-known")
    item = service._table.get(account, known)
    assert item is not None
    service.counters.release(account, known, token(known, item["incarnation"]["S"]), True, kind=DEFAULT_KIND)
    figures: dict[str, Any] = {}
    for case, rid, by in (  # (in this order: a plain delete overwrites last_release)
        ("takeover_known", known, later),
        ("takeover_by_census", census, later),
        ("plain_delete", plain, service),
    ):
        with world.meter.labeled(f"dead_deletes:{size}:{case}") as tally:
            try:
                by.delete(account, rid)
                answer = 204
            except NotFound:
                answer = 404  # the dead request's release had applied: this one released nothing
        figures[case] = {**tally.per(1), "answer": answer}
    usage = service.usage(account)
    figures["range_items"] = sum(1 for rid in ids if range_of(rid) == range_of(census))
    figures["exact"] = usage.best_effort == usage.eventual == size - 4
    return figures
