"""The organizations explorer's operation that creates a deleted organization again under its id
(tests/explorer/orgs.py ``recreate``, org_catalogue.py RECREATED): what it found, pinned here.
Against DynamoDB Local.

F2 is a race: PUT /orgs/{id} racing DELETE /orgs answered 404, which no order of the two
explains (the explorer's scenario "re-created while its deletion runs", org_catalogue.py
RECREATED_FOUND), reproduced through the Race scheduler.

F1 is not a race: it needs no interleaving, only a process that cached the deleted creation's
profile (a warm Lambda, within PlanCacheSeconds of its last read; every process of an explorer
run is one), so it is reproduced call after call rather than through the Race scheduler. The
explorer's schedule: A's post, A's leave, DELETE /orgs (204), the organization created again on
a plan of 1 (201), B's join, then B's post, each after the one before answered
(org_catalogue.py RECREATED_FOUND and LONG_RECREATED_FOUND). Both fixed on 2026-11-27 (design.md
§10.2: a process's cache of an organization is used only for the creation a request names; a
PUT refused by a deletion that then ends goes round again and creates the organization).
"""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import InProgress, LimitExceeded
from hybrid_counter.keys import ORG_PROFILE_SK
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_deletion_races import admitted_of, created_again, deletes_the_org_item
from tests.integration.test_split_review import SEATS, split_org, stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


# (fixed: F1. A process caches an organization's profile: its plan, shards and epoch_base, keyed
# by the organization's id only. A member of the organization created again under the id names
# the new creation (org_epoch), but the create judged the new creation by the cached profile of
# the deleted one: on one counter item it admitted by the old plan (3 seats on a plan of 1) until
# the cache expired; where the deleted creation was split over 2, it laid the new counter out over
# 2 shards for the old plan's limit, with the basis source plan:1:1, also the new plan's, so no
# process laid it out again (4 seats held on a plan of 1). Now what a process cached of another
# creation than the one a request names is read again (plans/limits.py; more cases in
# test_org_cache_review.py).)
@pytest.mark.parametrize("shards", [1, 2])
def test_a_process_that_cached_the_deleted_creation_judges_the_new_one_by_its_own_plan(split_org, shards):
    # Given an organization of 10 seats (over ``shards`` items), one member, and a process that
    # created and deleted a seat of the member (it cached the organization: plan of 10, shards)
    org = split_org(10, shards, members=1)
    account = org.accounts[0]
    warm = org.new_service()
    warm.create(account, "first", {}, "first", kind=SEATS)
    warm.delete(account, "first", kind=SEATS)
    org.drain()
    # When the member leaves, the organization is deleted and created again under its id on a
    # plan of 1 seat (one counter item), with a new member ...
    org.new_service().remove_member(org.org_id, account)
    org.new_service().delete_org(org.org_id)
    _, member = created_again(org, 1)
    # ... and the warm process creates seats of the new member
    warmly = 0
    for n in range(3):
        if admitted_of_by(warm, member, f"new{n}"):
            warmly += 1
    # Then it admits 1 (the new plan's), and the new creation's counter is not laid out for the
    # old plan: a fresh process admits no more
    picture = org.picture()
    assert (warmly, picture.basis.limit if picture.basis else None) in ((1, None), (1, 1)), picture
    assert admitted_of(org, member, 2) == 0


def admitted_of_by(service: ResourceService, account: str, rid: str) -> bool:
    """Whether ``service`` (a process with its own cache) admits a seat of ``account``."""
    try:
        service.create(account, rid, {}, rid, kind=SEATS)
    except LimitExceeded:
        return False
    return True


# F2 (fixed: a move refused by the deletion's mark answers 503 while the mark stands, and goes
# round again once the deletion is done: it creates the organization): PUT /orgs/{id} (governance/changes.py put_org) reads the organization, finds it there
# (marked by a deletion under way) and writes the move to its plan, which the mark refuses; it
# then asks why (_org_gone), and the deletion has finished meanwhile: it raises NotFound, 404. No
# order of the two explains it: the PUT before the deletion moves the plan (200), after it creates
# the organization (201), while the mark stands it answers 503. (It could read the organization
# again, as the loop does for a change that came first, and create it.) The explorer's schedule,
# shrunk: DELETE /orgs marks the organization and removes its counters; the PUT reads it, puts
# its change record, writes the move (refused); the deletion removes the organization's item
# (204); the PUT reads it to say why: 404.
def is_plan_write(call: Call) -> bool:
    """The PUT's write of the organization's item (its creation, in a transaction with the id's
    last creation number, or its move to the plan)."""
    writes = [call.body]
    if call.operation == "TransactWriteItems":
        writes = [action["Update"] for action in call.body.get("TransactItems", []) if "Update" in action]
    elif call.operation != "UpdateItem":
        return False
    return any(
        write.get("Key", {}).get("sk", {}).get("S") == ORG_PROFILE_SK
        and "plan_id" in str(write.get("UpdateExpression", ""))
        for write in writes
    )


def test_a_put_of_an_organization_racing_its_deletion_answers_as_before_or_after_it(split_org):
    # Given an empty organization of 3 seats, and a plan of 1
    org = split_org(3, 1, members=0)
    plan = f"small-{uuid.uuid4().hex[:8]}"
    org.service.put_plan(plan, {SEATS: 1})
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When DELETE /orgs is about to delete the organization's item (marked) ...
        deletion = race.start("delete", lambda: org.new_service().delete_org(org.org_id))
        stop_before(race, deletion, lambda call: deletes_the_org_item(call.body))
        # ... PUT /orgs/{id} on the plan of 1 has read it and writes its move, refused by the mark ...
        put = race.start("put", lambda: org.new_service().put_org(org.org_id, plan, force=True))
        stop_before(race, put, is_plan_write)
        race.step(put)
        # ... and the deletion ends meanwhile
        race.finish(deletion)
        race.finish(put)
    # Then the deletion answered 204, and the PUT 503 (retry) or created the organization again:
    # never 404
    assert deletion.error is None, deletion.error
    assert put.error is None or isinstance(put.error, InProgress), put.error
    # ... and a 201 made the organization again, on the plan it asked for
    if put.error is None:
        assert org.new_service().get_org(org.org_id).plan_id == plan
