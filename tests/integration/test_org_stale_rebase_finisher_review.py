"""Review 39 (hostile, fixed: design.md §10.6): a rebase's finisher that stalls (the sweeper's long run) past its organization's
deletion and creation again under the same id."""

from __future__ import annotations

import pytest

from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import InProgress, LimitExceeded, StoreUnavailable, Throttled
from tests.explorer.scheduler import Race
from tests.faults import ProcessDied, injected
from tests.integration.test_split_review import (
    SEATS,
    _empty_and_leave,
    freeze_body,
    is_freeze,
    split_org,
    stop_before,
    summary,
)

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def test_a_stalled_sweeper_finishing_an_old_record_never_freezes_the_recreated_orgs_single_item(split_org):
    # Given an organization of 10 seats over 4 shards, laid out, and an operator's rebase (a
    # forced raise to 12) that died after putting its record (nothing frozen yet)
    org = split_org(10, 4, members=1)
    made = org.create_on(0)
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=freeze_body),
        pytest.raises(ProcessDied),
    ):
        org.new_service().set_org_limit(org.org_id, SEATS, 12, force=True)
    assert org.record() is not None
    org.service.delete(made.account_id, made.resource_id, kind=SEATS)
    org.drain()
    # When the sweeper, past the grace period, has read that record and is about to freeze ...
    org.clock.now += org.settings.pending_grace_seconds + 1
    sweeper = Sweeper(
        org.settings.table_name, org.counter, org.settings.pending_grace_seconds, org.clients, clock=org.clock
    )
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        late = race.start("sweeper", sweeper.sweep)
        stop_before(race, late, is_freeze)
        # ... it stalls while the organization is emptied, deleted, created again under its id
        # (not split) and a member's create opens its counter item ...
        _empty_and_leave(org)
        org.service.delete_org(org.org_id)
        org.service.put_org(org.org_id, org.plan)
        org.service.add_member(org.org_id, org.accounts[0])
        org.shards = 1
        org.create_on(0, service=org.new_service())
        assert not org.picture().frozen
        # ... and then goes on
        race.finish(late)
    # Then the new organization's counter is untouched by the old one's rebase
    frozen = summary(org.picture())
    # and its members' creates are admitted up to its limit (10)
    fresh = org.new_service()
    outcomes = []
    for _ in range(3):
        try:
            org.create_on(0, service=fresh)
            outcomes.append("admitted")
        except (InProgress, StoreUnavailable, Throttled, LimitExceeded) as error:
            outcomes.append(type(error).__name__)
    assert outcomes == ["admitted"] * 3, (outcomes, frozen, summary(org.picture()))
    # nor is anything left frozen for the sweeper to find (no record of it is there)
    org.sweep_after_the_grace_period()
    assert not org.picture().frozen, summary(org.picture())
