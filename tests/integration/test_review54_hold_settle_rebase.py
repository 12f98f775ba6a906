"""Review 54 (hostile): a member's hold whose grow died between the levels (O5 applied at its
organization's shard, Z3 never made), settled by the sweeper while a rebase of that organization
(a forced lowering) is left frozen by a process that died; then the hold's deadline passes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded
from tests.faults import ProcessDied, injected
from tests.integration.test_member_resizes import grow_dies_between_the_levels, item, split_org
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_split_review import apply_body, freeze_body

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def fill(org: SplitOrg, account: str, prefix: str) -> int:
    admitted = 0
    for n in range(20):
        try:
            org.service.create(account, f"{prefix}{n}", {}, f"{prefix}{n}", kind=SEATS, units=1)
            admitted += 1
        except LimitExceeded:
            return admitted
    return admitted


@pytest.mark.parametrize("dies_at", [freeze_body, apply_body], ids=["freeze", "apply"])
@pytest.mark.parametrize("drained", [True, False], ids=["marked", "unmarked"])
def test_a_dead_grow_of_a_hold_settled_while_its_orgs_rebase_is_frozen(
    split_org: Callable[..., SplitOrg], dies_at: Callable, drained: bool
) -> None:
    org = split_org(10, 4)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2, hold_seconds=2000)
    org.drain()
    grow_dies_between_the_levels(org, a, "x", 6)
    if drained:
        org.drain()
    # a forced lowering to 8 whose rebase dies mid-way (shards left frozen or half applied)
    with (
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=dies_at, skip=1),
        pytest.raises(ProcessDied),
    ):
        org.new_service().set_org_limit(org.org_id, SEATS, 8, force=True)
    org.sweep_after_the_grace_period()
    org.sweep_after_the_grace_period()
    org.drain()
    assert "resize_request" not in item(org, a, "x")
    assert int(item(org, a, "x")["units"]["N"]) == 2
    picture = org.picture()
    assert (picture.best_effort, picture.eventual) == (2, 2), picture
    got = fill(org, b, "y")
    org.drain()
    assert got == 6
    # the deadline passes: the hold's 2 seats come back
    org.clock.now += 2000
    org.sweep_after_the_grace_period()
    org.drain()
    got = fill(org, b, "z")
    picture = org.picture()
    assert got == 2, picture
    assert sum(org.live().values()) == 8, picture
    assert picture.claims <= 8, picture
