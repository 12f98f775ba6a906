"""What used to stop working at scale, each at a reduced scale: the mechanism, not the size.

- the sweeper applied nothing until it had read every pending item, so a run cut off part way
  (at ~10^5 items it could not finish in its 300 s) had done nothing;
- the healer read every account one by one in one run, so accounts past where it was cut off
  were never healed;
- ordinary creates and deletes wrote the PendingIndex four times per lifecycle, on 16 fixed
  partition keys with a time-ordered sort key (a table-wide ceiling near 4,000 resources/s);
- a listing page filtered after its Limit, so deleted resources not yet removed gave empty pages
  with a next_token while live resources remained.

(The recount that restarted on every stream transaction, and the retry path that ran the whole
sweep on a trimmed stream: test_healing_and_recount.py and test_recovery_paths.py.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.healing import Healer
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk
from hybrid_counter.resources import ResourceService
from tests.faults import injected

pytestmark = pytest.mark.integration


def test_a_sweep_that_fails_part_way_keeps_the_work_of_the_pages_before(
    service, settings, clients, counter, account, monkeypatch
):
    # Given more entries in the PendingIndex than one page holds (creates whose admission
    # outcome stayed unknown: they are left to the sweeper)
    from hybrid_counter.counting import sweeper as sweeper_module

    monkeypatch.setattr(sweeper_module, "PAGE_SIZE", 2, raising=False)
    with injected(clients.dynamodb_single_attempt, "UpdateItem", error="InternalServerError", times=5):
        fast = ResourceService(settings, clients, effects=Effects(waiter=Waiter(attempts=1)))
        for n in range(5):
            fast.create(account, f"u{n}", {})
    later = time.time() + settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        settings.table_name, counter, settings.pending_grace_seconds, clients, clock=lambda: later
    )
    waiting = len(sweeper.pending_keys())  # this test's and any other test's
    # When the sweep is cut off at the page after the first one that held this account's entries
    # (a timeout, a crash). Not simply at its second page: other tests' entries (some with a
    # pending_since ahead of this clock, which the filter drops after Limit counted them) can
    # fill the first pages.
    ours_seen = threading.Event()

    def watch(parsed: dict[str, Any], **_: Any) -> None:
        if any(item["pk"]["S"] == account_pk(account) for item in parsed.get("Items", [])):
            ours_seen.set()

    def cut(**_: Any) -> None:
        if ours_seen.is_set():
            raise RuntimeError("InternalServerError: the sweep was cut off")

    clients.dynamodb.meta.events.register("after-call.dynamodb.Scan", watch)
    clients.dynamodb.meta.events.register("before-call.dynamodb.Scan", cut)
    try:
        with pytest.raises(RuntimeError, match="InternalServerError"):
            sweeper.sweep()
    finally:
        clients.dynamodb.meta.events.unregister("after-call.dynamodb.Scan", watch)
        clients.dynamodb.meta.events.unregister("before-call.dynamodb.Scan", cut)
    # Then what the first page found is finished already (it left the index), and the next run
    # finishes the rest
    assert len(sweeper.pending_keys()) < waiting
    sweeper.sweep()
    assert service.usage(account).eventual == 5
    # (every resource's entry is finished; limit changes' record items wait for a sweeper that
    # completes changes, which this test's, built without them, does not)
    assert [key for key in sweeper.pending_keys() if key["sk"]["S"].startswith(RESOURCE_PREFIX)] == []


def test_healing_every_account_goes_on_where_a_cut_off_run_stopped(
    service, new_account, drain, settings, clients, set_counter, monkeypatch
):
    # Given drifted accounts spread over more CounterIndex pages than one run gets through
    from hybrid_counter import healing

    accounts = [new_account() for _ in range(4)]
    for account in accounts:
        service.create(account, "a", {})
        drain(account)
        set_counter(account, best_effort=0)
    healer = Healer(settings.table_name, clients)
    # When each run gets through one page only
    seen: set[str] = set()
    continuation = None
    for _ in range(200):
        pages = iter([False, True])

        def one_page(pages: Iterator[bool] = pages) -> bool:
            return next(pages, True)

        report = healer.heal_all(continuation, until=one_page)
        seen.update(o.account_id for o in report.healed)
        continuation = report.continuation
        if continuation is None:
            break
    # Then together the runs healed every account
    assert continuation is None
    assert set(accounts) <= seen
    assert healing.COUNTER_INDEX == "CounterIndex"


def test_ordinary_creates_and_deletes_never_write_the_pending_index(service, account, stream):
    # When resources are created and deleted without any failure
    for n in range(5):
        service.create(account, f"r{n}", {}, resource_id=f"r{n}")
    for n in range(3):
        service.delete(account, f"r{n}")
    # Then no write put a resource into the PendingIndex (a table-wide partition ceiling before)
    records = stream.records_for(account)
    assert records
    images = [r["dynamodb"].get("NewImage", {}) for r in records]
    assert not [image for image in images if "pending_shard" in image]


def test_listing_after_most_resources_were_deleted_gives_full_pages(service, account):
    # Given 10 resources of which 8 are deleted (the stream path has seen none of it)
    ids = [service.create(account, f"r{n}", {}, resource_id=f"id-{n:02d}")[0].resource_id for n in range(10)]
    for rid in ids[:8]:
        service.delete(account, rid)
    # When the account is listed 2 at a time
    pages, token = [], None
    while True:
        page = service.list(account, page_size=2, next_token=token)
        pages.append([r.resource_id for r in page.items])
        token = page.next_token
        if token is None:
            break
    # Then no page is empty while resources remain after it
    assert [rid for page in pages for rid in page] == ids[8:] or sorted(
        rid for page in pages for rid in page
    ) == ids[8:]
    assert all(pages[:-1])
