"""Review 49 (hostile): a change judged by a plan's limits, written after PUT /plans lowered that
plan.

An override's removal (an account's, an organization's) is judged by the owner's plan's limit
"as stored, read inside the check" (design.md §9), and a plan move (an account's, an
organization's) by the target plan's limits; each is then written in a transaction whose check is
only that the owner is still on the same plan *id* (the removal), or that the overrides it relied
on are still there (the move). Nothing fences the plan's *limits*: a PUT /plans that lowers the
plan between the judgement and the write is not seen, and the change lands unforced below use.

Each operation alone keeps its rule: the plan's lowering affects nobody at its time (the owner
has an override, or is not on that plan yet), and each change was judged by the plan as it stood
when read. Linearized, the plan's lowering comes first (it applied first), and the change, judged
then, is below use: it must be refused (409 LimitBelowUsage) unless forced.
"""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import LimitBelowUsage
from hybrid_counter.keys import plan_key
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Race
from tests.integration.test_org_governance_review import is_override_removal, org_limit
from tests.integration.test_split_review import split_org, stop_before, updates_of

pytestmark = pytest.mark.integration
SEATS = "seats"
__all__ = ["split_org"]


def _is_plan_move(call) -> bool:
    """An account's or an organization's plan move (governance/changes.py assign_plan, put_org)."""
    return any("SET plan_id = :new" in update for update in updates_of(call))


def test_an_accounts_override_removed_while_its_plan_is_lowered_is_never_left_below_use_unforced(
    service, settings, clients, account
):
    # Given an account on a plan of 10 seats with an override of 8, 6 seats held
    big = f"big-{uuid.uuid4().hex[:8]}"
    service.put_plan(big, {SEATS: 10})
    service.assign_plan(account, big)
    service.set_limit(account, 8, kind=SEATS)
    for n in range(6):
        service.create(account, f"r{n}", {}, kind=SEATS)
    remover = ResourceService(settings, clients)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        # When an operator removes the override (not forced: judged by the plan's 10, stored) and
        # is about to write it ...
        removal = race.start("remove", lambda: remover.remove_limit(account, kind=SEATS))
        stop_before(race, removal, is_override_removal)
        # ... another lowers the plan to 4 (the account has an override: not affected by it) ...
        ResourceService(settings, clients).put_plan(big, {SEATS: 4})
        race.finish(removal)
    # Then the removal is refused (the plan's 4 is under the 6 held), or the limit holds the use
    usage = ResourceService(settings, clients).usage(account).kinds[SEATS]
    assert isinstance(removal.error, LimitBelowUsage) or usage.limit >= usage.best_effort, (
        removal.error,
        usage.limit,
        usage.limit_source,
        usage.best_effort,
    )


