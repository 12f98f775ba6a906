"""Bad input gets a 4xx with the error body and never reaches the domain."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hybrid_counter.api.app import build_app
from hybrid_counter.errors import HoldExpired, LimitExceeded, NotFound
from hybrid_counter.governance.event_log import EventPage
from hybrid_counter.governance.history import HistoryPage
from hybrid_counter.governance.usage_over import OverPage
from hybrid_counter.orgs import Org
from hybrid_counter.plans import Plan, PlanPage
from hybrid_counter.resources import Resource, ResourcePage, Usage
from hybrid_counter.usage import OrgKindUsage, OrgUsage, TopAccount, WouldAdmit
from tests.conftest import load_event


class RecordingService:
    """The API's service, recording what the routes ask of it (keyword options only when given)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.callers: list[str] = []  # who each limit change was made by

    def _record(self, name: str, args: tuple[Any, ...], options: dict[str, Any]) -> None:
        given = {k: v for k, v in options.items() if v is not None and not (k == "units" and v == 1)}
        self.calls.append((name, (*args, given) if given else args))

    def set_limit(
        self, account_id: str, limit: int, *, kind: str | None = None, force: bool = False, by: str = ""
    ) -> dict[str, Any]:
        self._record("set_limit", (account_id, limit), {"kind": kind, "force": force or None})
        self.callers.append(by)
        return {"account_id": account_id, "kind": kind or "resources", "limit": limit}

    def remove_limit(self, account_id: str, *, kind: str, force: bool = False, by: str = "") -> None:
        self._record("remove_limit", (account_id,), {"kind": kind, "force": force or None})
        self.callers.append(by)

    def account_history(self, account_id: str, *, kind=None, page_size=50, next_token=None):
        self._record("account_history", (account_id,), {"kind": kind})
        return HistoryPage([{"what": "override", "new": 5}], None)

    def usage_over(self, *, threshold=None, kind=None, page_size=50, next_token=None):
        self._record("usage_over", (), {"threshold": threshold, "kind": kind})
        return OverPage([], None)

    def events(self, *, since=None, page_size=50, next_token=None):
        self._record("events", (), {"since": since})
        return EventPage([], None)

    def plan_history(self, plan_id: str, *, page_size=50, next_token=None):
        self._record("plan_history", (plan_id,), {})
        return HistoryPage([], None)

    def usage(self, account_id: str) -> Usage:
        self.calls.append(("usage", (account_id,)))
        return Usage(account_id, 10, 3, 2)

    def create(
        self,
        account_id: str,
        name: str,
        extra: dict,
        resource_id: str | None = None,
        *,
        kind: str | None = None,
        units: int = 1,
        hold_seconds: int | None = None,
    ):
        held = {} if hold_seconds is None else {"hold_seconds": hold_seconds}
        self._record("create", (account_id, name, extra, resource_id), {"kind": kind, "units": units, **held})
        if name == "full":
            raise LimitExceeded(10, 10)
        resource = Resource(account_id, resource_id or "generated", name, "2026-11-21T00:00:00.000Z", extra)
        return resource, True

    def would_create(
        self,
        account_id: str,
        name: str,
        extra: dict,
        resource_id=None,
        *,
        kind=None,
        units=1,
        hold_seconds=None,
    ):
        held = {} if hold_seconds is None else {"hold_seconds": hold_seconds}
        self._record(
            "would_create", (account_id, name, extra, resource_id), {"kind": kind, "units": units, **held}
        )
        return WouldAdmit(kind or "resources", units, 10, 3, units <= 7)

    def resize(self, account_id: str, resource_id: str, units: int, *, kind: str | None = None) -> Resource:
        self._record("resize", (account_id, resource_id, units), {"kind": kind})
        return Resource(
            account_id, resource_id, "r", "2026-11-21T00:00:00.000Z", {}, kind or "resources", units
        )

    def would_resize(self, account_id: str, resource_id: str, units: int, *, kind: str | None = None):
        self._record("would_resize", (account_id, resource_id, units), {"kind": kind})
        return WouldAdmit(kind or "resources", units - 1, 10, 3, units <= 8)

    def get(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        raise NotFound("resource not found")

    def confirm(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        self._record("confirm", (account_id, resource_id), {"kind": kind})
        if resource_id == "expired":
            raise HoldExpired("the hold on expired expired")
        return Resource(account_id, resource_id, "r", "2026-11-21T00:00:00.000Z", {}, kind or "resources")

    def list(self, account_id: str, page_size: int, next_token: str | None, *, kind: str | None = None):
        self._record("list", (account_id, page_size, next_token), {"kind": kind})
        return ResourcePage([], None)

    def delete(self, account_id: str, resource_id: str, *, kind: str | None = None) -> None:
        self._record("delete", (account_id, resource_id), {"kind": kind})

    def put_plan(self, plan_id: str, limits: dict[str, int], *, by: str = "") -> Plan:
        self.calls.append(("put_plan", (plan_id, limits)))
        return Plan(plan_id, limits)

    def get_plan(self, plan_id: str) -> Plan:
        self.calls.append(("get_plan", (plan_id,)))
        if plan_id == "missing":
            raise NotFound("plan not found")
        return Plan(plan_id, {"projects": 3})

    def list_plans(self, page_size: int = 50, next_token: str | None = None) -> PlanPage:
        self.calls.append(("list_plans", (page_size, next_token)))
        return PlanPage([Plan("default", {"resources": 100})], None)

    def assign_plan(
        self, account_id: str, plan_id: str, *, force: bool = False, by: str = ""
    ) -> dict[str, Any]:
        self.calls.append(("assign_plan", (account_id, plan_id)))
        return {"account_id": account_id, "plan_id": plan_id}

    # ---- organizations (an organization named "missing" does not exist) --------------------------
    def _org(self, org_id: str) -> Org:
        if org_id == "missing":
            raise NotFound("organization not found")
        return Org(org_id, "pro", 2, "2026-11-21T00:00:00.000Z")

    def put_org(
        self, org_id: str, plan_id: str, *, force: bool = False, by: str = "", shards: int | None = None
    ) -> tuple[Org, bool]:
        self._record("put_org", (org_id, plan_id), {"force": force or None, "shards": shards})
        self.callers.append(by)
        return Org(org_id, plan_id, 0, "2026-11-21T00:00:00.000Z"), org_id.startswith("new")

    def get_org(self, org_id: str) -> Org:
        self.calls.append(("get_org", (org_id,)))
        return self._org(org_id)

    def delete_org(self, org_id: str) -> None:
        self.calls.append(("delete_org", (org_id,)))
        self._org(org_id)

    def set_org_limit(
        self, org_id: str, kind: str, limit: int | None, *, force: bool = False, by: str = ""
    ) -> None:
        self._record("set_org_limit", (org_id, kind, limit), {"force": force or None})
        self.callers.append(by)
        self._org(org_id)

    def add_member(self, org_id: str, account_id: str) -> bool:
        self.calls.append(("add_member", (org_id, account_id)))
        self._org(org_id)
        return account_id.startswith("new")

    def remove_member(self, org_id: str, account_id: str) -> bool:
        self.calls.append(("remove_member", (org_id, account_id)))
        return True

    def org_usage(self, org_id: str, *, top: int = 5) -> OrgUsage:
        self._record("org_usage", (org_id,), {"top": top})
        org = self._org(org_id)
        leaders = (TopAccount("acct-demo", 2),)[:top]
        return OrgUsage(
            org_id, org.plan_id, org.members, {"projects": OrgKindUsage("projects", 3, "plan", 2, 2, leaders)}
        )

    def org_history(self, org_id: str, *, kind=None, page_size=50, next_token=None):
        self._record("org_history", (org_id,), {"kind": kind})
        return HistoryPage([{"what": "org_plan", "new": "pro"}], None)


@pytest.fixture
def api():
    service = RecordingService()
    app = build_app(lambda: service)  # type: ignore[arg-type, return-value]

    def call(name: str, body: Any = ..., **changes: Any) -> tuple[int, Any]:
        event = load_event(name)
        if body is not ...:
            event["body"] = body
        for key, value in changes.items():
            event[key] = value
        response = app.resolve(event, None)  # type: ignore[arg-type]
        text = response.get("body") or ""
        return response["statusCode"], (json.loads(text) if text else None)

    call.service = service  # type: ignore[attr-defined]
    return call


def assert_error(status: int, body: Any, expected_status: int, code: str) -> None:
    assert status == expected_status
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        "[]",
        '"limit"',
        '{"limit": -1}',
        '{"limit": "3"}',
        '{"limit": 3.5}',
        '{"limit": true}',
        '{"limit": null}',
        "{}",
        '{"limit": 3, "other": 1}',
        None,
    ],
)
def test_bad_limit_bodies_are_rejected(api, body):
    status, payload = api("api_put_limit.json", body)
    assert_error(status, payload, 400, "ValidationError")
    assert api.service.calls == []


