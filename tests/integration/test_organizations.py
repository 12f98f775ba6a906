"""Organizations (issue 24): a limit on the total of several accounts, exact at both levels,
against DynamoDB Local. Each level admits with its own conditional write (organization first,
then account); membership changes only while an account is empty."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import (
    LimitBelowUsage,
    LimitExceeded,
    MembershipConflict,
    NotFound,
)
from hybrid_counter.keys import org_pk
from hybrid_counter.resources import ResourceService

pytestmark = pytest.mark.integration

SEATS = "seats"


@pytest.fixture
def org(service: ResourceService) -> Callable[..., str]:
    """A fresh organization on a fresh plan with these limits, and these accounts its members."""

    def make(limits: dict[str, int], *members: str) -> str:
        plan_id, org_id = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
        service.put_plan(plan_id, limits)
        service.put_org(org_id, plan_id)
        for account in members:
            service.add_member(org_id, account)
        return org_id

    return make


def used(service: ResourceService, account: str, kind: str = SEATS) -> tuple[int, int]:
    usage = service.usage(account).kinds[kind]
    return usage.best_effort, usage.eventual


def test_two_accounts_share_their_organizations_limit_exactly(service, new_account, org, drain, drain_org):
    # Given an organization of 10 seats with two accounts of 8 seats each (overrides)
    first, second = new_account(), new_account()
    org_id = org({SEATS: 10}, first, second)
    service.set_limit(first, 8, kind=SEATS)
    service.set_limit(second, 8, kind=SEATS)
    # When the first takes 6 and the second 4
    service.create(first, "a", {}, kind=SEATS, units=6)
    service.create(second, "b", {}, kind=SEATS, units=4)
    # Then the organization is full: a seat more is refused for either, by the organization
    for account in (first, second):
        with pytest.raises(LimitExceeded) as refused:
            service.create(account, "c", {}, kind=SEATS, units=1)
        assert (refused.value.scope, refused.value.limit, refused.value.used) == ("organization", 10, 10)
    # And an account over its own limit is refused by its own
    with pytest.raises(LimitExceeded) as own:
        service.create(first, "d", {}, kind=SEATS, units=3)
    assert own.value.scope in ("account", "organization")
    # And the usage reads say so at both levels
    drain(first)
    drain(second)
    drain_org(org_id)
    room = service.usage(first).kinds[SEATS].org
    assert room is not None
    assert (room.org_id, room.limit, room.used, room.remaining) == (org_id, 10, 10, 0)
    usage = service.org_usage(org_id)
    assert (usage.kinds[SEATS].used, usage.kinds[SEATS].limit) == (10, 10)
    assert [(a.account_id, a.used) for a in usage.kinds[SEATS].top] == [(first, 6), (second, 4)]


def test_n_concurrent_creates_of_many_accounts_admit_exactly_the_organizations_limit(
    service, new_account, org, drain, drain_org
):
    # Given an organization of 10 seats and 5 member accounts of 10 seats each
    accounts = [new_account() for _ in range(5)]
    org_org = org({SEATS: 10}, *accounts)
    for account in accounts:
        service.set_limit(account, 10, kind=SEATS)
    # When 40 creates race (8 per account)
    admitted: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()

    def create(account: str) -> None:
        try:
            _resource, _ = service.create(account, "x", {}, kind=SEATS)
            with lock:
                admitted.append(account)
        except LimitExceeded as error:
            with lock:
                refused.append(error.scope)

    threads = [threading.Thread(target=create, args=(a,)) for a in accounts for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly 10 were admitted across the accounts, the rest refused by the organization
    assert len(admitted) == 10
    assert set(refused) == {"organization"}
    for account in accounts:
        drain(account)
    drain_org(org_org)
    state = service.org_counters(org_org)[SEATS]
    assert (state.best_effort, state.eventual) == (10, 10)


def test_a_delete_frees_the_unit_at_both_levels_at_once(service, new_account, org, drain, drain_org):
    first, second = new_account(), new_account()
    org_id = org({SEATS: 2}, first, second)
    service.set_limit(first, 5, kind=SEATS)
    service.set_limit(second, 5, kind=SEATS)
    a, _ = service.create(first, "a", {}, kind=SEATS)
    service.create(second, "b", {}, kind=SEATS)
    drain(first)
    drain_org(org_id)
    with pytest.raises(LimitExceeded):
        service.create(second, "c", {}, kind=SEATS)
    # When the first account's seat is deleted, the second can take it at once
    service.delete(first, a.resource_id, kind=SEATS)
    service.create(second, "c", {}, kind=SEATS)
    drain(first)
    drain(second)
    drain_org(org_id)
    state = service.org_counters(org_id)[SEATS]
    assert (state.best_effort, state.eventual) == (2, 2)
    assert used(service, first) == (0, 0)


def test_the_organizations_records_delivered_twice_count_each_resource_once_there(
    service, new_account, org, stream, counter, drain
):
    # Given an organization of 10 seats whose two members hold 3 and 2, counted on their accounts
    first, second = new_account(), new_account()
    org_id = org({SEATS: 10}, first, second)
    service.set_limit(first, 5, kind=SEATS)
    service.set_limit(second, 5, kind=SEATS)
    service.create(first, "a", {}, kind=SEATS, units=3)
    service.create(second, "b", {}, kind=SEATS, units=2)
    drain(first)
    drain(second)
    # When the records of the organization's partition are delivered, then delivered again
    records = []
    while batch := stream.records_of(org_pk(org_id)):
        records += batch
    assert process_stream_batch(records, counter).failed_sequence_numbers == []
    again = process_stream_batch(records, counter)
    # Then the second delivery counts nothing: the organization's eventual holds each resource once
    assert again.failed_sequence_numbers == []
    assert (again.report.counted, again.report.already_done) == (0, 2)
    state = service.org_counters(org_id)[SEATS]
    assert (state.best_effort, state.eventual) == (5, 5)


def test_an_account_without_an_organization_is_judged_by_its_own_limit_alone(service, account):
    service.set_limit(account, 3, kind=SEATS)
    service.create(account, "a", {}, kind=SEATS, units=3)
    with pytest.raises(LimitExceeded) as refused:
        service.create(account, "b", {}, kind=SEATS)
    assert refused.value.scope == "account"
    assert service.usage(account).org_id is None
    assert service.usage(account).kinds[SEATS].org is None


def test_membership_changes_only_while_the_account_is_empty(service, new_account, org):
    first, other = new_account(), new_account()
    org_id = org({SEATS: 10})
    other_org = org({SEATS: 10})
    service.set_limit(first, 5, kind=SEATS)
    service.set_limit(other, 5, kind=SEATS)
    service.create(first, "a", {}, kind=SEATS)
    # A non-empty account cannot join
    with pytest.raises(MembershipConflict) as busy:
        service.add_member(org_id, first)
    assert busy.value.code == "AccountNotEmpty"
    # An empty one can, and a repeat changes nothing; another organization cannot take it
    assert service.add_member(org_id, other) is True
    assert service.add_member(org_id, other) is False
    with pytest.raises(MembershipConflict) as taken:
        service.add_member(other_org, other)
    assert taken.value.code == "AccountInAnotherOrganization"
    # A member with resources cannot leave; emptied, it can
    resource, _ = service.create(other, "b", {}, kind=SEATS)
    with pytest.raises(MembershipConflict):
        service.remove_member(org_id, other)
    service.delete(other, resource.resource_id, kind=SEATS)
    assert service.remove_member(org_id, other) is True
    assert service.get_org(org_id).members == 0


def test_an_organization_is_deleted_only_without_members(service, new_account, org):
    member = new_account()
    org_id = org({SEATS: 10}, member)
    with pytest.raises(MembershipConflict) as refused:
        service.delete_org(org_id)
    assert refused.value.code == "OrganizationNotEmpty"
    service.remove_member(org_id, member)
    service.delete_org(org_id)
    with pytest.raises(NotFound):
        service.get_org(org_id)


def test_an_organizations_override_and_plan_follow_the_accounts_rules(service, new_account, org):
    member = new_account()
    org_id = org({SEATS: 10}, member)
    service.set_limit(member, 20, kind=SEATS)
    service.create(member, "a", {}, kind=SEATS, units=6)
    # Below use: refused unless forced, in history either way
    with pytest.raises(LimitBelowUsage):
        service.set_org_limit(org_id, SEATS, 5)
    service.set_org_limit(org_id, SEATS, 7)
    with pytest.raises(LimitExceeded):
        service.create(member, "b", {}, kind=SEATS, units=2)
    service.set_org_limit(org_id, SEATS, None)  # back to the plan's 10
    service.create(member, "b", {}, kind=SEATS, units=2)
    history = [(r["what"], r["old"], r["new"]) for r in service.org_history(org_id).items]
    assert history[:2] == [("override_removed", 7, None), ("override", None, 7)]
    # A plan move below use is refused unless forced
    small = f"plan-{uuid.uuid4().hex[:8]}"
    service.put_plan(small, {SEATS: 4})
    with pytest.raises(LimitBelowUsage):
        service.put_org(org_id, small)
    service.put_org(org_id, small, force=True)
    assert service.get_org(org_id).plan_id == small