@pytest.mark.parametrize("shards", [1, 4])
def test_an_organizations_override_removed_while_its_plan_is_lowered_is_never_left_below_use_unforced(
    split_org, shards
):
    # Given an organization on a plan of 10 seats with an override of 8, 6 seats held
    org = split_org(10, shards)
    org.service.set_org_limit(org.org_id, SEATS, 8)
    for n in range(6):
        org.create_on(n % shards, n=n)
    remover = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When an operator removes the override (not forced: judged by the plan's 10), about to
        # write it ...
        removal = race.start("remove", lambda: remover.set_org_limit(org.org_id, SEATS, None))
        stop_before(race, removal, is_override_removal)
        # ... another lowers the organization's plan to 4 (it has an override: not affected) ...
        org.new_service().put_plan(org.plan, {SEATS: 4})
        race.finish(removal)
    # Then the removal is refused, or the organization's limit holds its use
    limit, source, used = org_limit(org)
    assert isinstance(removal.error, LimitBelowUsage) or used <= limit, (removal.error, limit, source, used)


def test_an_account_moved_to_a_plan_lowered_meanwhile_is_never_left_below_use_unforced(
    service, settings, clients, account
):
    # Given an account on a plan of 10 seats (no override), 6 seats held, and a plan `mid` of 8
    # that no account is on
    big, mid = f"big-{uuid.uuid4().hex[:8]}", f"mid-{uuid.uuid4().hex[:8]}"
    service.put_plan(big, {SEATS: 10})
    service.put_plan(mid, {SEATS: 8})
    service.assign_plan(account, big)
    for n in range(6):
        service.create(account, f"r{n}", {}, kind=SEATS)
    mover = ResourceService(settings, clients)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        # When an operator moves it to `mid` (not forced: 8 holds the 6), about to write it ...
        move = race.start("move", lambda: mover.assign_plan(account, mid))
        stop_before(race, move, _is_plan_move)
        # ... another lowers `mid` to 4 (nobody is on it: it affects nobody) ...
        ResourceService(settings, clients).put_plan(mid, {SEATS: 4})
        race.finish(move)
    # Then the move is refused, or the account's limit holds its use (no create raced the move)
    usage = ResourceService(settings, clients).usage(account).kinds[SEATS]
    assert isinstance(move.error, LimitBelowUsage) or usage.limit >= usage.best_effort, (
        move.error,
        usage.limit,
        usage.best_effort,
    )


@pytest.mark.parametrize("shards", [1, 4])
def test_an_organization_moved_to_a_plan_lowered_meanwhile_is_never_left_below_use_unforced(
    split_org, shards
):
    # Given an organization on a plan of 10 seats (no override), 6 held, and a plan `mid` of 8
    # that nobody is on
    org = split_org(10, shards)
    for n in range(6):
        org.create_on(n % shards, n=n)
    mid = f"mid-{uuid.uuid4().hex[:8]}"
    org.service.put_plan(mid, {SEATS: 8})
    mover = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When an operator moves it to `mid` (PUT /orgs, not forced: 8 holds the 6), about to
        # write it ...
        move = race.start("move", lambda: mover.put_org(org.org_id, mid))
        stop_before(race, move, _is_plan_move)
        # ... another lowers `mid` to 4 (it affects nobody) ...
        org.new_service().put_plan(mid, {SEATS: 4})
        race.finish(move)
    # Then the move is refused, or the organization's limit holds its use
    limit, source, used = org_limit(org)
    assert isinstance(move.error, LimitBelowUsage) or used <= limit, (move.error, limit, source, used)


def _legacy_plan(settings, clients, plan_id: str, seats: int) -> None:
    """A plan item as written before plans had a version."""
    clients.dynamodb.put_item(
        TableName=settings.table_name,
        Item={**plan_key(plan_id), "limits": {"M": {SEATS: {"N": str(seats)}}}},
    )


def test_a_removal_judged_by_a_plan_from_before_versions_is_written_while_it_is_unchanged(
    service, settings, clients, account
):
    # Given an account on a plan item written before versions (10 seats), an override of 8, 6 held
    old = f"old-{uuid.uuid4().hex[:8]}"
    _legacy_plan(settings, clients, old, 10)
    service.assign_plan(account, old)
    service.set_limit(account, 8, kind=SEATS)
    for n in range(6):
        service.create(account, f"r{n}", {}, kind=SEATS)
    # When the override is removed (not forced: the plan's 10 holds the 6)
    service.remove_limit(account, kind=SEATS)
    # Then it is: the plan's check (no version yet) holds
    usage = ResourceService(settings, clients).usage(account).kinds[SEATS]
    assert (usage.limit, usage.limit_source) == (10, "plan")


def test_a_removal_judged_by_a_plan_from_before_versions_is_refused_once_it_is_lowered(
    service, settings, clients, account
):
    # Given an account on a plan item written before versions (10 seats), an override of 8, 6 held
    old = f"old-{uuid.uuid4().hex[:8]}"
    _legacy_plan(settings, clients, old, 10)
    service.assign_plan(account, old)
    service.set_limit(account, 8, kind=SEATS)
    for n in range(6):
        service.create(account, f"r{n}", {}, kind=SEATS)
    remover = ResourceService(settings, clients)
    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        # When the override's removal is about to be written, and the plan is lowered to 4 (its
        # first version) ...
        removal = race.start("remove", lambda: remover.remove_limit(account, kind=SEATS))
        stop_before(race, removal, is_override_removal)
        ResourceService(settings, clients).put_plan(old, {SEATS: 4})
        race.finish(removal)
    # Then the removal is refused
    assert isinstance(removal.error, LimitBelowUsage), removal.error
