"""Review 51: sequences tried that held (kept as regression checks; they pass on the current code)."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import HoldExpired
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _releases(call: Call) -> bool:
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
        and "last_release" in call.body.get("UpdateExpression", "")
    )


def _makes_live(call: Call) -> bool:
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("sk", {}).get("S", "")).startswith("RESOURCE#")
        and "REMOVE expires_at" in call.body.get("UpdateExpression", "")
    )


def _solo(org: Org, limit: int) -> str:
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, limit, kind=SEATS)
    return account


def test_an_expiry_stalled_after_its_claim_and_a_confirm_between_never_both_take_effect(
    settings, clients, stream
) -> None:
    org = Org(settings, clients, stream, limit=10)
    account = _solo(org, 2)
    org.service.create(account, "h", {}, "h", kind=SEATS, units=2, hold_seconds=60)
    org.drain(account)
    org.clock.now += 61
    expirer = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        run = race.start("expire", expirer.holds.sweep)
        stop_before(race, run, _releases)
        with pytest.raises(HoldExpired):
            org.service.confirm(account, "h", kind=SEATS)
        org.clock.now += org.settings.pending_grace_seconds / 2 + 1
        race.finish(run)
    # reverted (too slow), then the next sweeps expire it; nothing held, counters at 0
    with pytest.raises(HoldExpired):
        org.service.confirm(account, "h", kind=SEATS)
    for _ in range(2):
        org.clock.now += org.settings.pending_grace_seconds + 1
        org.sweeper().sweep()
        org.drain(account)
    state = org.service.counters.read(account, kind=SEATS)
    assert (state.best_effort, state.eventual, org.resources(account)) == (0, 0, [])


def test_a_hold_created_stalled_past_its_deadline_is_expired_once_and_releases_everything(
    settings, clients, stream
) -> None:
    org = Org(settings, clients, stream, limit=10)
    account = _solo(org, 2)
    creator = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        create = race.start(
            "create", lambda: creator.create(account, "h", {}, "h", kind=SEATS, units=2, hold_seconds=5)
        )
        stop_before(race, create, _makes_live)
        org.drain(account)  # the stream path makes it live
        org.clock.now += 10
        org.sweeper().sweep()  # expires it (past its deadline)
        org.drain(account)
        race.finish(create)
    org.drain(account)
    org.service.create(account, "y", {}, "y", kind=SEATS, units=2)
    org.drain(account)
    state = org.service.counters.read(account, kind=SEATS)
    assert (state.best_effort, state.eventual) == (2, 2)
