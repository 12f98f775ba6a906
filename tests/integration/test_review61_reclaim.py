"""Review 61 (hostile): the organization-wide reclaim of expired holds after review 60
(design.md §12, "At the organization"). Against DynamoDB Local, every component on one clock."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from hybrid_counter.errors import LimitExceeded, StoreUnavailable
from tests.faults import at_an_organization, injected
from tests.integration.test_holds import World, world
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import an_org, expire_what_is_left
from tests.integration.test_org_split import SEATS, SplitOrg
from tests.integration.test_review60_reclaim import answer_of

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org", "world"]

THROTTLED = "ProvisionedThroughputExceededException"


def _org_release_of(rid: str) -> Callable[[dict], bool]:
    """An organization's counter write naming resource ``rid`` (its release: the token)."""

    def where(body: dict) -> bool:
        return at_an_organization(body) and f"/{rid}#" in json.dumps(
            body.get("ExpressionAttributeValues", {})
        )

    return where


@pytest.mark.parametrize("shards", [1, 4])
def test_a_reclaim_whose_expiry_is_left_at_the_organization_never_answers_409(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    """Organization of 6 seats: a holds x (4) for good; b holds hb (2), past its deadline. a's
    create of 1 is refused at the organization; its reclaim claims hb and releases it at b's
    account, then hb's release at the organization is throttled on every attempt (handed off
    to the stream path, which has not run yet). Judged again, still refused at the
    organization, which hb's expired hold fills: the §12 rule says 503 (an expiry it could not
    finish may be what holds the room), never 409 (no expired hold holds the room)."""
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
    org.service.create(b, "hb", {}, "hb", kind=SEATS, units=2, hold_seconds=10)
    org.drain()
    org.clock.now += 11
    with (
        injected(
            org.clients.dynamodb_single_attempt,
            "UpdateItem",
            error=THROTTLED,
            times=50,
            where=_org_release_of("hb"),
        ) as fired,
        injected(org.clients.dynamodb, "UpdateItem", error=THROTTLED, times=50, where=_org_release_of("hb")),
    ):
        answer = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS))
    seen = org.picture().best_effort
    org.drain()
    after = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS))
    assert answer != "409 organization", (
        f"409 while hb, an expired hold whose release at the organization was left, held the room"
        f" (organization at {seen} of 6; once the stream path ran, the same create: {after}); fired={fired.fired}"
    )


@pytest.mark.parametrize("shards", [1, 4])
def test_a_dry_run_counts_the_organizations_holds_the_third_judgement_reclaims(
    split_org: Callable[..., SplitOrg], shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RECLAIM_PAGE at 2 (for 100: the same with 100 expired holds of a's). a (its limit 3)
    holds ha1 and ha2 (1 each, past their deadline) and x (1) for good; b holds hb (1, past its
    deadline) and p (2) for good: the organization at 6; then its limit is lowered to 4
    (forced, below use). a's create of 1: refused at its account (3 + 1 > 3), reclaims its own
    (ha1, ha2: a page), judged again, refused at the organization (4 + 1 > 4), reclaims the
    organization's (hb), judged a third time: admitted (3 + 1 <= 4). The dry run reads one page
    of a's and the organization's together (a's fill it) and says the organization refuses."""
    from hybrid_counter.resources import holds

    monkeypatch.setattr(holds, "RECLAIM_PAGE", 2)
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 3, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "ha1", {}, "ha1", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(a, "ha2", {}, "ha2", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(a, "x", {}, "x", kind=SEATS, units=1)
    org.service.create(b, "hb", {}, "hb", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=2)
    org.drain()
    org.service.set_org_limit(org.org_id, SEATS, 4, force=True)
    org.service = org.new_service()
    org.clock.now += 11
    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS)
    real = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS))
    org.drain()
    assert (dry.would_admit, real) in {
        (True, "admitted"),
        (False, "409 organization"),
        (False, "409 account"),
    }, f"dry run would_admit={dry.would_admit} (organization: {dry.organization}), the create: {real}"


def _a_release_of(rid: str) -> Callable[[dict], bool]:
    def where(body: dict) -> bool:
        text = json.dumps(body)
        return "last_release" in text and f"{rid}#" in text

    return where


def test_an_expiry_whose_release_stays_unknown_is_not_answered_409(world: World) -> None:
    """Account of 2 seats: p (1) for good, h (1) a hold for 60 s. Past h's deadline, a create
    of 1 is refused and its reclaim claims h (H2); h's release at the account is sent on a
    connection that closes before it reaches DynamoDB (outcome unknown; nothing applied), the
    stream path shows nothing within the wait: the claim stays, for the takeover past the grace
    period, and h holds its seat until then. The create, judged again, is refused: 409 says no
    expired hold holds the room, though h does, for up to the grace period (5 min); the review
    57 rule answers 503 where an expiry the reclaim could not finish may hold it."""
    world.service.set_limit(world.account, 2, kind=SEATS)
    world.service = world.service_at(world.clock)
    world.service.create(world.account, "p", {}, "p", kind=SEATS)
    world.hold("h", units=1, seconds=60)
    world.drain()
    world.clock.now += 61
    with injected(
        world.clients.dynamodb_single_attempt,
        "UpdateItem",
        when="before",
        lost="closed",
        times=1,
        where=_a_release_of("h"),
    ) as fault:
        try:
            world.service.create(world.account, "q", {}, "q", kind=SEATS)
            answer = "admitted"
        except LimitExceeded as refused:
            answer = f"409 {refused.scope}"
            counters = world.counters()
        except StoreUnavailable:
            answer, counters = "503", world.counters()
    world.sweeper().sweep()
    world.drain()
    assert fault.fired == 1
    assert answer != "409 account", (
        f"409 while h, an expired hold whose release the reclaim could not confirm, held the seat"
        f" (counters {counters} of 2)"
    )
