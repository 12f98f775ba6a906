"""Review 60 (hostile): the organization-wide reclaim of expired holds (design.md §12, "At the
organization"). Against DynamoDB Local, every component on one clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hybrid_counter.errors import DomainError, LimitExceeded, StoreUnavailable
from tests.faults import injected
from tests.integration.test_member_resizes import split_org
from tests.integration.test_org_hold_reclaim import an_org, expire_what_is_left, in_the_index
from tests.integration.test_org_split import SEATS, SplitOrg

pytestmark = pytest.mark.integration
__all__ = ["expire_what_is_left", "split_org"]

THROTTLED = "ProvisionedThroughputExceededException"


def _expiry_claim_of(rid: str) -> Callable[[dict], bool]:
    """H2 (an expiry's claim) of resource ``rid``."""

    def where(body: dict) -> bool:
        sk = str(body.get("Key", {}).get("sk", {}).get("S", ""))
        return sk.endswith(f"#{rid}") and "expired = :true" in str(body.get("UpdateExpression", ""))

    return where


# answer_of's line for a refusal whose reclaim gave up a hold that could make room (holds._retry)
RETRY_ANSWER = "503 an expired hold could not be released in time; retry the request"


def answer_of(call: Callable[[], object], *, figures: bool = False) -> str:
    """What a request answered, as a line: "admitted", "503 <message>", "409 <scope>" (and, with
    ``figures``, "(<used> of <limit>, <units> asked)"), or another domain error."""
    try:
        call()
        return "admitted"
    except StoreUnavailable as error:
        return f"503 {error}"
    except LimitExceeded as error:
        if figures:
            return f"409 {error.scope} ({error.used} of {error.limit}, {error.units} asked)"
        return f"409 {error.scope}"
    except DomainError as error:
        return f"{type(error).__name__} {error}"


def test_a_reclaim_whose_second_expiry_claim_is_throttled_still_judges_again(
    split_org: Callable[..., SplitOrg],
) -> None:
    """Organization of 6 seats. a holds 4 for good; b holds ha (1) and hb (1), both past their
    deadline. a's create of 1 is refused at the organization; its reclaim releases ha (room for
    the create), then hb's claim (H2) is throttled on every attempt. The 503 rule (§12, review
    57): judged again first with what the reclaim did release; 503 only if refused again."""
    org = an_org(split_org)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=4)
    org.service.create(b, "ha", {}, "ha", kind=SEATS, units=1, hold_seconds=10)
    org.clock.now += 1
    org.service.create(b, "hb", {}, "hb", kind=SEATS, units=1, hold_seconds=10)
    org.drain()
    org.clock.now += 20
    with injected(
        org.clients.dynamodb, "UpdateItem", error=THROTTLED, times=50, where=_expiry_claim_of("hb")
    ):
        answer = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS))
    org.drain()
    used = org.picture().best_effort
    # ha was released: 4 + hb's 1 = 5 of 6, room for the create
    assert answer == "admitted", (
        f"the create had room after ha's expiry (org uses {used} of 6) and answered {answer}"
    )


def test_a_dry_run_never_counts_an_expired_hold_under_a_resize_the_reclaim_cannot_expire(
    split_org: Callable[..., SplitOrg],
) -> None:
    """Organization of 6 seats. a holds x (2) for good; b holds h (4) for 10 s and shrinks it to
    3 before its deadline, its process dying after the resize's claim (a resize in flight, until
    the takeover past the grace period). Past the deadline, a's create of 1 seat is refused at
    the organization; its reclaim cannot expire h (H2: no resize in flight). A dry run of the
    same create must say the same. Since the fourteenth session (review 69 F1) the reclaim
    gives a resize older than CLAIM_FRESH_SECONDS up as it does a dead claim, and answers 503
    (h's release could make room), where it answered 409, which fits no order (a create placed
    before or after the shrink finds h expired); the dry run, as for a dead claim, does not
    count it (would_admit False)."""
    from tests.faults import ProcessDied

    org = an_org(split_org)
    a, b = org.accounts[:2]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=2)
    org.service.create(b, "h", {}, "h", kind=SEATS, units=4, hold_seconds=10)
    org.drain()
    org.clock.now += 5
    with (
        injected(org.clients.dynamodb_single_attempt, "UpdateItem", when="crash"),
        pytest.raises(ProcessDied),
    ):
        org.service.resize(b, "h", 3, kind=SEATS)
    org.clock.now += 6  # h's deadline passed; the grace period not
    assert in_the_index(org) == {"h"}
    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS)
    real = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS))
    org.sweep_after_the_grace_period()  # (the dead resize taken over: h expirable by the teardown)
    assert (dry.would_admit, real) in {(True, "admitted"), (False, RETRY_ANSWER)}, (
        f"dry run would_admit={dry.would_admit} (organization: {dry.organization}), the create: {real}"
    )


@pytest.mark.parametrize("shards", [1, 4])
def test_a_create_refused_at_its_account_then_at_its_organization_reclaims_the_organizations_holds(
    split_org: Callable[..., SplitOrg], shards: int
) -> None:
    """Organization of 6 seats. Member a (its own limit 2 seats) holds ha (1), past its deadline;
    member b uses p (4) for good and holds hb (1), past its deadline: the organization at 6 of 6.
    a's create of 2 is refused at its account first (1 + 2 > 2), reclaims a's own expired hold
    (ha) only, is judged again and refused at the organization (5 + 2 > 6): 409, though hb, an
    expired hold of a member, holds the very unit it lacks (4 + 2 = 6). The dry run says yes."""
    org = an_org(split_org, shards)
    a, b = org.accounts[:2]
    org.service.set_limit(a, 2, kind=SEATS)
    org.service = org.new_service()
    org.service.create(a, "ha", {}, "ha", kind=SEATS, units=1, hold_seconds=10)
    org.service.create(b, "p", {}, "p", kind=SEATS, units=4)
    org.service.create(b, "hb", {}, "hb", kind=SEATS, units=1, hold_seconds=10)
    org.drain()
    org.clock.now += 11
    dry = org.service.would_create(a, "y", {}, "y", kind=SEATS, units=2)
    real = answer_of(lambda: org.service.create(a, "y", {}, "y", kind=SEATS, units=2))
    org.drain()
    left = sorted(in_the_index(org))
    assert (dry.would_admit, real) == (True, "admitted"), (
        f"dry run would_admit={dry.would_admit}; the create: {real}; expired holds left: {left}"
    )
