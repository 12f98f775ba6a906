"""Dry runs of an organization's member (issue 24), found while building the HTTP surface.

`?dry_run=true` promises to judge a request "as the request itself would be" (user guide, Dry
runs). For a member, the create itself is judged by its organization too; the dry run
(ResourceService.would_create / would_resize -> _would_admit) reads the account's counter and
limit only. Found while building the HTTP surface (both failed then); the dry run now judges both levels.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.resources import ResourceService

pytestmark = pytest.mark.integration

SEATS = "seats"


def full_organization(service: ResourceService, new_account: Callable[[], str]) -> tuple[str, str]:
    """A member with room of its own (5 seats) in an organization whose 2 seats are taken."""
    member, other = new_account(), new_account()
    plan, org = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    service.put_plan(plan, {SEATS: 2})
    service.put_org(org, plan)
    for account in (member, other):
        service.add_member(org, account)
        service.set_limit(account, 5, kind=SEATS)
    service.create(other, "taken", {}, kind=SEATS, units=2)
    return member, other


def test_a_members_dry_run_says_what_its_organization_would_answer(service, new_account):
    member, _ = full_organization(service, new_account)
    # Given the create itself is refused by the organization
    with pytest.raises(LimitExceeded) as refused:
        service.create(member, "mine", {}, kind=SEATS)
    assert refused.value.scope == "organization"
    # Then its dry run says it would not be admitted, by its organization, with its numbers
    answer = service.would_create(member, "mine", {}, kind=SEATS)
    assert (answer.would_admit, answer.scope) == (False, "organization")
    body = answer.to_json()
    assert body["organization"]["would_admit"] is False
    assert (body["organization"]["limit"], body["organization"]["used"]) == (2, 2)
    # And the other member's dry run of a create its own limit refuses names its account
    own = service.would_create(member, "big", {}, kind=SEATS, units=6)
    assert (own.would_admit, own.scope) == (False, "account")


def test_a_members_resize_dry_run_answers_as_the_resize_does_at_each_level(service, new_account):
    # Given a member that may hold 5 seats, holding 1, in an organization of 3
    member = new_account()
    plan, org = f"plan-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    service.put_plan(plan, {SEATS: 3})
    service.put_org(org, plan)
    service.add_member(org, member)
    service.set_limit(member, 5, kind=SEATS)
    resource, _ = service.create(member, "r", {}, kind=SEATS)
    rid = resource.resource_id
    # Then a grow to 3 would be admitted, and is
    assert service.would_resize(member, rid, 3, kind=SEATS).would_admit is True
    # And a grow to 4 would not, by the organization, and is refused by it
    answer = service.would_resize(member, rid, 4, kind=SEATS)
    assert (answer.would_admit, answer.scope) == (False, "organization")
    with pytest.raises(LimitExceeded) as refused:
        service.resize(member, rid, 4, kind=SEATS)
    assert refused.value.scope == "organization"
    # And a grow to 6 would not, by its account either
    assert service.would_resize(member, rid, 6, kind=SEATS).would_admit is False
    assert service.resize(member, rid, 3, kind=SEATS).units == 3
