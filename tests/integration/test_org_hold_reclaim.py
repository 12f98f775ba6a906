"""A refusal at an organization reclaims its members' expired holds (design.md §12, review 54):
the sparse OrgHoldIndex (``hold_org``, ``hold_until``) holds members' holds not confirmed yet, and
an admission refused for room at the organization expires those of its kind past their deadline
(one Query of it), each by the same conditional claim of that member's item, then is judged
again. Against DynamoDB Local, every component on one clock."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import HoldExpired, LimitExceeded, NotFound
from hybrid_counter.keys import all_org_hold_keys, org_usage_keys, resource_key
from hybrid_counter.resources import ResourceService
from hybrid_counter.resources.holds import ORG_HOLD_INDEX
from tests.integration.test_holds import Clock
from tests.integration.test_member_resizes import item, split_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]

PROJECTS = "projects"
MADE: list[SplitOrg] = []


@pytest.fixture(autouse=True)
def expire_what_is_left() -> Iterator[None]:
    """Each test's holds are expired once it ends: a hold left unconfirmed would be expired by a
    later test's sweep of the whole HoldIndex (its clock far ahead), which counts it."""
    yield
    while MADE:
        org = MADE.pop()
        later = at(org, org.clock.now + 10**6)
        for kind in (SEATS, PROJECTS):
            later.holds.reclaim(org.accounts[0], kind, org=org.org_id, own=False)
        org.drain()


def at(org: SplitOrg, now: float) -> ResourceService:
    """A process of the organization's whose clock reads ``now``."""
    effects = Effects(clock=Clock(now), waiter=Waiter(attempts=3, delay=0.01))
    return ResourceService(org.settings, org.clients, effects=effects)


def an_org(split_org: Callable[..., SplitOrg], shards: int = 1, projects: int = 1) -> SplitOrg:
    """An organization of 6 seats and ``projects`` projects, its members up to 100 of each."""
    org = split_org(6, shards)
    org.service.put_plan(org.plan, {SEATS: 6, PROJECTS: projects})
    for account in org.accounts:
        org.service.set_limit(account, 100, kind=PROJECTS)
    org.service = org.new_service()  # (its plan as put now, not as cached)
    MADE.append(org)
    return org


def in_the_index(org: SplitOrg) -> set[str]:
    """The resource ids in the OrgHoldIndex under the organization (each of its keys: 4 S)."""
    found = []
    for key in all_org_hold_keys(org.org_id, org_usage_keys(org.shards)):
        found += org.clients.dynamodb.query(
            TableName=org.settings.table_name,
            IndexName=ORG_HOLD_INDEX,
            KeyConditionExpression="hold_org = :org",
            ExpressionAttributeValues={":org": {"S": key}},
        )["Items"]
    return {str(i["resource_id"]["S"]) for i in found}


