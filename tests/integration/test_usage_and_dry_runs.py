"""What the API reports of use is what admission judges (issue 23): a kind's ``used`` and
``remaining`` in ``GET /accounts/{id}/usage`` are ``max(best_effort, eventual)``, and a dry run
(``?dry_run=true`` on POST, PUT, PATCH) judges by both counters, as the create it stands for.

Both counters usually agree, or best_effort leads (the stream has not counted yet). These tests
set up the two states where eventual leads, against DynamoDB Local through the API's resolver:

(a) best_effort short after a failure: a create whose admission's outcome stayed unknown (a 5xx)
    is made live unadmitted; the sweeper finds it and counts it (eventual), before the stream
    path sees the drift and heals best_effort;
(b) eventual ahead of best_effort by more than one resource, written directly to the counter
    item (the stream path counted creates whose admissions are not on best_effort yet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.api.app import build_app
from hybrid_counter.effects import Effects, Waiter
from hybrid_counter.errors import LimitExceeded
from hybrid_counter.resources import ResourceService
from tests.faults import injected
from tests.integration.resolver import resolve

pytestmark = pytest.mark.integration


@pytest.fixture
def api(service: ResourceService) -> Callable[..., tuple[int, Any]]:
    """A request to the API's resolver (the handler's own routes, validation and error map)."""
    app = build_app(lambda: service)

    def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return resolve(app, method, path, body)

    return call


@pytest.fixture
def unadmitted(settings, clients, service, account, drain, sweeper_now) -> Callable[..., str]:
    """State (a): a live resource of ``units`` of ``kind`` that best_effort does not count (its
    admission answered 500, outcome unknown) and eventual does: the sweeper found it uncounted
    and counted it, and the stream path has not yet seen the drift and healed best_effort."""

    def make(kind: str, units: int = 1) -> str:
        quick = ResourceService(settings, clients, effects=Effects(waiter=Waiter(attempts=2, delay=0.01)))
        with injected(clients.dynamodb_single_attempt, "UpdateItem", error="InternalServerError") as fault:
            resource, created = quick.create(account, "lost-admission", {}, kind=kind, units=units)
        assert (fault.fired, created) == (1, True)
        drain(account)  # the stream path does not count what was never admitted
        sweeper_now.sweep()  # the sweeper counts it (CountOp); the stream has not healed yet
        counters = service.usage(account).kinds[kind]
        assert (counters.best_effort, counters.eventual) == (0, units)
        return resource.resource_id

    return make


def kind_usage(api, account: str, kind: str) -> dict[str, Any]:
    status, usage = api("GET", f"/accounts/{account}/usage")
    assert status == 200
    return dict(usage["kinds"][kind])


# ---- (a) best_effort short after a failure -----------------------------------------------------
def test_usage_counts_a_resource_best_effort_lost_once_it_is_counted(service, api, account, unadmitted):
    # Given room for 3 seats, and a 2-seat team whose admission's outcome stayed unknown, which
    # the sweeper has counted (best_effort 0, eventual 2)
    service.set_limit(account, 3, kind="seats")
    unadmitted("seats", units=2)
    # When the tenant reads its usage
    seats = kind_usage(api, account, "seats")
    # Then the team is used, and only 1 seat remains: what the next create will be judged by
    assert seats == {
        "limit": 3,
        "limit_source": "override",
        "best_effort": 0,
        "eventual": 2,
        "used": 2,
        "remaining": 1,
        "held": 0,
    }
    with pytest.raises(LimitExceeded):
        service.create(account, "two-more", {}, kind="seats", units=2)


def test_dry_runs_judge_by_the_counter_that_counted_it(service, api, account, unadmitted):
    # Given room for 1 seat, taken by a team best_effort does not count but eventual does
    service.set_limit(account, 1, kind="seats")
    team = unadmitted("seats")
    base = f"/accounts/{account}/kinds/seats/resources"
    refused = {
        "would_admit": False,
        "kind": "seats",
        "units": 1,
        "limit": 1,
        "used": 1,
        "remaining": 0,
        "scope": "account",
    }
    # When a create (POST, PUT) of 1 seat and a growth of the team by 1 are tried as dry runs
    post = api("POST", f"{base}?dry_run=true", {"name": "one", "units": 1})
    put = api("PUT", f"{base}/new-one?dry_run=true", {"name": "one", "units": 1})
    patch = api("PATCH", f"{base}/{team}?dry_run=true", {"units": 2})
    # Then each answers that it would not be admitted, with the use admission judges by
    assert post == (200, refused)
    assert put == (200, refused)
    assert patch == (200, refused)
    # And the real requests are refused alike (what the dry run stood for)
    assert api("POST", base, {"name": "one"})[0] == 409
    assert api("PATCH", f"{base}/{team}", {"units": 2})[0] == 409


# ---- (b) eventual ahead of best_effort -----------------------------------------------------------
@pytest.fixture
def eventual_ahead(service, account, set_counter) -> None:
    """State (b) on the stack's default kind: limit 5, best_effort 1, eventual 3."""
    service.set_limit(account, 5)
    service.create(account, "counted", {})
    set_counter(account, best_effort=1, eventual=3)


