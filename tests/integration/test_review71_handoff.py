"""Review 71 (hostile, on 2e3eb8c: hold_levels.py). Against DynamoDB Local, one clock.

F1: a member's delete whose organization's release was refused without effect hands that release
to the stream path (``org_handoff`` on its claim, delete.py), and ``_hand_off`` is written only
after its account's release applied (delete.finish takes ``org_refused`` as ``at_account``). So
a claim that carries ``org_handoff`` holds nothing at its account. hold_levels.at_account does
not look at it: it knows the account's release only from ``account_released`` (the stream
path's note, lagging) or ``last_release``, which the account's next release overwrites. Then the
claim is counted at its account at its units: the dry run subtracts them from a use that no
longer holds them (would_admit where no order admits), and the request, the claim given up,
answers 503 where 409 is certain.

Fixed the same day (resources/hold_levels.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.aws import Effect
from tests.integration.test_hold_expiry_in_flight import waiting_service
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import MADE, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of
from tests.integration.test_review70_org_released import _Org

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


def test_a_handed_off_claim_holds_nothing_at_its_account(split_org: Callable[..., SplitOrg]) -> None:
    """Organization of 20 seats; member b of 4 seats holds p (1) and q (1) for good and h (2), a
    hold for 10 s (4 of 4). Past h's deadline b's owner DELETEs h: released at b's account (2 of
    4), its organization's release refused without effect, handed off (``org_handoff``), the
    stream path lagging (503 to the owner). b DELETEs q (1 of 4; last_release now q's). b's
    create of 4: p alone holds 1 of 4 for good and h holds nothing there, so 1 + 4 > 4 in every
    order: 409 is certain, and a dry run must not admit it."""
    org = split_org(20, 1)
    MADE.append(org)
    b = org.accounts[1]
    org.service.set_limit(b, 4, kind=SEATS)
    org.service = org.new_service()
    org.service.create(b, "p", {}, "p", kind=SEATS)
    org.service.create(b, "q", {}, "q", kind=SEATS)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=2, hold_seconds=10)
    org.drain()
    org.clock.now += 11

    owner = org.new_service()
    owner._delete.orgs.release_resolved = lambda *_, **__: Effect.NOT_APPLIED  # type: ignore[method-assign]
    assert answer_of(lambda: owner.delete(b, "h", kind=SEATS)).startswith("503")
    seen = owner._table.get(b, "h", kind=SEATS)
    assert seen is not None
    assert "org_handoff" in seen
    assert "account_released" not in seen
    org.service.delete(b, "q", kind=SEATS)  # b's last_release: q's

    dry = org.service.would_create(b, "x", {}, "x", kind=SEATS, units=4)
    assert dry.used == 1  # h's 2 released at b's account already
    answer = answer_of(
        lambda: waiting_service(_Org(org), []).create(b, "x", {}, "x", kind=SEATS, units=4),  # type: ignore[arg-type]
        figures=True,
    )
    org.drain()  # (the stream path finishes the handed-off delete)
    assert (dry.would_admit, answer) == (False, "409 account (1 of 4, 4 asked)"), (
        f"p holds 1 of 4 for good, h nothing at b's account (handed off after its release there): "
        f"no order admits 4; the dry run said would_admit={dry.would_admit} (used {dry.used}), "
        f"the create answered {answer}"
    )
