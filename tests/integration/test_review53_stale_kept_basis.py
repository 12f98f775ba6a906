"""Review 53 (hostile): a strict rebase's kept basis (``KEPT``, counters/split.py) is the basis
``lower_first`` read before it called ``rebase``; ``rebase`` reads the shards again and only
replaces it by ``_not_older`` when the basis laid out since is a later view of the *plan*. When
what is laid out since is another lowering's basis (``lowering:<until>``, no plan tag), a stale
plan view survives as KEPT, and a refused lowering lays that OLDER plan's limit out over a newer
plan's. Processes still caching the older plan then admit against it (review 48's class,
reached through KEPT)."""

from __future__ import annotations

from functools import partial

import pytest

from hybrid_counter.errors import LimitBelowUsage
from tests.explorer.scheduler import Call, Race
from tests.integration.test_split_review import (
    SEATS,
    is_override_write,
    outcome_of,
    split_org,
    stop_before,
    summary,
)

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def is_record_read(call: Call) -> bool:
    return call.operation == "GetItem" and call.body.get("Key", {}).get("sk", {}).get("S", "").startswith(
        "REBASE#"
    )


def test_a_refused_lowering_never_lays_an_older_plan_out_over_a_newer_one(split_org):
    # Given 10 seats (plan v1) over 4 shards, 5 held by a process S that caches plan v1
    org = split_org(10, 4)
    stale = org.new_service()
    for n in range(5):
        org.create_on(n % 4, service=stale, n=n)
    assert org.picture().basis.limit == 10
    alice, bob = org.new_service(), org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers to 5 (not forced; 5 held fit): lower_first reads the basis (10, plan
        # v1) and she stalls just before her strict rebase looks for a record ...
        a = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 5, by="alice"))
        stop_before(race, a, is_record_read)
        # ... the plan is lowered to 7 (v2; 5 held fit) and a fresh process's create lays 7 out
        org.service.put_plan(org.plan, {SEATS: 7})
        assert outcome_of(partial(org.create_on, 1, service=org.new_service(), n=5)) == "admitted"
        assert org.picture().basis.limit == 7
        # ... bob lowers to 6 (6 held fit): his lowering basis 6 is laid out, and his process dies
        # before his override's write
        b = race.start("bob", lambda: bob.set_org_limit(org.org_id, SEATS, 6, by="bob"))
        stop_before(race, b, is_override_write)
        race.step(b, fault="crash")
        assert org.picture().basis.limit == 6
        # ... alice goes on: her frozen shards hold 6 > 5, so her plan keeps the basis she read
        race.finish(a)
    assert isinstance(a.error, LimitBelowUsage), a.error
    laid = org.picture()
    print("after alice's refused lowering:", laid.basis, summary(laid))
    # Then what is laid out is no higher than the limit in force (plan v2: 7) ...
    # ... and S, whose cache still has plan v1, is held to 7 with its creates
    outcomes = [outcome_of(partial(org.create_on, n % 4, service=stale, n=n)) for n in range(6)]
    assert org.held() <= 7, (org.held(), outcomes, laid.basis, summary(org.picture()))
    assert laid.basis.limit <= 7, (laid.basis, summary(laid))