@pytest.mark.usefixtures("eventual_ahead")
def test_usage_reports_eventual_when_it_is_ahead(service, api, account):
    # When the tenant reads its usage (the routes without a kind read the top-level figures)
    status, usage = api("GET", f"/accounts/{account}/usage")
    # Then used and remaining are eventual's, at the top level and for the kind
    assert status == 200
    default = usage["kinds"][service.kind(None)]
    for figures in (usage, default):
        assert (figures["best_effort"], figures["eventual"]) == (1, 3)
        assert (figures["used"], figures["remaining"]) == (3, 2)


@pytest.mark.usefixtures("eventual_ahead")
@pytest.mark.parametrize(
    ("units", "would_admit"),
    [(2, True), (3, False)],  # 3 + 2 <= 5; 3 + 3 > 5, though 1 + 3 <= 5 on best_effort alone
)
def test_dry_runs_judge_by_eventual_when_it_is_ahead(service, api, account, units, would_admit):
    base = f"/accounts/{account}/resources"
    expected = {
        "would_admit": would_admit,
        "kind": service.kind(None),
        "units": units,
        "limit": 5,
        "used": 3,
        "remaining": 2,
        **({} if would_admit else {"scope": "account"}),  # a refusal says which level refuses
    }
    # When creates of `units` are tried as dry runs, by POST and by PUT
    post = api("POST", f"{base}?dry_run=true", {"name": "more", "units": units})
    put = api("PUT", f"{base}/more?dry_run=true", {"name": "more", "units": units})
    # Then both answer what admission will judge, and nothing was written
    assert post == (200, expected)
    assert put == (200, expected)
    assert api("GET", f"{base}/more")[0] == 404
    # And the real create agrees with the dry run
    assert api("POST", base, {"name": "more", "units": units})[0] == (201 if would_admit else 409)


@pytest.mark.usefixtures("eventual_ahead")
def test_a_resize_dry_run_judges_by_eventual_when_it_is_ahead(service, api, account):
    # Given the 1-unit resource of the default kind, through the kind's own routes
    resource = service.list(account, 10, None).items[0]
    path = f"/accounts/{account}/kinds/{service.kind(None)}/resources/{resource.resource_id}"
    # When it is grown to 3 units (2 more: 3 + 2 <= 5) and to 4 (3 more: 3 + 3 > 5) as dry runs
    grow_two = api("PATCH", f"{path}?dry_run=true", {"units": 3})
    grow_three = api("PATCH", f"{path}?dry_run=true", {"units": 4})
    # Then the first would be admitted and the second not, as the resizes themselves
    assert (grow_two[1]["would_admit"], grow_two[1]["used"], grow_two[1]["units"]) == (True, 3, 2)
    assert (grow_three[1]["would_admit"], grow_three[1]["used"], grow_three[1]["units"]) == (False, 3, 3)
    assert api("PATCH", path, {"units": 4})[0] == 409
    assert api("PATCH", path, {"units": 3})[0] == 200
