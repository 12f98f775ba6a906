"""Review 75 (hostile pass over HTTP, holds at organizations): two answers of a member's grow that
say something other than what the user guide promises.

1. A grow's dry run names the wrong level when both refuse. The guide: "When the answer is no,
   `scope` says which level refuses, as the request's `409` would". A member's grow is judged at
   its organization first (resize.py ``_move``), so its 409 says ``organization``; its dry run
   (``WouldAdmit.scope``: "the account's first, as the create judges") says ``account``. Over HTTP:
   account limit 4 (4 used), organization 5 (5 used), ``PATCH`` 4 -> 7: dry run
   ``"scope": "account"``, the real request ``409 ... "scope": "organization"``.

2. A grow of a hold that reaches its deadline while the grow is refused for room answers 404. The
   guide: "after [its deadline], a grow is `409 HoldExpired`" (and a confirm of it says
   ``HoldExpired`` for a week). The grow read the hold live, was refused at its full organization,
   and the refusal's reclaim (service.py ``_reclaiming``) released every expired hold of the
   organization, the one being grown too (its deadline had passed meanwhile); judged again,
   ``current`` finds the item gone: ``NotFound``. Over HTTP: 6 of 24 grows sent 10-15 ms before
   the hold's deadline answered 404 while the confirm right after answered 409 HoldExpired.
   Deterministic here: the clock passes the deadline between the refusal and the reclaim."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hybrid_counter.aws import Clients
from hybrid_counter.errors import HoldExpired, LimitExceeded
from hybrid_counter.resources.service import ResourceService
from hybrid_counter.settings import Settings
from localrun.sources.stream_reader import StreamReader
from tests.integration.test_org_split import SEATS, Clock, SplitOrg

pytestmark = pytest.mark.integration


@pytest.fixture
def split_org(settings: Settings, clients: Clients, stream: StreamReader) -> Callable[..., SplitOrg]:
    def make(limit: int, shards: int, members: int = 2) -> SplitOrg:
        return SplitOrg(settings, clients, stream, Clock(), limit, shards, members)

    return make


@contextmanager
def the_deadline_passes_at_the_reclaim(service: ResourceService, clock: Any) -> Iterator[None]:
    """Each reclaim ``service`` makes runs 11 s later by ``clock`` than the refusal before it."""
    holds = service.holds
    reclaim = holds.reclaim

    def late_reclaim(*args: Any, **kwargs: Any) -> Any:
        clock.now += 11
        return reclaim(*args, **kwargs)

    holds.reclaim = late_reclaim  # type: ignore[method-assign]
    try:
        yield
    finally:
        holds.reclaim = reclaim  # type: ignore[method-assign]


@pytest.mark.parametrize("shards", [1, 4])
def test_a_grows_dry_run_names_the_level_its_409_names_when_both_refuse(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 5 seats; a may hold 4 and holds x (4), b holds y (1): both full
    org = split_org(5, shards)
    a, b = org.accounts
    org.service.set_limit(a, 4, kind=SEATS)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
    org.service.create(b, "y", {}, "y", kind=SEATS, units=1)
    org.drain()
    # When x is asked to grow to 7, for real and as a dry run
    with pytest.raises(LimitExceeded) as refused:
        org.service.resize(a, "x", 7, kind=SEATS)
    answer = org.service.would_resize(a, "x", 7, kind=SEATS)
    # Then the dry run names the level the 409 names
    assert answer.would_admit is False
    assert answer.scope == refused.value.scope, (answer.scope, refused.value.scope)


@pytest.mark.parametrize("shards", [1, 4])
def test_a_grow_whose_hold_expires_while_it_is_refused_answers_hold_expired_not_not_found(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    # Given an organization of 5 seats: a holds h (2 seats, 10 s), b uses 3: full
    org = split_org(5, shards)
    a, b = org.accounts
    org.service.create(a, "h", {}, "h", kind=SEATS, units=2, hold_seconds=10)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=3)
    org.drain()
    # And time passes h's deadline while a grow of h, read live, is refused at the organization
    # (over HTTP, the ~10 ms between the grow's read and its refusal's reclaim)
    # When h is grown to 4 (one second before its deadline)
    org.clock.now += 9
    with the_deadline_passes_at_the_reclaim(org.service, org.clock), pytest.raises(Exception) as answered:
        org.service.resize(a, "h", 4, kind=SEATS)
    # Then it is told its hold expired, as its confirm is, not that h does not exist
    with pytest.raises(HoldExpired):
        org.service.confirm(a, "h", kind=SEATS)
    assert isinstance(answered.value, HoldExpired), repr(answered.value)


def test_an_accounts_grow_whose_hold_expires_while_it_is_refused_answers_hold_expired(
    settings: Settings, clients: Clients, stream: StreamReader
) -> None:
    """The same without an organization: the account's own refusal reclaims the hold it grows."""
    from tests.integration.test_holds import Clock as HoldClock
    from tests.integration.test_holds import World

    world = World(settings, clients, stream, HoldClock())
    # Given an account of 3 seats: h holds 2 for 10 s, p uses 1: full
    world.hold("h", units=2, seconds=10)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.drain()
    # When h is grown to 3 one second before its deadline, which passes before the reclaim
    world.clock.now += 9
    with the_deadline_passes_at_the_reclaim(world.service, world.clock), pytest.raises(Exception) as answered:
        world.service.resize(world.account, "h", 3, kind=SEATS)
    # Then HoldExpired, as its confirm says
    with pytest.raises(HoldExpired):
        world.service.confirm(world.account, "h", kind=SEATS)
    assert isinstance(answered.value, HoldExpired), repr(answered.value)
