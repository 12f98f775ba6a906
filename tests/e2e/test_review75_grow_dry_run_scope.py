"""Review 75, over HTTP: a member's grow that both its account and its organization refuse. The
user guide: "When the answer is no, `scope` says which level refuses, as the request's `409`
would". The grow's 409 names the organization (a grow is judged there first); its dry run named
the account. Found by tools_review75/driver.py (dry_run_agrees), reduced here; deterministic."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Target
from tests.e2e.test_organizations import SEATS, new_id, ok, organization

pytestmark = pytest.mark.e2e


def test_a_members_grow_dry_run_names_the_level_its_409_names(target: Target) -> None:
    # Given an organization of 5 seats; a may hold 4 and holds x (4), b holds y (1): both levels full
    a, b = new_id("r75a"), new_id("r75b")
    organization(target, 5, a, b, member_seats=4)
    x = ok(target.call("POST", f"/accounts/{a}/kinds/{SEATS}/resources", {"name": "x", "units": 4}), 201)
    ok(target.call("POST", f"/accounts/{b}/kinds/{SEATS}/resources", {"name": "y", "units": 1}), 201)
    path = f"/accounts/{a}/kinds/{SEATS}/resources/{x['resource_id']}"
    # When x is asked to grow to 7: a dry run, then the request
    dry = ok(target.call("PATCH", f"{path}?dry_run=true", {"units": 7}))
    real = target.call("PATCH", path, {"units": 7})
    # Then both say no, and name the same level
    assert real.status_code == 409, real.text
    assert dry["would_admit"] is False
    assert dry["scope"] == real.json()["error"]["scope"], (dry, real.json())
