"""Review 48 (hostile): a reconcile (a rebase for the same basis, handing lost allowance out) whose
caller read the picture before a plan change was laid out lays the OLD plan's limit out again over
the new one (split.py ``rebase`` -> ``_target(picture, basis)``: the asked basis is the caller's
stale picture's, and only an override on the new picture replaces it). Processes whose cached view
of the plan is the old one then admit against the old limit."""

from __future__ import annotations

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.explorer.scheduler import Call, Race
from tests.faults import ProcessDied, injected
from tests.integration.test_split_review import SEATS, split_org, stop_before, summary

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def _record_key(call: Call) -> bool:
    return call.body.get("Key", {}).get("sk", {}).get("S", "").startswith("REBASE#")


def is_record_read(call: Call) -> bool:
    return call.operation == "GetItem" and _record_key(call)


def is_record_delete(call: Call) -> bool:
    return call.operation == "DeleteItem" and _record_key(call)


def credit_body(body: dict) -> bool:
    return "ADD #allowance" in body.get("UpdateExpression", "")


def test_a_stale_reconcile_never_lays_an_older_plan_out_over_a_newer_one(split_org):
    # Given 10 seats (plan) over 2 shards, 9 held on shard 0 (laid out a0=10, a1=0), by processes
    # that have cached the plan (version v)
    org = split_org(10, 2)
    stale, p = org.new_service(), org.new_service()
    made = [org.create_on(0, service=stale, n=n) for n in range(8)]
    made.append(org.create_on(0, service=p, n=8))
    assert summary(org.picture())[0][:2] == (10, 9)
    # And a create on shard 1 that died between the two writes of its move: 1 allowance lost
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", where=credit_body),
        pytest.raises(ProcessDied),
    ):
        org.create_on(1, service=org.new_service())
    lost = org.picture()
    assert (lost.basis.limit, lost.claims) == (10, 9), summary(lost)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When P's create on shard 1 finds no room and no spare but 1 lost: it reconciles for
        # the basis it read (10, plan v), and stalls before reading the rebase record ...
        rec = race.start("p", lambda: org.create_on(1, service=p, n=1))
        stop_before(race, rec, is_record_read)
        # ... meanwhile the plan is lowered to 6, a fresh create lays it out (9 held > 6: every
        # allowance 0; refused), and 5 deletes bring the organization to 4 held
        org.service.put_plan(org.plan, {SEATS: 6})
        with pytest.raises(LimitExceeded):
            org.create_on(0, service=org.new_service(), n=2)
        assert org.picture().basis.limit == 6
        for gone in made[:5]:
            org.service.delete(gone.account_id, gone.resource_id, kind=SEATS)
        assert org.held() == 4
        # ... then P goes on, up to the end of its reconcile's rebase
        stop_before(race, rec, is_record_delete)
        race.step(rec)
        laid = org.picture()
        # (evidence) the reconcile laid the old plan's 10 out over the new plan's 6
        print("after the stale reconcile:", laid.basis, summary(laid))
        # ... and a process whose cache still has the plan at version v creates meanwhile
        admitted = 0
        for n in range(6):
            try:
                org.create_on(1, service=stale, n=n)
                admitted += 1
            except LimitExceeded:
                break
        race.finish(rec)
    # Then the organization never holds more than its limit of 6
    assert org.held() <= 6, (org.held(), admitted, summary(org.picture()))
    assert laid.basis.limit == 6, (laid.basis, summary(laid))


def test_a_create_that_lays_out_a_new_shard_never_lays_an_older_plan_out_over_a_newer_one(split_org):
    # Given 10 seats (plan, version v) over 2 shards, 1 held (a0=10, a1=0); a process Q that has
    # cached the organization's profile (2 shards) and a process S that has cached the plan (v)
    org = split_org(10, 2)
    org.create_on(0)
    q, stale = org.new_service(), org.new_service()
    assert q.limits.org_shards(org.org_id) == 2
    stale.limits.org_plan_basis(org.org_id, SEATS)
    # And S = 4 written on the profile, the kind not laid out again yet (set_org_shards' process
    # is between its two steps; or any process that reads the profile before the reshard's rebase)
    org.service.org_store.set_shards(org.org_id, 4)
    p = org.new_service()
    assert p.limits.org_shards(org.org_id) == 4
    p.limits.org_plan_basis(org.org_id, SEATS)
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When P's create goes to shard 3 (not there yet): it rebases for the basis it read
        # (10, plan v), and stalls before reading the rebase record ...
        rid = org.rid_on(3, 4)
        rec = race.start("p", lambda: p.create(org.accounts[1], rid, {}, rid, kind=SEATS))
        stop_before(race, rec, is_record_read)
        # ... the plan is lowered to 6 and Q (its plan read again, its profile still 2 shards)
        # lays it out over the 2 shards with its create
        org.service.put_plan(org.plan, {SEATS: 6})
        q.limits.forget(plan_id=org.plan)
        rid = org.rid_on(0, 2)
        q.create(org.accounts[2], rid, {}, rid, kind=SEATS)
        assert org.picture().basis.limit == 6
        # ... then P goes on, to the end of its rebase
        stop_before(race, rec, is_record_delete)
        race.step(rec)
        laid = org.picture()
        print("after P's rebase:", laid.basis, summary(laid))
        # ... and S, whose cache still has plan v, creates meanwhile
        for n in range(10):
            try:
                rid = org.rid_on(n % 2, 2)
                stale.create(org.accounts[n % 4], rid, {}, rid, kind=SEATS)
            except LimitExceeded:
                break
        race.finish(rec)
    # Then the organization never holds more than its limit of 6
    assert org.held() <= 6, (org.held(), summary(org.picture()))
