"""Review 74 (hostile, on f0ea3e9): a create's refusal at its organization's admission (O2,
after a precheck that found room) carries no ``holds`` (``OrgLevel.refused``), though the create
read its account's counter item first (``_try_create``: ``state.holds_used``), as its refusal at
the precheck does carry (``full.holds = state.holds_used``). Since f0ea3e9 such a refusal at an
organization where no member ever held reads the account's counter item again
(``ResourceService._ever_held``: design.md §12 says "one GetItem, only there", a grow refused at
its organization before its account is read); where a member ever held, its reclaim asks the
account's HoldIndex (``own = refused.holds is not False``) for an account the create knew never
held (older). Against DynamoDB Local, one clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.errors import LimitExceeded
from hybrid_counter.keys import counter_key
from hybrid_counter.resources.holds import HOLD_INDEX
from hybrid_counter.resources.org_level import OrgLevel
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


class Reads:
    """GetItems of one counter item and Queries of the HoldIndex the service's clients send."""

    def __init__(self, org: SplitOrg, key: dict[str, Any]) -> None:
        self.seen: Counter[str] = Counter()
        self._key = key
        self._clients = [org.clients.dynamodb, org.clients.dynamodb_single_attempt]

    def _count(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetItem" and params.get("Key") == self._key:
            self.seen["GetItem:counter"] += 1
        if model.name == "Query" and params.get("IndexName") == HOLD_INDEX:
            self.seen[f"Query:{HOLD_INDEX}"] += 1

    def __enter__(self) -> Reads:
        for client in self._clients:
            client.meta.events.register("provide-client-params.dynamodb", self._count)
        return self

    def __exit__(self, *_: object) -> None:
        for client in self._clients:
            client.meta.events.unregister("provide-client-params.dynamodb", self._count)


def another_create_takes_the_last_seat_before_o2(
    org: SplitOrg, account: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Just before the create's admission at its organization (O2), another member's create
    takes the organization's last seat (after the create's precheck found it free)."""
    admit = OrgLevel.admit
    other = org.new_service()

    def other_create_then_admit(self: OrgLevel, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(OrgLevel, "admit", admit)
        other.create(account, "z", {}, "z", kind=SEATS, units=1)
        return admit(self, *args, **kwargs)

    monkeypatch.setattr(OrgLevel, "admit", other_create_then_admit)


@pytest.mark.parametrize("shards", [1, 4])
@pytest.mark.parametrize("marked", [False, True], ids=["no-member-held", "a-member-held"])
def test_a_create_refused_at_its_org_admission_reads_nothing_its_account_read_said(
    split_org: Callable[..., SplitOrg], shards: int, marked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an organization of 4 seats: a (who never held) uses x (1); b uses 2 (marked: one
    # of them a hold b confirmed, so the organization's items say a member held)
    org = split_org(4, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=1)
    if marked:
        org.service.create(b, "h", {}, "h", kind=SEATS, units=1, hold_seconds=10)
        org.service.confirm(b, "h", kind=SEATS)
    else:
        org.service.create(b, "q", {}, "q", kind=SEATS, units=1)
    org.drain()
    assert any(s.state.holds_used for s in org.picture().shards.values()) is marked
    assert not org.service.counters.read(a, kind=SEATS).holds_used

    # When a creates y (1): its precheck finds the last seat free, then b's create takes it
    # before a's admission at the organization (O2), which refuses it
    another_create_takes_the_last_seat_before_o2(org, b, monkeypatch)
    with Reads(org, counter_key(a, kind=SEATS)) as reads, pytest.raises(LimitExceeded) as refused:
        org.service.create(a, "y", {}, "y", kind=SEATS, units=1)
    org.drain()

    # Then 409 at the organization (right: full), with no HoldIndex page of a's (the create's
    # own read said a never held: it has no expired hold); where no member ever held, at once,
    # a's counter item read once (the create's own read); where one did, the organization's
    # holds are reclaimed and the create judged again (its second read of a's counter)
    assert refused.value.scope == "organization"
    expected = Counter({"GetItem:counter": 2 if marked else 1})
    assert reads.seen == expected, dict(reads.seen)
