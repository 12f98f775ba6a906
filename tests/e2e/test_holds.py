"""Holds over HTTP (issue 25): a create with ?hold_seconds= reserves units, a confirm makes them
permanent, a deadline that passes releases them (here: the account's next create refused for
room, which expires its expired holds first), and a confirm after it is 409 HoldExpired."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.e2e.conftest import Target

pytestmark = pytest.mark.e2e


def new_account(target: Target, limit: int) -> str:
    account = f"hold-{uuid.uuid4().hex[:10]}"
    assert target.call("PUT", f"/accounts/{account}/limit", {"limit": limit}).status_code == 200
    return account


def test_a_hold_is_held_then_confirmed_once_and_counts_like_any_resource(target: Target) -> None:
    account = new_account(target, 2)
    # Given a hold of 2 units for ten minutes
    made = target.call("PUT", f"/accounts/{account}/resources/h?hold_seconds=600", {"name": "h", "units": 2})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["held"] is True
    assert body["expires_at"].endswith("Z")
    # Then it fills the limit, and usage shows it held
    refused = target.call("POST", f"/accounts/{account}/resources", {"name": "x"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "LimitExceeded")
    usage = target.call("GET", f"/accounts/{account}/usage").json()
    kind = next(iter(usage["kinds"].values()))
    assert (usage["used"], kind["held"]) == (2, 2)
    # When it is confirmed, and the confirm is sent again
    first = target.call("POST", f"/accounts/{account}/resources/h/confirm")
    again = target.call("POST", f"/accounts/{account}/resources/h/confirm")
    # Then both answer the permanent resource
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["held"] is False
    assert "expires_at" not in first.json()
    assert first.json() == again.json()
    assert target.call("GET", f"/accounts/{account}/resources/h").json()["held"] is False
    # And a confirm of an id that does not exist is a 404
    missing = target.call("POST", f"/accounts/{account}/resources/nope/confirm")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "NotFound")


def test_an_expired_hold_is_refused_its_confirm_and_frees_its_units_for_the_next_create(
    target: Target,
) -> None:
    account = new_account(target, 1)
    # Given a hold of the account's one unit for one second
    made = target.call("POST", f"/accounts/{account}/resources?hold_seconds=1", {"name": "h"})
    assert made.status_code == 201, made.text
    rid = made.json()["resource_id"]
    time.sleep(1.5)
    # When its deadline has passed, a confirm is refused
    late = target.call("POST", f"/accounts/{account}/resources/{rid}/confirm")
    assert (late.status_code, late.json()["error"]["code"]) == (409, "HoldExpired"), late.text
    # And the next create is admitted: refused for room at first, it expired the hold and was
    # judged again
    created = target.call("POST", f"/accounts/{account}/resources", {"name": "x"})
    assert created.status_code == 201, created.text
    assert target.call("GET", f"/accounts/{account}/resources/{rid}").status_code == 404
    # And a confirm now still says the hold expired
    gone = target.call("POST", f"/accounts/{account}/resources/{rid}/confirm")
    assert (gone.status_code, gone.json()["error"]["code"]) == (409, "HoldExpired")
    target.settle()
    usage = target.call("GET", f"/accounts/{account}/usage").json()
    assert (usage["best_effort"], usage["eventual"], usage["used"]) == (1, 1, 1)


@pytest.mark.parametrize("query", ["hold_seconds=0", "hold_seconds=86401", "hold_seconds=soon"])
def test_a_hold_outside_its_bounds_is_a_400_and_creates_nothing(target: Target, query: str) -> None:
    account = new_account(target, 5)
    refused = target.call("PUT", f"/accounts/{account}/resources/h?{query}", {"name": "h"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "ValidationError")
    assert target.call("GET", f"/accounts/{account}/resources/h").status_code == 404
