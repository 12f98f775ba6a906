"""Review 56 (hostile, over HTTP): a PUT /orgs/{id} whose write applied read the organization back
to answer, and a DELETE /orgs racing it had removed it by then: 404, which no order explains
(the PUT took effect before the deletion). It now answers 503. The HTTP test is
tests/e2e/test_review56_put_org_404.py; this one steps the race call by call (and runs the
layer in this process, which a mutation of it reaches)."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import InProgress
from hybrid_counter.resources import ResourceService
from tests.explorer.scheduler import Call, Race
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("shards", [None, 4])
def test_a_put_of_an_organization_whose_write_applied_never_answers_404_when_a_deletion_removes_it(
    settings, clients, shards
) -> None:
    # Given a plan, and an organization id not yet created
    service = ResourceService(settings, clients)
    plan, org = f"p-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    service.put_plan(plan, {"seats": 6})
    written: list[Call] = []

    def after_its_write(call: Call) -> bool:
        """The PUT's next call once its creation (a transaction) was sent."""
        if call.operation == "TransactWriteItems":
            written.append(call)
            return False
        return bool(written)

    with Race(clients.dynamodb, clients.dynamodb_single_attempt) as race:
        # When the PUT creates it and stops before it reads it back (or lays its shards out) ...
        put = race.start("put", lambda: ResourceService(settings, clients).put_org(org, plan, shards=shards))
        stop_before(race, put, after_its_write)
        # ... and a DELETE /orgs removes it meanwhile (204)
        deletion = race.run("delete", lambda: ResourceService(settings, clients).delete_org(org))
        assert deletion.error is None, deletion.error
        race.finish(put)
    # Then the PUT answers 503 (it took effect before the deletion; nothing can show what it
    # made), never 404, which would say it never was
    assert isinstance(put.error, InProgress), put.error
    assert service.org_store.get(org) is None
