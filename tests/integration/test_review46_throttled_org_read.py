"""Review 46 (hostile, 5503a97's own fixes): Limits.org_shards now raises the domain's error
(Throttled / StoreUnavailable) when a member's admission re-reads its organization after its
process's cache expired (mutation 163). OrgLevel.admit reads it (``_single``) after the create
has put its pending item, and CreateFlow._admit_at_org does not catch a domain error: the create
answers 429 ("not done, retry"), but its pending item is never rolled back (every other
not-applied outcome at the organization rolls it back first). A retry of that PUT is then
answered 503 for the whole grace period, and after it ADOPTS the item (C1a): live, indexed, with
no admission at either level; the sweeper counts it, and the organization is past its limit.
The adoption overshoot is documented (§3 table, C1a), but only as the residue of a rollback that
failed: here nothing failed but one throttled read, and no rollback was even tried. A domain
error raised before the organization's admission is written now rolls the item back."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_counter.errors import LimitExceeded, Throttled
from hybrid_counter.keys import RESOURCE_PREFIX
from tests.explorer.scheduler import Call, Race
from tests.faults import injected
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _reads_the_orgs_profile(body: dict[str, Any]) -> bool:
    key = body.get("Key", {})
    return str(key.get("pk", {}).get("S", "")).startswith("ORG#") and key.get("sk", {}).get("S") == "PROFILE"


def _puts_the_pending_item(call: Call) -> bool:
    item = call.body.get("Item", {})
    return call.operation == "PutItem" and str(item.get("sk", {}).get("S", "")).startswith(RESOURCE_PREFIX)


def test_a_create_answered_429_by_a_throttled_read_of_its_org_leaves_an_item_a_retry_adopts_past_the_limit(
    settings, clients, stream
) -> None:
    # Given an organization of 1 seat, empty, and a member's PUT of x whose process's cache of the
    # organization expires (a stall of PlanCacheSeconds) after its precheck, just before its put
    org = Org(settings, clients, stream, limit=1)
    first, second = org.members
    creator = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        create = race.start("create", lambda: creator.create(first, "x", {}, "x", kind=SEATS))
        stop_before(race, create, _puts_the_pending_item)
        org.clock.now += org.settings.plan_cache_seconds + 1
        # When its admission's read of the organization (org_shards) is throttled on every attempt
        with injected(
            org.clients.dynamodb,
            "GetItem",
            error="ThrottlingException",
            times=1000,
            where=_reads_the_orgs_profile,
        ):
            race.finish(create)
    # Then it answers a domain error (429: "not done, retry the request") ...
    assert isinstance(create.error, Throttled), create.error
    org.drain()
    # ... and the other member takes the organization's only seat
    org.service.create(second, "y", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (1, 1)
    # When the caller retries its PUT: nothing of it is left (its item rolled back as any create
    # not admitted), so it is judged as a new create, and refused: the organization is full
    with pytest.raises(LimitExceeded):
        creator.create(first, "x", {}, "x", kind=SEATS)
    # Then, past the grace period and a sweep, still exactly the organization's 1 seat is live
    # (before: the item was left, adopted by the retry (200) with no admission at either level,
    # counted by the sweeper: 2 seats live of 1)
    org.clock.now += org.settings.pending_grace_seconds + 1
    with pytest.raises(LimitExceeded):
        creator.create(first, "x", {}, "x", kind=SEATS)
    org.sweeper().sweep()
    org.drain()
    assert (org.live_units(), org.org_counters()) == (1, (1, 1))