@pytest.mark.parametrize(
    "body",
    [
        "{broken",
        "{}",
        '{"name": ""}',
        '{"name": 5}',
        '{"name": null}',
        '{"name": "' + "x" * 257 + '"}',
        '{"name": "ok", "resource_id": "forged"}',
        '{"name": "ok", "blob": "' + "x" * 17000 + '"}',
    ],
    ids=["malformed", "empty", "blank-name", "int-name", "null-name", "long-name", "reserved", "oversize"],
)
def test_bad_resource_bodies_are_rejected(api, body):
    status, payload = api("api_create_resource.json", body)
    assert_error(status, payload, 400, "ValidationError")
    assert api.service.calls == []


@pytest.mark.parametrize("bad_id", ["a b", "-leading-dash", "x" * 65, "semi;colon", "ünïcode", "..%2F"])
def test_bad_ids_are_rejected(api, bad_id):
    path = f"/accounts/acct-demo/resources/{bad_id}"
    event = load_event("api_put_resource.json")
    status, payload = api(
        "api_put_resource.json",
        rawPath=path,
        requestContext={**event["requestContext"], "http": {**event["requestContext"]["http"], "path": path}},
        pathParameters={"account_id": "acct-demo", "resource_id": bad_id},
    )
    assert_error(status, payload, 400, "ValidationError")
    assert api.service.calls == []


