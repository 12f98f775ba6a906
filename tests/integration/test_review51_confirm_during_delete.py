"""Review 51 (hostile, holds, accounts without an organization): a confirm that meets a caller's
DELETE in flight answers 404 without waiting for it.

``HoldFlow.confirm`` answers NotFound ("being deleted") as soon as it reads the item ``deleting``
(not ``expired``). The delete may still fail without effect: its release (D2) throttled on every
attempt, the claim reverted, 429 ("nothing was done"). The hold then still exists, live and
unconfirmed, and expires at its deadline, releasing the units the caller was told... nothing
about: the confirm said the resource does not exist while it did, before and after. No order of
the two requests explains (DELETE 429 did nothing, so a confirm after or before it finds the hold
and confirms it: 200). A DELETE that meets another's claim waits for it (design.md §4, D1:
"claimed by another request: wait for it (404 if it removed the resource, claim again if it
reverted)"); the confirm does not."""

from __future__ import annotations

import uuid

import pytest

from hybrid_counter.errors import DomainError, Throttled
from tests.explorer.scheduler import Call, Race
from tests.integration.test_org_recount import SEATS, Org
from tests.integration.test_split_review import stop_before

pytestmark = pytest.mark.integration


def _releases(call: Call) -> bool:
    key = call.body.get("Key", {})
    return (
        call.operation == "UpdateItem"
        and str(key.get("sk", {}).get("S", "")).startswith("COUNTER#")
        and "last_release" in call.body.get("UpdateExpression", "")
    )


def test_a_confirm_never_answers_404_for_a_hold_whose_delete_did_nothing(settings, clients, stream) -> None:
    # Given an account of no organization holding a hold h (deadline an hour away)
    org = Org(settings, clients, stream, limit=10)
    account = f"solo-{uuid.uuid4().hex[:8]}"
    org.service.set_limit(account, 2, kind=SEATS)
    org.service.create(account, "h", {}, "h", kind=SEATS, hold_seconds=3600)
    org.drain(account)
    deleter = org.new_service()
    with Race(org.clients.dynamodb, org.clients.dynamodb_single_attempt) as race:
        # When a DELETE of h has claimed it (D1) ...
        delete = race.start("delete", lambda: deleter.delete(account, "h", kind=SEATS))
        stop_before(race, delete, _releases)
        # ... a confirm of h comes
        try:
            confirmed = org.service.confirm(account, "h", kind=SEATS)
            confirm = f"200 held={confirmed.hold_until is not None}"
        except DomainError as error:
            confirm = f"{type(error).__name__}"
        # ... and the DELETE's release is throttled on every attempt (claim reverted: 429)
        while not delete.done:
            pending = delete.pending
            race.step(
                delete, fault="ThrottlingException" if pending is not None and _releases(pending) else None
            )
    assert isinstance(delete.error, Throttled), delete.error
    h = org.service.get(account, "h", kind=SEATS)
    # The hold still exists, unconfirmed (it will expire at its deadline and release its unit)
    assert h.hold_until is not None
    # Then the confirm did not answer 404 for it (it waits for the delete, as a DELETE does,
    # and confirms it once the claim is reverted; or answers 503 "retry")
    assert confirm != "NotFound", f"confirm answered {confirm} for a hold that exists, unconfirmed"