class Requests:
    """DynamoDB requests the service's clients send, by operation (and index, for a Query)."""

    def __init__(self, org: SplitOrg) -> None:
        self.seen: Counter[str] = Counter()
        self._clients = [org.clients.dynamodb, org.clients.dynamodb_single_attempt]

    def _count(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        index = params.get("IndexName")
        self.seen[f"{model.name}:{index}" if index else model.name] += 1

    def __enter__(self) -> Requests:
        for client in self._clients:
            client.meta.events.register("provide-client-params.dynamodb", self._count)
        return self

    def __exit__(self, *_: object) -> None:
        for client in self._clients:
            client.meta.events.unregister("provide-client-params.dynamodb", self._count)

    def total(self) -> int:
        return sum(self.seen.values())


@pytest.mark.parametrize("shards", [1, 4])
def test_another_members_expired_hold_is_reclaimed_by_a_grow_and_counted_by_a_dry_run(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 6 seats: member a holds x (2), member b a hold h of 4 for 10 s
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.drain()
    assert in_the_index(org) == {"h"}
    # When its deadline passes (no sweeper run)
    org.clock.now += 11
    # Then a dry run of a's grow to 6 says it would be admitted (without b's expired hold)
    answer = org.service.would_resize(a, "x", 6, kind=SEATS)
    assert answer.would_admit is True
    assert answer.organization is not None
    assert answer.organization.would_admit is True
    # And the grow is admitted: b's hold released first, at both levels, exactly once
    assert org.service.resize(a, "x", 6, kind=SEATS).units == 6
    with pytest.raises(NotFound):
        org.service.get(b, "h", kind=SEATS)
    with pytest.raises(HoldExpired):
        org.service.confirm(b, "h", kind=SEATS)
    org.drain()
    assert in_the_index(org) == set()
    picture = org.picture()
    assert (picture.best_effort, picture.eventual) == (6, 6)


def test_a_members_expired_hold_of_another_kind_is_not_reclaimed_for_this_kind(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization of 6 seats and 1 project: member b uses the 6 seats for good and
    # holds the project for 10 s; member a never held
    org = an_org(split_org)
    a, b = org.accounts[:2]
    org.service.create(b, "s", {}, "s", kind=SEATS, units=6)
    org.service.create(b, "p", {}, "p", kind=PROJECTS, hold_seconds=10)
    org.drain()
    org.clock.now += 11
    # When a asks for a seat, refused at the organization
    with Requests(org) as requests, pytest.raises(LimitExceeded) as refused:
        org.service.create(a, "x", {}, "x", kind=SEATS)
    assert (refused.value.scope, refused.value.org) == ("organization", org.org_id)
    # Then the seats refusal did not look in the organization's holds (its seats counter never
    # admitted a hold: no Query; a never held: none of the account's either) and released
    # nothing of another kind: b's project is still held
    assert requests.seen[f"Query:{ORG_HOLD_INDEX}"] == 0
    assert requests.seen["Query:HoldIndex"] == 0
    assert org.service.get(b, "p", kind=PROJECTS).hold_until is not None
    # And a dry run of a seat says no, as the create did (b's project does not count)
    assert org.service.would_create(a, "x", {}, "x", kind=SEATS).would_admit is False
    # And a's project, refused at the organization for that hold, releases it and is admitted
    created, _ = org.service.create(a, "q", {}, "q", kind=PROJECTS)
    assert created.resource_id == "q"
    with pytest.raises(NotFound):
        org.service.get(b, "p", kind=PROJECTS)


def test_a_hold_confirmed_between_the_reclaims_query_and_its_expiry_is_never_expired(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given member b's hold h of 4 seats (of 6), its deadline just passed by member a's process,
    # not yet by b's (clocks of two processes); a holds 2
    org = an_org(split_org)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.drain()
    until = org.clock.now + 10
    org.clock.now = until + 0.001
    confirmer = at(org, until - 0.001)
    confirmed: list[Any] = []

    def confirm_after_the_query(parsed: dict[str, Any], **_: Any) -> None:
        found = {str(i.get("resource_id", {}).get("S")) for i in parsed.get("Items", [])}
        if "h" in found and not confirmed:  # the reclaim's Query, which found h
            confirmed.append(confirmer.confirm(b, "h", kind=SEATS))

    # When a asks for 1 seat, and b's confirm lands between the reclaim's Query (which found h)
    # and its expiry's claim
    events = org.clients.dynamodb.meta.events
    events.register("after-call.dynamodb.Query", confirm_after_the_query)
    try:
        with pytest.raises(LimitExceeded) as refused:
            org.service.create(a, "y", {}, "y", kind=SEATS)
    finally:
        events.unregister("after-call.dynamodb.Query", confirm_after_the_query)
    # Then the confirm was answered 200 and the hold is permanent: the expiry's claim, made on
    # the deadline it read, was refused, and the create answered 409 at the organization
    assert len(confirmed) == 1
    assert confirmed[0].hold_until is None
    assert refused.value.scope == "organization"
    assert org.service.get(b, "h", kind=SEATS).units == 4
    assert in_the_index(org) == set()
    # And a later refusal at the organization never expires it either
    org.clock.now += 3600
    with pytest.raises(LimitExceeded):
        org.service.create(a, "z", {}, "z", kind=SEATS, units=2)
    assert org.service.get(b, "h", kind=SEATS).units == 4
    org.drain()
    picture = org.picture()
    assert (picture.best_effort, picture.eventual) == (6, 6)


def test_only_a_members_hold_is_in_the_org_hold_index_and_a_confirm_or_delete_takes_it_out(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given an organization's member b, and an account of no organization, each holding
    org = an_org(split_org)
    b = org.accounts[1]
    solo = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(solo, 5, kind=SEATS)
    org.service.create(solo, "n", {}, "n", kind=SEATS, hold_seconds=60)
    org.service.create(b, "c", {}, "c", kind=SEATS, hold_seconds=60)
    org.service.create(b, "d", {}, "d", kind=SEATS, hold_seconds=60)
    org.drain()
    # Then the non-member's hold item carries no hold_org (its hold costs what it did); the
    # member's carries its organization, and both of b's are in the index
    solo_item = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name,
        Key=resource_key(solo, "n", kind=SEATS),
        ConsistentRead=True,
    )["Item"]
    assert "hold_account" in solo_item
    assert "hold_org" not in solo_item
    assert item(org, b, "c")["hold_org"] == {"S": org.org_id}
    assert in_the_index(org) == {"c", "d"}
    # When b confirms c and deletes d
    org.service.confirm(b, "c", kind=SEATS)
    org.service.delete(b, "d", kind=SEATS)
    org.drain()
    # Then neither is in the index, and the confirmed item keeps no hold_org
    assert in_the_index(org) == set()
    assert not {"hold_org", "hold_account", "hold_until"} & set(item(org, b, "c"))
    # (the non-member's hold is released too, for the next tests' sweeps)
    org.service.delete(solo, "n", kind=SEATS)
    org.drain()


def test_requests_of_a_create_refused_at_the_organization_then_reclaimed(
    split_org: Callable[..., SplitOrg],
) -> None:
    """The cost: an admitted member's create reads no hold index; one refused at the
    organization and admitted after the reclaim pays one Query of the OrgHoldIndex, the
    expiry of the expired hold, and its second judgement."""
    org = an_org(split_org)
    a, b = org.accounts[:2]
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    with Requests(org) as admitted:
        org.service.create(a, "w", {}, "w", kind=SEATS, units=1)
    org.service.delete(a, "w", kind=SEATS)
    org.drain()
    org.clock.now += 11
    with Requests(org) as reclaimed:
        org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
    assert admitted.seen[f"Query:{ORG_HOLD_INDEX}"] == 0
    assert reclaimed.seen[f"Query:{ORG_HOLD_INDEX}"] == 1
    assert reclaimed.seen["Query:HoldIndex"] == 0  # (a never held)
    print(
        f"\nadmitted create: {admitted.total()} requests {dict(admitted.seen)}"
        f"\nrefused at the organization, reclaimed, admitted: {reclaimed.total()} requests "
        f"{dict(reclaimed.seen)}"
    )