def test_unknown_route_is_404_with_error_body(api):
    event = load_event("api_get_usage.json")
    status, payload = api(
        "api_get_usage.json",
        rawPath="/accounts/acct-demo/nothing",
        requestContext={
            **event["requestContext"],
            "http": {**event["requestContext"]["http"], "path": "/x/y"},
        },
    )
    assert_error(status, payload, 404, "NotFound")


def test_valid_create_passes_extra_fields_through(api):
    status, payload = api("api_create_resource.json")
    assert status == 201
    assert payload["name"] == "build-runner"
    assert payload["tier"] == "small"
    assert api.service.calls == [("create", ("acct-demo", "build-runner", {"tier": "small"}, None))]


def test_limit_exceeded_is_409_with_limit_and_used(api):
    status, payload = api("api_create_resource.json", '{"name": "full"}')
    assert_error(status, payload, 409, "LimitExceeded")
    assert payload["error"]["limit"] == 10
    assert payload["error"]["used"] == 10


def test_not_found_is_404(api):
    status, payload = api("api_get_resource.json")
    assert_error(status, payload, 404, "NotFound")


def test_delete_is_204_without_body(api):
    status, payload = api("api_delete_resource.json")
    assert status == 204
    assert payload is None


def test_usage_reports_used_as_the_max_of_both_counters(api):
    status, payload = api("api_get_usage.json")
    assert status == 200
    assert payload == {
        "account_id": "acct-demo",
        "plan_id": "default",
        "limit": 10,
        "best_effort": 3,
        "eventual": 2,
        "used": 3,
        "remaining": 7,
        "kinds": {},
    }


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "101"}, {"limit": "ten"}])
def test_bad_list_page_sizes_are_rejected(api, query):
    status, payload = api("api_list_resources.json", queryStringParameters=query)
    assert_error(status, payload, 400, "ValidationError")


def test_body_that_is_not_utf8_is_a_validation_error(api):
    status, payload = api("api_create_resource.json", "gICA", isBase64Encoded=True)  # b"\x80\x80\x80"
    assert_error(status, payload, 400, "ValidationError")
    assert api.service.calls == []


def test_json_body_is_read_without_a_json_content_type(api):
    from hybrid_counter.api.app import as_json_request

    event = load_event("api_create_resource.json")
    event["headers"] = {"content-type": "application/x-www-form-urlencoded"}
    service = RecordingService()
    response = build_app(lambda: service).resolve(as_json_request(event), None)  # type: ignore[arg-type, return-value]
    assert response["statusCode"] == 201


def test_a_hold_passes_hold_seconds_to_the_create(api):
    status, _ = api("api_create_hold.json")
    assert status == 201
    assert api.service.calls == [
        ("create", ("acct-demo", "build-runner", {"tier": "small"}, None, {"hold_seconds": 600}))
    ]


@pytest.mark.parametrize("value", ["0", "-1", "ten", "1.5"])
def test_hold_seconds_that_are_not_a_positive_integer_are_400_before_anything_is_done(api, value):
    status, payload = api("api_create_hold.json", queryStringParameters={"hold_seconds": value})
    assert_error(status, payload, 400, "ValidationError")
    assert api.service.calls == []


def test_confirm_answers_the_resource_and_an_expired_hold_is_409_hold_expired(api):
    status, payload = api("api_confirm_resource.json")
    assert (status, payload["resource_id"], payload["held"]) == (200, "res-1", False)
    expired = load_event("api_confirm_resource.json")
    status, payload = api(
        "api_confirm_resource.json",
        pathParameters={"account_id": "acct-demo", "resource_id": "expired"},
        rawPath="/accounts/acct-demo/resources/expired/confirm",
        requestContext={
            **expired["requestContext"],
            "http": {
                **expired["requestContext"]["http"],
                "path": "/accounts/acct-demo/resources/expired/confirm",
            },
        },
    )
    assert_error(status, payload, 409, "HoldExpired")
