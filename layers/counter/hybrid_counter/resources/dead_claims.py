"""Claims whose account's release nothing can confirm, finished by a census of their range.

A delete that died after its claim may or may not have released at its account. Its takeover
reads ``last_release``; where another delete has overwritten it, and the stream path, which
removes the item once it sees the release, is late (a failed batch waits in the retry queue
longer than the grace period), nothing can tell. Releasing there on a guess would release twice
whenever the first release had applied. So the takeover releases nothing: it marks its own claim
``left_to_census`` (in the PendingIndex) and the census of the range decides (design.md §4,
*The census of a dead delete's range*):

1. every claim left to the census holds nothing in the census (census.py), and no other delete,
   resize or running create may be in flight in the range;
2. the range's shares, read before and after the census at one version, are corrected to it
   (best_effort lowered to what can hold a slot, eventual set to what is counted), conditional on
   that version: by the claim's units where its release had not applied, by nothing where it had;
3. then each such claim is finished at the account, as it was read: removed, or for a member
   marked ``account_released`` (its organization's level is its own census's, §10.4).

A step that dies leaves the claim left to the census: the next census counts it as holding
nothing again and finds nothing more to correct, so the release is made exactly once. The
request that left it answers 503 when its range is busy; the sweeper takes that census (with the
recount's attempts, counting/recount.py). A late record of the dead delete's release finds the
item gone, or removes it first: the census then never sees it, and the counter already holds
nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.counters.corrections import correct_range
from hybrid_counter.keys import counter_key
from hybrid_counter.resources import items
from hybrid_counter.resources.census import CensusTaker, RangeCensus

if TYPE_CHECKING:
    from hybrid_counter.counters import CounterStore
    from hybrid_counter.counters.state import RangeShare
    from hybrid_counter.resources.table import Item, ResourceTable

ATTEMPTS = 3  # on the API path: a busy range leaves the claim to the sweeper's census


class DeadClaims:
    def __init__(
        self,
        table: ResourceTable,
        counters: CounterStore,
        censuses: CensusTaker,
        *,
        sleep: Callable[[float], None],
        attempts: int = ATTEMPTS,
    ) -> None:
        self._table = table
        self._counters = counters
        self._censuses = censuses
        self._sleep = sleep
        self._attempts = attempts

    def settle(self, account_id: str, kind: str, range_id: str) -> bool:
        """Correct the range with every claim left to the census holding nothing, then finish
        those claims at the account. False if the range never stood still (a write landed, or
        something else was in flight): nothing was corrected, the claims stay left."""
        for attempt in range(1, self._attempts + 1):
            before = self._counters.read(account_id, kind=kind).share(range_id)
            census = self._censuses.census(account_id, range_id, kind=kind)
            after = self._counters.read(account_id, kind=kind).share(range_id)
            if after.version != before.version or census.in_flight or census.stale_pending_items:
                self._sleep(min(0.02 * attempt, 0.2))
                continue
            if self._correct(account_id, kind, range_id, census, share=before, version=after.version):
                self.finish(census.dead_items)
                return True
        return False

    def _correct(
        self,
        account_id: str,
        kind: str,
        range_id: str,
        census: RangeCensus,
        *,
        share: RangeShare,
        version: int,
    ) -> bool:
        """The range's shares (as read at ``version``) brought to ``census``; True if they are."""
        excess, drift = census.best_effort_excess(share.best_effort), census.eventual_drift(share.eventual)
        if not excess and not drift:
            return True
        return correct_range(
            self._table.clients,
            self._table.name,
            counter_key(account_id, kind=kind),
            range_id,
            (-excess, -drift),
            version=version,
        )

    def finish(self, dead: list[Item]) -> int:
        """Once the range holds nothing for them: each claim removed, or a member's marked
        released at its account, each only as it was read. Returns how many were finished."""
        finished = 0
        for item in dead:
            account_id, rid = str(item["account_id"]["S"]), str(item["resource_id"]["S"])
            try:
                if items.org_of(item) is None:
                    written = self._table.remove_left(item)
                else:
                    written = self._table.mark_account_released(
                        account_id,
                        rid,
                        items.since(item, "delete_request"),
                        incarnation=items.incarnation_of(item),
                        kind=items.kind_of(item),
                    )
            except (ClientError, BotoCoreError):
                continue  # still left: the next census finds nothing more to correct, and finishes it
            finished += written.applied
        return finished
