"""What an expired hold's item still holds on its account's counter and on its organization's,
for a refused create that gave the hold up, or a dry run that counts it (holds.py; design.md §12).

A claim (an expiry, its owner's delete) releases at the account, then at the organization (a
member's since 2026-11-26; a takeover leaves the account's level to the census of the range):
one whose release applied at a level holds nothing there any more (its process may have died
before the rest, or the stream path has not removed the item yet). A resize moves the counters
(a member's grow at the organization first, a shrink at the account first; a grow its account
refused is undone at the organization) before the item takes its new units: one whose move
applied at a level holds its new size there, one undone its size before. Each is known from the
item's notes (``account_released``, ``org_handoff`` naming the claim: its organization's release
handed to the stream path, so its account's applied; ``org_released``; ``org_resized``,
``org_unresized`` naming the resize) or from that counter's last token (``last_release``,
``last_resize``, an undo's); another release or resize on that counter since overwrites the
token, and then it is not known. Not known, a claim is taken as holding its units (as before);
a resize, for the 503 rule (``cautious``: could releasing it make room?), the larger of its two
sizes, and for a dry run (what the request would free) the smaller, so that a dry run never
admits what no order admits. Each counter is read once (reviews 67 F4, 69 F2, 70 F1 to F3, 71:
before, the entry's units were counted at every level, 503 where 409 was certain, 409 where
every order admitted, dry runs disagreeing).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.counters.split import ShardSet
from hybrid_counter.counters.state import CounterState
from hybrid_counter.counters.store import CounterStore
from hybrid_counter.keys import member_token, org_resize_token, resize_token, token
from hybrid_counter.orgs.counters import org_counters
from hybrid_counter.resources import items
from hybrid_counter.resources.table import Item, ResourceTable

HoldKey = tuple[str, str, str]  # (holder, kind, id)


class HoldLevels:
    """One reading of the counters a refusal's given-up holds are on (each read once)."""

    def __init__(self, table: ResourceTable, accounts: CounterStore) -> None:
        self._table = table
        self._accounts = accounts
        self._account_states: dict[tuple[str, str], CounterState | None] = {}
        self._org_states: dict[tuple[str, str], ShardSet | None] = {}

    def at_account(self, key: HoldKey, item: Item | None, *, cautious: bool) -> int:
        """What the hold's item holds on its account's counter (the counter read only where the
        item's notes do not say)."""
        holder, kind, rid = key
        if item is None:
            return 0
        incarnation = items.incarnation_of(item)
        if items.state_of(item) == items.DELETING:
            handoff = items.since(item, "org_handoff")
            if items.account_released(item) or (handoff and handoff == items.since(item, "delete_request")):
                return 0
            state = self._account(holder, kind)
            released = state is not None and state.last_release == token(rid, incarnation)
            return 0 if released else items.units_of(item)
        if items.resizing(item):
            state = self._account(holder, kind)
            moved = state is not None and state.last_resize == resize_token(
                rid, incarnation, _resize_request(item)
            )
            return _resized(item, moved=True if moved else None, cautious=cautious)
        return items.units_of(item)

    def at_org(self, key: HoldKey, item: Item | None, *, cautious: bool) -> int:
        """What the hold's item holds on its organization's counter (its account's, for an
        account in none; the organization's counter items read only where the item's notes do
        not say)."""
        holder, kind, rid = key
        org = None if item is None else items.org_of(item)
        if item is None or org is None:
            return self.at_account(key, item, cautious=cautious)
        incarnation = items.incarnation_of(item)
        if items.state_of(item) == items.DELETING:
            if item.get("org_released", {}).get("BOOL"):
                return 0
            shard = self._shard(org, kind, items.org_shard(item))
            released = shard is not None and shard.last_release == member_token(holder, rid, incarnation)
            return 0 if released else items.units_of(item)
        if items.resizing(item):
            request = _resize_request(item)
            moved: bool | None = None
            if items.since(item, "org_unresized") == request:
                moved = False  # (a grow its account refused, undone here)
            else:  # (the undo's token wins over the grow's note: it came after)
                shard = self._shard(org, kind, items.org_shard(item))
                last = None if shard is None else shard.last_resize
                if last == org_resize_token(holder, rid, incarnation, request, undo=True):
                    moved = False
                elif items.since(item, "org_resized") == request or last == org_resize_token(
                    holder, rid, incarnation, request
                ):
                    moved = True
            return _resized(item, moved=moved, cautious=cautious)
        return items.units_of(item)

    def _shard(self, org: str, kind: str, number: int) -> CounterState | None:
        shards = self._org(org, kind)
        return None if shards is None else shards.get(number).state

    def _account(self, holder: str, kind: str) -> CounterState | None:
        if (holder, kind) not in self._account_states:
            try:
                self._account_states[holder, kind] = self._accounts.read(holder, kind=kind)
            except (ClientError, BotoCoreError):
                self._account_states[holder, kind] = None  # (not known)
        return self._account_states[holder, kind]

    def _org(self, org: str, kind: str) -> ShardSet | None:
        if (org, kind) not in self._org_states:
            try:
                self._org_states[org, kind] = org_counters(self._table.clients, self._table.name, org).get(
                    kind
                )
            except (ClientError, BotoCoreError):
                self._org_states[org, kind] = None  # (not known)
        return self._org_states[org, kind]


def _resize_request(item: Item) -> str:
    return str(item.get("resize_request", {}).get("S", ""))


def _resized(item: dict[str, Any], *, moved: bool | None, cautious: bool) -> int:
    """Its size after the move (``moved``), before it (not moved, or undone), or, not known,
    the larger for the 503 rule and the smaller for a dry run."""
    before = int(item.get("resize_from", {}).get("N", str(items.units_of(item))))
    after = int(item.get("resize_to", {}).get("N", str(before)))
    if moved is not None:
        return after if moved else before
    return max(before, after) if cautious else min(before, after)
