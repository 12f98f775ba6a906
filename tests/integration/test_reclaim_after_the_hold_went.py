"""A create refused for room by an expired hold whose owner deletes it before the refusal's
reclaim reads the holds (found by the explorer's member holds, 2026-11-27, fourteenth session:
"A reclaims while B deletes its hold", 6 schedules). The reclaim finds nothing to release, and
the create was answered 409 though the room was free by then: no order explains it (before B's
delete, A's create reclaims the expired hold: 201; after it, there is room: 201). It is now
judged again whatever the reclaim found (design.md §12)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import MADE, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]


@contextmanager
def deleted_before_the_reclaim(org: SplitOrg, owner: str, rid: str) -> Iterator[None]:
    """The refused create's reclaim runs only once ``owner`` has deleted ``rid`` (another request)."""
    holds = org.service.holds
    reclaim = holds.reclaim

    def after_the_delete(*args: Any, **kwargs: Any) -> Any:
        org.new_service().delete(owner, rid, kind=SEATS)
        return reclaim(*args, **kwargs)

    holds.reclaim = after_the_delete  # type: ignore[method-assign]
    try:
        yield
    finally:
        holds.reclaim = reclaim  # type: ignore[method-assign]


@pytest.mark.parametrize("level", ["organization", "account"])
def test_a_create_refused_by_an_expired_hold_its_owner_deletes_before_the_reclaim_is_admitted(
    split_org: Callable[..., SplitOrg], level: str
) -> None:
    # Given, at the organization: 2 seats, a uses 1, b holds the other (h, 10 s); or, at the
    # account: a may hold 1 seat, and holds it (h)
    org = split_org(2, 1)
    MADE.append(org)
    a, b = org.accounts[:2]
    if level == "organization":
        owner = b
        org.service.create(a, "o", {}, "o", kind=SEATS)
    else:
        owner = a
        org.service.set_limit(a, 1, kind=SEATS)
    org.service.create(owner, "h", {}, "h", kind=SEATS, hold_seconds=10)
    org.drain()

    # When, past the hold's deadline, a's create is refused for room, and h's owner deletes h
    # before the refusal's reclaim reads the holds
    org.clock.now += 11
    with deleted_before_the_reclaim(org, owner, "h"):
        created, fresh = org.service.create(a, "x", {}, "x", kind=SEATS)

    # Then the create, judged again, is admitted (before: 409, the room free)
    assert fresh
    assert created.resource_id == "x"
    org.drain()
    assert org.picture().used == (2 if level == "organization" else 1)
