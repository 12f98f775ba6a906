"""Review 35 (hostile): a PUT of the id of a member's create that its account refused and whose
undo at its organization (``undoing``, the organization's admission released) its process could
not finish. Adopting it past the grace period made it live with neither level holding it: the
organization never counted it (its count refuses ``undoing``) and admitted past its limit; and a
sweeper finishing the undo removed a resource the PUT had just been told exists. Such an item is
never adopted nor made live (design.md §10.3): the PUT answers 503 until the sweeper finishes the
undo, then creates the id anew, judged at both levels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.counting.sweeper import Sweeper
from hybrid_counter.errors import InProgress, LimitExceeded
from hybrid_counter.resources.org_level import OrgLevel
from hybrid_counter.resources.table import ResourceTable
from tests.faults import ProcessDied, injected
from tests.integration.test_member_resizes import item, split_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration

__all__ = ["split_org"]


def undo_dies_before_its_removal(
    org: SplitOrg, account: str, rid: str, units: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member's PUT admitted at its organization; before its account's admission another
    create of the account (w, 1) takes the account's last seat, so the account refuses it; the
    undo marks it, releases it at the organization, then the process dies before removing it."""
    admit = OrgLevel.admit
    other = org.new_service()

    def admit_then_other_create(self: OrgLevel, *args: Any, **kwargs: Any) -> Any:
        admitted = admit(self, *args, **kwargs)
        monkeypatch.setattr(OrgLevel, "admit", admit)
        other.create(account, "w", {}, "w", kind=SEATS, units=1)
        return admitted

    monkeypatch.setattr(OrgLevel, "admit", admit_then_other_create)
    with injected(org.clients.dynamodb, "DeleteItem", when="crash"), pytest.raises(ProcessDied):
        org.service.create(account, rid, {}, rid, kind=SEATS, units=units)


@pytest.mark.parametrize("shards", [1, 4])
def test_a_put_adopting_an_undone_members_create_keeps_the_organization_exact(
    split_org: Callable[..., SplitOrg], shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an organization of 3 seats; a (its own limit 2) holds x (1)
    org = split_org(3, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 2, kind=SEATS)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.drain()
    # And a's PUT of y (1) is admitted by the organization, refused by a, undone at the
    # organization, and its process dies before removing the pending item
    undo_dies_before_its_removal(org, a, "y", 1, monkeypatch)
    org.drain()
    seen = item(org, a, "y")
    assert seen["state"]["S"] == "pending"
    assert "undoing" in seen
    assert org.picture().best_effort == 2  # x and w: y's admission there was undone
    # When, past the grace period, the caller retries the same PUT: 503 (a create of the id in
    # flight, its undo unfinished), never adopted
    org.clock.now += org.settings.pending_grace_seconds + 1
    with pytest.raises(InProgress):
        org.service.create(a, "y", {}, "y", kind=SEATS, units=1)
    # And the sweeper and the stream path do all they do (three sweeps, an audit among them)
    for _ in range(3):
        org.sweep_after_the_grace_period()
    Sweeper(
        org.settings.table_name, org.counter, org.settings.pending_grace_seconds, org.clients, clock=org.clock
    ).audit()
    org.drain()
    # Then the undo is finished, and the PUT retried once more is judged anew: a is at its limit
    with pytest.raises(LimitExceeded) as refused:
        org.service.create(a, "y", {}, "y", kind=SEATS, units=1)
    assert refused.value.scope == "account"
    # When another member asks for one seat (the organization holds x and w: it fits)
    org.service.create(b, "z", {}, "z", kind=SEATS, units=1)
    org.drain()
    live = org.live()
    picture = org.picture()
    # Then the organization never holds more than its 3 seats
    assert sum(live.values()) <= org.limit, (live, picture)
    # And its counters hold every live unit
    assert (picture.best_effort, picture.eventual) == (sum(live.values()),) * 2, (live, picture)


def test_a_resource_a_put_adopted_is_never_removed_by_the_sweepers_undo(
    split_org: Callable[..., SplitOrg], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a's PUT of y admitted by the organization, refused by a, undone at the organization,
    # its process dead before removing the pending item (as above)
    org = split_org(3, 1)
    a = org.accounts[0]
    org.service.set_limit(a, 2, kind=SEATS)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.drain()
    undo_dies_before_its_removal(org, a, "y", 1, monkeypatch)
    org.drain()  # org_released noted on the pending item
    # When, past the grace period, the sweeper finishes that undo, and the caller's retried PUT
    # of y lands between the sweeper's read of the item and its removal
    drop = ResourceTable.drop_undone
    answers: list[Any] = []

    def put_lands_first(self: ResourceTable, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(ResourceTable, "drop_undone", drop)
        try:
            answers.append(org.new_service().create(a, "y", {}, "y", kind=SEATS, units=1))
        except (InProgress, LimitExceeded) as refused:
            answers.append(refused)
        return drop(self, *args, **kwargs)

    monkeypatch.setattr(ResourceTable, "drop_undone", put_lands_first)
    org.sweep_after_the_grace_period()
    # Then the PUT was not told y exists (503: its undo in flight), the sweeper's undo removed
    # the refused create, and y, retried once more, is judged anew: a is at its limit
    assert answers, "the sweeper did not finish the undo"
    assert isinstance(answers[0], InProgress), answers
    assert org.live() == {f"{a}/x": 1, f"{a}/w": 1}
    with pytest.raises(LimitExceeded):
        org.service.create(a, "y", {}, "y", kind=SEATS, units=1)
