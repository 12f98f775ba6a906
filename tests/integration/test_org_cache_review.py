"""A process's cache of an organization (plans/limits.py, ``PlanCacheSeconds``) against the
organization deleted and created again under its id: a member of the new creation is judged by
the new creation's plan and shards, whatever the process cached of the old one, or of none.

The membership names the creation it joined (``org_epoch``), and an opened counter item carries
its creation's mark: the judge reads the organization again whenever what it cached is of
another creation. Against DynamoDB Local, one process (``ResourceService``) kept across the steps
and others doing the operators' part.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.resources import ResourceService
from tests.integration.test_org_deletion_races import created_again
from tests.integration.test_org_deletion_review import written_before
from tests.integration.test_split_review import SEATS, SplitOrg, split_org

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def deleted_by_another_process(org: SplitOrg, account: str) -> None:
    """The account leaves and the organization is deleted, by a process other than the one kept."""
    other = org.new_service()
    assert other.remove_member(org.org_id, account)
    other.delete_org(org.org_id)


def cached_then_created_again(
    split_org: Callable[..., SplitOrg], shards: int, limit: int
) -> tuple[SplitOrg, ResourceService, str]:
    """An organization of 10 seats (over ``shards`` items) whose member used seats, read by a
    process (its plan of 10, its shards, cached), then left by its member and deleted by another
    process, and created again under its id on a plan of ``limit`` seats (one item) with a new
    member: (the organization, the process, the new member)."""
    org = split_org(10, shards, members=1)
    account = org.accounts[0]
    written_before(org, account)
    process = org.new_service()
    process.org_usage(org.org_id)
    deleted_by_another_process(org, account)
    _, member = created_again(org, limit)
    return org, process, member


def created_by(
    process: ResourceService, org: SplitOrg, account: str, tries: int
) -> tuple[int, list[LimitExceeded]]:
    """``tries`` creates of seats by the account through ``process``: (how many were admitted,
    the refusals)."""
    admitted, refusals = 0, []
    for _ in range(tries):
        rid = org.rid_on(0, 1)
        try:
            process.create(account, rid, {}, rid, kind=SEATS)
            admitted += 1
        except LimitExceeded as refused:
            refusals.append(refused)
    return admitted, refusals


def test_a_process_that_cached_the_organization_as_absent_admits_the_members_of_its_new_creation(split_org):
    # Given an organization of 10 seats and a member that used seats, and a process that read the
    # organization (t0), then the member's usage (t0 + 30 s: its membership cached until t0 + 90)
    org = split_org(10, 1, members=1)
    account = org.accounts[0]
    written_before(org, account)
    process = org.new_service()
    process.org_usage(org.org_id)
    org.clock.now += 30
    process.usage(account)
    # ... the member leaves and the organization is deleted, by another process
    deleted_by_another_process(org, account)
    # ... and at t0 + 61 the process reads the member's usage again: its cached membership names
    # the organization, which it reads again and finds absent (cached so until t0 + 121)
    org.clock.now += 31
    process.usage(account)
    # When the organization is created again under its id (5 seats), with a new member, and the
    # old one joins it again, and both create through the process within its cache's time
    _, member = created_again(org, 5)
    assert org.new_service().add_member(org.org_id, account)
    created = [created_by(process, org, who, 1) for who in (account, member)]
    # Then both are admitted: judged by the organization they joined, not by a cached absence
    # (which read as a limit of 0)
    assert created == [(1, []), (1, [])]
    assert org.new_service().org_usage(org.org_id).kinds[SEATS].used == 2


@pytest.mark.parametrize("shards", [1, 2])
def test_a_process_that_cached_the_deleted_organization_judges_its_new_creation_by_its_own_plan(
    split_org, shards
):
    # Given an organization of 10 seats (over 1 or 2 items) and a member that used seats, and a
    # process that read the organization (its plan of 10 seats, its shards); the member leaves
    # and the organization is deleted, by another process, and created again under its id on a
    # plan of 1 seat, one item, with a new member
    org, process, member = cached_then_created_again(split_org, shards, 1)
    # When the new member creates 3 seats through the process within its cache's time
    admitted, refusals = created_by(process, org, member, 3)
    # Then one is admitted and the others refused by the organization's limit of 1: the new
    # creation is judged by its own plan and laid out by it, never by the old one's cached 10
    assert admitted == 1
    assert [(r.scope, r.limit) for r in refusals] == [("organization", 1)] * 2
    assert org.new_service().org_usage(org.org_id).kinds[SEATS].used == 1
    # ... and a dry run through the process answers as the creates were judged
    answer = process.would_create(member, "dry", {}, "dry", kind=SEATS)
    assert answer.organization is not None
    assert (answer.organization.limit, answer.organization.would_admit) == (1, False)


@pytest.mark.parametrize("shards", [1, 2])
def test_a_member_resize_through_a_process_that_cached_the_deleted_organization_is_judged_by_the_new_plan(
    split_org, shards
):
    # Given an organization of 10 seats (over 1 or 2 items), read by a process, then deleted by
    # another and created again under its id on a plan of 2 seats, with a new member that holds
    # one seat (created by another process)
    org, process, member = cached_then_created_again(split_org, shards, 2)
    rid = org.rid_on(0, 1)
    org.new_service().create(member, rid, {}, rid, kind=SEATS)
    # When the member grows it to 5 units through the process within its cache's time
    with pytest.raises(LimitExceeded) as refused:
        process.resize(member, rid, 5, kind=SEATS)
    # Then the grow is refused by the new organization's limit of 2, and the seat keeps 1 unit
    assert (refused.value.scope, refused.value.limit) == ("organization", 2)
    assert process.get(member, rid, kind=SEATS).units == 1
    assert org.new_service().org_usage(org.org_id).kinds[SEATS].used == 1


def test_the_usage_reads_of_a_process_that_cached_the_deleted_organization_show_the_new_ones_limit(split_org):
    # Given an organization of 10 seats, read by a process, then deleted by another and created
    # again under its id on a plan of 1 seat, with a new member holding a seat (another process)
    org, process, member = cached_then_created_again(split_org, 1, 1)
    rid = org.rid_on(0, 1)
    org.new_service().create(member, rid, {}, rid, kind=SEATS)
    # When the process reads the organization's usage, and the member's, within its cache's time
    seen = process.org_usage(org.org_id).kinds[SEATS]
    room = process.usage(member).kinds[SEATS].org
    # Then both show the new organization's limit of 1, all of it used
    assert (seen.limit, seen.used) == (1, 1)
    assert room is not None
    assert (room.limit, room.used) == (1, 1)
