"""What the explorer's stall past the grace period (the ``late`` step, 2026-11-27) found, pinned.

A member's create whose organization's admission had an unknown outcome and never applied (its
request refused by its condition, or never sent, and the answer lost), not confirmed; admitted at
its account; its process dead before making it live. Its account's count made it live and took it
out of the PendingIndex, and nothing ever counted it at its organization: live, held nowhere
there, for as long as it lives (the organization then admits past its limit by its units). The
record of that count now asks for its count at its organization too, as a create that made it
live unsure of its organization does (counting/records.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.errors import DomainError, InProgress, LimitExceeded, StoreUnavailable
from hybrid_counter.keys import resource_key
from tests.explorer.scheduler import Call, Race
from tests.faults import ProcessDied, at_an_organization, injected, on_a_resource
from tests.integration.test_member_resizes import assert_exact, item, split_org, units_of
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_org_split import SplitOrg
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration
__all__ = ["split_org"]


def test_a_member_made_live_by_its_accounts_count_unsure_of_its_organization_is_counted_there(
    settings, clients, stream
) -> None:
    # Given an organization of 3 seats, first holding x
    org = Org(settings, clients, stream, limit=3)
    first, second = org.members
    org.service.create(first, "x", {}, kind=SEATS)
    org.drain()
    # When second's create: its organization's admission never applies and its outcome is
    # unknown (not sent: a TLS failure), not confirmed; admitted at its account; its process dies
    # as it makes the item live
    single = org.clients.dynamodb_single_attempt
    with (
        injected(single, "UpdateItem", when="before", lost="ssl", times=1, where=at_an_organization),
        injected(org.clients.dynamodb, "UpdateItem", when="crash", where=on_a_resource),
        pytest.raises(ProcessDied),
    ):
        org.service.create(second, "y", {}, kind=SEATS)
    # ... its account's records counted (which makes it live), and the sweeper past the grace period
    org.drain()
    org.clock.now += org.settings.pending_grace_seconds + 1
    org.sweeper().sweep()
    org.drain()
    (y,) = org.resources(second)
    assert y["state"]["S"] == "live"
    # Then y is counted at its organization (P1's exception there: held as if admitted), which
    # holds both seats; one more create is admitted of 3, not two
    assert y.get("org_counted", {}).get("BOOL") is True
    assert org.org_counters() == (2, 2)
    admitted = 0
    for n in range(2):
        try:
            org.service.create(second, f"z{n}", {}, kind=SEATS)
            admitted += 1
        except LimitExceeded:
            pass
    org.drain()
    assert (admitted, org.live_units(), org.org_counters()) == (1, 3, (3, 3))


def _reads_the_orgs_profile(body: dict[str, Any]) -> bool:
    key = body.get("Key", {})
    return str(key.get("pk", {}).get("S", "")).startswith("ORG#") and key.get("sk", {}).get("S") == "PROFILE"


def test_an_admission_whose_read_of_its_organization_is_throttled_answers_a_domain_error(
    settings, clients, stream
) -> None:
    # Given a member's create that has read its organization (the precheck), and its process's
    # cache of the organization expired since (a stall)
    org = Org(settings, clients, stream, limit=3)
    first, _ = org.members
    orgs = org.service.orgs
    seen = orgs.precheck(org.org_id, SEATS, 1, "y", epoch=None)
    org.clock.now += org.settings.plan_cache_seconds + 1
    # When its admission there reads the organization again, throttled on every attempt
    # Then the admission fails with the domain's error (answered 503 or 429: "not done"), never
    # the store's own (a 500: a new kind of error for the caller)
    with (
        injected(
            org.clients.dynamodb,
            "GetItem",
            error="ThrottlingException",
            times=100,
            where=_reads_the_orgs_profile,
        ),
        pytest.raises(DomainError),
    ):
        orgs.admit(org.org_id, first, "y", "inc0000000000000", kind=SEATS, units=1, seen=seen)


def _reads_an_accounts_counter(call: Call) -> bool:
    """The read of the account's counter that its resize's counter write (Z3) is judged on:
    the half-grace check is made after it, just before the write (the residual window, a stall
    between that check and the write's send, is design.md §4.4's)."""
    key = call.body.get("Key", {})
    return (
        call.operation == "GetItem"
        and str(key.get("pk", {}).get("S", "")).startswith("ACCOUNT#")
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
    )


@pytest.mark.parametrize("target", [1, 5])
def test_a_resize_stalled_past_the_grace_period_never_moves_counters_its_settlement_ended(
    split_org: Callable[..., SplitOrg], target: int
) -> None:
    # Given a member's resource of 3 seats, counted, in an organization of 6
    org = split_org(6, 1)
    a = org.accounts[0]
    org.service.create(a, "x", {}, "x", kind=SEATS, units=3)
    org.drain()
    resizer = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When its PATCH (a shrink, or a grow) has claimed it and stalls before its account's
        # counter write (at its read), past the grace period, while the sweeper settles the claim (the
        # counters hold 3: ended at 3) ...
        patch = race.start("patch", lambda: resizer.resize(a, "x", target, kind=SEATS))
        stop_before(race, patch, _reads_an_accounts_counter)
        org.sweep_after_the_grace_period()
        assert units_of(org, a, "x") == 3
        # ... and then goes on
        race.finish(patch)
    # Then it moves no counter (503: left to the settlement that already ended it), and every
    # level holds exactly the units live
    assert isinstance(patch.error, InProgress), patch.error
    assert units_of(org, a, "x") == 3
    assert_exact(org)


def _admits_at_the_account(call: Call) -> bool:
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("pk", {}).get("S", "")).startswith("ACCOUNT#")
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
        and "last_admission" in call.body.get("UpdateExpression", "")
    )


def test_a_create_stalled_past_the_grace_period_before_making_its_item_live_answers_503(
    split_org: Callable[..., SplitOrg],
) -> None:
    # Given a member's create admitted at both levels, whose account's admission (the last write
    # before it makes its item live) answers past the grace period
    org = split_org(6, 1)
    a = org.accounts[0]
    creator = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        create = race.start("create", lambda: creator.create(a, "x", {}, "x", kind=SEATS, units=2))
        stop_before(race, create, _admits_at_the_account)
        org.clock.now += org.settings.pending_grace_seconds + 1
        race.step(create)
        # When it goes on
        race.finish(create)
    # Then it answers 503 ("may not have finished": the sweeper may roll back what is that old,
    # so it never tells 201 of a create it did not make live); the stream path's count does not
    # make it live either, past half the grace period of its put (review 51: the census may have
    # given its unit back by then), so the sweeper rolls it back: gone, nothing held at either level
    assert isinstance(create.error, StoreUnavailable), create.error
    org.drain()
    assert item(org, a, "x")["state"]["S"] == "pending"
    org.sweep_after_the_grace_period()
    org.sweep_after_the_grace_period()
    gone = org.clients.dynamodb.get_item(
        TableName=org.settings.table_name, Key=resource_key(a, "x", kind=SEATS), ConsistentRead=True
    )
    assert "Item" not in gone
    assert_exact(org)
