"""Review 55 (hostile): a reconcile (``_admit_split``: a rebase for the basis its caller read) that
stalls between its picture and ``rebase`` carries a lowering's basis (``lowering:<until>``) that
is no longer what is laid out. ``rebase`` reads the shards again, but ``_target`` keeps the asked
lowering within its window whatever was laid out since:

- with no override, ``_not_older`` only replaces a *plan* view by a later one: a lowering has no
  plan tag, so it is laid out over a newer plan (processes still caching the older plan then
  admit against it: the class of reviews 48 and 53);
- with an override (review 53's new branch), the stale lowering is laid out over a higher
  override written and laid out since: creates are refused against the old lowering.
"""

from __future__ import annotations

from functools import partial

import pytest

from tests.explorer.scheduler import Call, Race
from tests.faults import ProcessDied, injected
from tests.integration.test_org_governance_review import org_limit
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


def credit_body(body: dict) -> bool:
    return "ADD #allowance" in body.get("UpdateExpression", "")


def is_record_read(call: Call) -> bool:
    return call.operation == "GetItem" and call.body.get("Key", {}).get("sk", {}).get("S", "").startswith(
        "REBASE#"
    )


def lose_allowance(org, onto: int | None = None) -> None:
    """A create whose shard has no room moves allowance, and its process dies between the debit
    and the credit: the allowance moved is lost (claims below the basis) until a reconcile."""
    picture = org.picture()
    shard = (
        onto if onto is not None else min(picture.shards.values(), key=lambda s: (s.room, s.number)).number
    )

    def fill_until_a_move_dies() -> None:
        for n in range(12):
            org.create_on(shard, service=org.new_service(), n=n)

    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash", where=credit_body),
        pytest.raises(ProcessDied),
    ):
        fill_until_a_move_dies()


def stall_a_reconcile(race: Race, org, shard: int, service):
    """Creates on ``shard`` by ``service`` until one reaches a reconcile's rebase (stopped before
    it looks for a record): the basis it carries is the one its picture had."""
    for n in range(12):
        op = race.start(f"a{n}", partial(org.create_on, shard, service=service, n=n))
        while not op.done:
            pending = op.pending
            if pending is not None and is_record_read(pending):
                return op
            race.step(op)
        print("create before the reconcile:", op.error)
    raise AssertionError("no create reached a reconcile")


def test_a_stale_reconcile_never_lays_a_lowering_out_over_a_newer_plan(split_org):
    # Given a plan (v1) of 10 seats over 4 shards, no override, and a process S that caches v1
    org = split_org(10, 4)
    stale = org.new_service()
    assert outcome_of(partial(org.create_on, 0, service=stale, n=0)) == "admitted"
    alice = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice sets an override of 6 (not forced): her lowering basis 6 is laid out and her
        # process dies before her override's write (the basis stands for its 30 s window) ...
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 6, by="alice"))
        stop_before(race, lowering, is_override_write)
        race.step(lowering, fault="crash")
        laid = org.picture()
        assert laid.basis.limit == 6, laid.basis
        assert laid.basis.lowering_until is not None, laid.basis
        # ... a move dies (allowance lost) and a create A that then needs a reconcile reads that
        # lowering basis and stalls before its rebase
        lose_allowance(org)
        creator = org.new_service()
        a = stall_a_reconcile(race, org, 3, creator)
        print("A stalled with:", org.picture().basis, summary(org.picture()), "held", org.held())
        # ... the plan is lowered to 5 (v2; what is held fits) and a fresh create lays v2 out
        held = org.held()
        assert held <= 5, held
        org.service.put_plan(org.plan, {SEATS: 5})
        print("fresh create:", outcome_of(partial(org.create_on, 1, service=org.new_service(), n=1)))
        v2 = org.picture()
        print("v2 laid out:", v2.basis, summary(v2))
        assert v2.basis.limit == 5
        assert v2.basis.plan_tag is not None
        # ... a release frees room on one shard and a move of it dies (claims below 5 again)
        live = org.live()
        victim = next(k for k in live if k.split("/")[0].endswith(org.accounts[0]))
        resource = victim.split("/", 1)[1]
        org.service.delete(org.accounts[0], resource, kind=SEATS)
        org.drain()
        lose_allowance(org, onto=3)
        print("before A goes on:", summary(org.picture()), "held", org.held())
        # ... and A goes on to whatever its reconcile lays out (before the fix: the lowering it
        # carried), and its process dies right after (its rebase read the plan again and
        # refreshed A's own cache), or to its end
        while not a.done and race.next_call(a) != "DeleteItem":
            race.step(a)
        laid = org.picture()
        if not a.done:
            race.step(a, fault="crash")
    print("after A:", a.error, laid.basis, summary(laid))
    # Then S, still caching v1, creates
    outcomes = [outcome_of(partial(org.create_on, n % 4, service=stale, n=n)) for n in range(8)]
    print("S:", outcomes, "held", org.held(), org.picture().basis)
    assert org.held() <= 5, (org.held(), outcomes, laid.basis, summary(laid))
    assert laid.basis.limit <= 5, (laid.basis, summary(laid))


def test_a_stale_reconcile_never_lays_a_lowering_out_over_a_raised_override(split_org):
    # Given an override of 10 seats over 4 shards, 1 held
    org = split_org(20, 4)
    org.service.set_org_limit(org.org_id, SEATS, 10, by="setup")
    assert outcome_of(partial(org.create_on, 0, n=0)) == "admitted"
    alice = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When alice lowers it to 4: her lowering basis 4 is laid out; she stalls before her write
        lowering = race.start("alice", lambda: alice.set_org_limit(org.org_id, SEATS, 4, by="alice"))
        stop_before(race, lowering, is_override_write)
        # ... a move dies and a create A that then needs a reconcile reads her lowering and stalls
        lose_allowance(org)
        a = stall_a_reconcile(race, org, 3, org.new_service())
        print("A stalled with:", org.picture().basis, summary(org.picture()), "held", org.held())
        # ... alice finishes (override 4 written, laid out), then bob raises it to 12 (laid out)
        race.finish(lowering)
        assert lowering.error is None, lowering.error
        org.service.set_org_limit(org.org_id, SEATS, 12, by="bob")
        raised = org.picture()
        print("raised:", raised.basis, summary(raised))
        assert raised.basis.limit == 12
        # ... a move dies again (claims below 12), and A goes on: its reconcile lays out what it carried
        lose_allowance(org, onto=3)
        race.finish(a)
    laid = org.picture()
    print("after A:", a.error, laid.basis, summary(laid), "held", org.held())
    limit, source, used = org_limit(org)
    # Then, the limit being 12 with few held, creates are admitted up to 12
    outcomes = [outcome_of(partial(org.create_on, n % 4, service=org.new_service(), n=n)) for n in range(4)]
    print("limit", limit, source, used, "creates:", outcomes, "held", org.held())
    assert laid.basis.limit == 12, (laid.basis, summary(laid))
    assert outcomes == ["admitted"] * 4, (outcomes, org.held())
