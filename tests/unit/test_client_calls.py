"""Every client call: its route, query and body, how its answer is read; paging; SigV4; sync/async parity."""

from __future__ import annotations

import inspect
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials

from hybrid_counter.api.access import ROUTE_ACCESS
from hybrid_counter.api.console_routes import CONSOLE_ROUTES
from hybrid_counter_client import (
    AccountPlan,
    AsyncClient,
    AsyncPaginator,
    ChangeRecord,
    Client,
    KindUsage,
    LoggedEvent,
    Membership,
    Org,
    OrgKindUsage,
    OrgOverride,
    OrgRoom,
    OrgUsage,
    Override,
    OverRow,
    Page,
    Paginator,
    Plan,
    Resource,
    SigV4,
    TopAccount,
    Usage,
    WouldAdmit,
    __version__,
)
from hybrid_counter_client.client import DEFAULT_HEADERS
from localrun.gateway.sigv4_authorizer import LOCAL_CALLER, SigV4Verifier
from tests.unit.client_support import (
    CHANGE,
    KIND_USAGE,
    MEMBER_USAGE,
    ORG,
    ORG_KIND_USAGE,
    ORG_USAGE,
    PLAN,
    RESOURCE,
    USAGE,
    WOULD_ADMIT,
    Script,
    async_client,
    client,
    ok,
    run,
)

RESOURCE_OBJECT = Resource("acme", "projects", "r-1", "web", 2, "2026-11-21T00:00:00.000Z", {"team": "blue"})
USAGE_OBJECT = Usage("acme", "gold", 100, 3, 2, 3, 97, {"projects": KindUsage(2, "plan", 1, 0, 1, 1)})
WOULD_ADMIT_OBJECT = WouldAdmit(False, "projects", 1, 2, 2, 0)
CHANGE_OBJECT = ChangeRecord(
    "c-1", "2026-11-21T00:00:00.000Z", "operator-1", "override", None, 5, True, "acme", "projects", None
)
PAGE = {"items": [RESOURCE], "next_token": None}
# A hold as the API answers it (a newer API sends `held` on every resource; an older one none)
HELD = {**RESOURCE, "held": True, "expires_at": "2026-11-22T00:00:00.000Z"}
HELD_OBJECT = replace(RESOURCE_OBJECT, held=True, expires_at="2026-11-22T00:00:00.000Z")
CONFIRMED = {**RESOURCE, "held": False}
ORG_OBJECT = Org("acme-group", "gold", 2, "2026-11-21T00:00:00.000Z")
ORG_USAGE_OBJECT = OrgUsage(
    "acme-group",
    "gold",
    2,
    {"projects": OrgKindUsage(10, "override", 7, 6, 7, 3, [TopAccount("acme", 4), TopAccount("acme-eu", 2)])},
)
ORG_CHANGE = {
    **CHANGE,
    "what": "org_plan",
    "old": None,
    "new": "gold",
    "account_id": None,
    "org_id": "acme-group",
}
OVER_ROW = {
    "org_id": "acme-group",
    "scope": "organization",
    "kind": "projects",
    "threshold": 80,
    "used": 8,
    "limit": 10,
    "since": "2026-11-26T00:00:00.000Z",
}
OVER_ROW_OBJECT = OverRow(
    "organization", "projects", 80, 8, 10, "2026-11-26T00:00:00.000Z", org_id="acme-group"
)
LOGGED = {
    "event_id": "acme/projects/3/80/reached",
    "detail_type": "Quota Threshold Reached",
    "time": "2026-11-26T00:00:00.120Z",
    "detail": {"event_id": "acme/projects/3/80/reached", "account_id": "acme", "threshold": 80},
}
LOGGED_OBJECT = LoggedEvent(
    "acme/projects/3/80/reached",
    "Quota Threshold Reached",
    "2026-11-26T00:00:00.120Z",
    {"event_id": "acme/projects/3/80/reached", "account_id": "acme", "threshold": 80},
)
ORG_CHANGE_OBJECT = ChangeRecord(
    "c-1",
    "2026-11-21T00:00:00.000Z",
    "operator-1",
    "org_plan",
    None,
    "gold",
    True,
    None,
    "projects",
    None,
    "acme-group",
)


class Invoke:
    """A client method and its arguments, for either client (a listing is read to its end)."""

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, api: Client) -> Any:
        got = getattr(api, self.name)(*self.args, **self.kwargs)
        return list(got) if isinstance(got, Paginator) else got

    async def on(self, api: AsyncClient) -> Any:
        got = getattr(api, self.name)(*self.args, **self.kwargs)
        if isinstance(got, AsyncPaginator):
            return [item async for item in got]
        return await got


# (call, method, path, query, body sent, status and body answered, result)
CALLS: list[Any] = [
    pytest.param(
        Invoke("usage", "acme"), "GET", "/accounts/acme/usage", {}, None, 200, USAGE, USAGE_OBJECT, id="usage"
    ),
    pytest.param(
        Invoke("create", "acme", "web", kind="projects", units=2, fields={"team": "blue"}),
        "POST",
        "/accounts/acme/kinds/projects/resources",
        {},
        {"name": "web", "units": 2, "team": "blue"},
        201,
        RESOURCE,
        replace(RESOURCE_OBJECT, created=True),
        id="create-kind",
    ),
    pytest.param(
        Invoke("create", "acme", "web"),
        "POST",
        "/accounts/acme/resources",
        {},
        {"name": "web", "units": 1},
        201,
        RESOURCE,
        replace(RESOURCE_OBJECT, created=True),
        id="create-default-kind",
    ),
    pytest.param(
        Invoke("create", "acme", "web", kind="projects", units=2, fields={"team": "blue"}, hold_seconds=600),
        "POST",
        "/accounts/acme/kinds/projects/resources",
        {"hold_seconds": "600"},
        {"name": "web", "units": 2, "team": "blue"},
        201,
        HELD,
        replace(HELD_OBJECT, created=True),
        id="create-hold",
    ),
    pytest.param(
        Invoke("put", "acme", "r-1", "web", kind="projects", units=2, fields={"team": "blue"}),
        "PUT",
        "/accounts/acme/kinds/projects/resources/r-1",
        {},
        {"name": "web", "units": 2, "team": "blue"},
        201,
        RESOURCE,
        replace(RESOURCE_OBJECT, created=True),
        id="put-kind",
    ),
    pytest.param(
        Invoke("put", "acme", "r-1", "web"),
        "PUT",
        "/accounts/acme/resources/r-1",
        {},
        {"name": "web", "units": 1},
        200,
        RESOURCE,
        replace(RESOURCE_OBJECT, created=False),
        id="put-default-kind",
    ),
    pytest.param(
        Invoke("put", "acme", "r-1", "web", hold_seconds=86400),
        "PUT",
        "/accounts/acme/resources/r-1",
        {"hold_seconds": "86400"},
        {"name": "web", "units": 1},
        201,
        HELD,
        replace(HELD_OBJECT, created=True),
        id="put-hold",
    ),
    pytest.param(
        Invoke("confirm", "acme", "r-1", kind="projects"),
        "POST",
        "/accounts/acme/kinds/projects/resources/r-1/confirm",
        {},
        None,
        200,
        CONFIRMED,
        RESOURCE_OBJECT,
        id="confirm-kind",
    ),
    pytest.param(
        Invoke("confirm", "acme", "r-1"),
        "POST",
        "/accounts/acme/resources/r-1/confirm",
        {},
        None,
        200,
        CONFIRMED,
        RESOURCE_OBJECT,
        id="confirm",
    ),
    pytest.param(
        Invoke("get", "acme", "r-1", kind="projects"),
        "GET",
        "/accounts/acme/kinds/projects/resources/r-1",
        {},
        None,
        200,
        RESOURCE,
        RESOURCE_OBJECT,
        id="get-kind",
    ),
    pytest.param(
        Invoke("get", "acme", "r-1"),
        "GET",
        "/accounts/acme/resources/r-1",
        {},
        None,
        200,
        RESOURCE,
        RESOURCE_OBJECT,
        id="get",
    ),
    pytest.param(
        Invoke("delete", "acme", "r-1", kind="projects"),
        "DELETE",
        "/accounts/acme/kinds/projects/resources/r-1",
        {},
        None,
        204,
        None,
        None,
        id="delete-kind",
    ),
    pytest.param(
        Invoke("delete", "acme", "r-1"),
        "DELETE",
        "/accounts/acme/resources/r-1",
        {},
        None,
        204,
        None,
        None,
        id="delete",
    ),
    pytest.param(
        Invoke("resize", "acme", "r-1", 5, kind="volume_gb"),
        "PATCH",
        "/accounts/acme/kinds/volume_gb/resources/r-1",
        {},
        {"units": 5},
        200,
        RESOURCE,
        RESOURCE_OBJECT,
        id="resize",
    ),
    pytest.param(
        Invoke("would_create", "acme", "web", kind="projects"),
        "POST",
        "/accounts/acme/kinds/projects/resources",
        {"dry_run": "true"},
        {"name": "web", "units": 1},
        200,
        WOULD_ADMIT,
        WOULD_ADMIT_OBJECT,
        id="would_create",
    ),
    pytest.param(
        Invoke("would_put", "acme", "r-1", "web", units=3),
        "PUT",
        "/accounts/acme/resources/r-1",
        {"dry_run": "true"},
        {"name": "web", "units": 3},
        200,
        WOULD_ADMIT,
        WOULD_ADMIT_OBJECT,
        id="would_put",
    ),
    pytest.param(
        Invoke("would_create", "acme", "web", hold_seconds=30),
        "POST",
        "/accounts/acme/resources",
        {"dry_run": "true", "hold_seconds": "30"},
        {"name": "web", "units": 1},
        200,
        WOULD_ADMIT,
        WOULD_ADMIT_OBJECT,
        id="would_create-hold",
    ),
    pytest.param(
        Invoke("would_put", "acme", "r-1", "web", kind="projects", hold_seconds=30),
        "PUT",
        "/accounts/acme/kinds/projects/resources/r-1",
        {"dry_run": "true", "hold_seconds": "30"},
        {"name": "web", "units": 1},
        200,
        WOULD_ADMIT,
        WOULD_ADMIT_OBJECT,
        id="would_put-hold",
    ),
    pytest.param(
        Invoke("would_resize", "acme", "r-1", 7, kind="volume_gb"),
        "PATCH",
        "/accounts/acme/kinds/volume_gb/resources/r-1",
        {"dry_run": "true"},
        {"units": 7},
        200,
        WOULD_ADMIT,
        WOULD_ADMIT_OBJECT,
        id="would_resize",
    ),
    pytest.param(
        Invoke("limits", "acme"),
        "GET",
        "/accounts/acme/limits",
        {},
        None,
        200,
        USAGE,
        USAGE_OBJECT,
        id="limits",
    ),
    pytest.param(
        Invoke("set_override", "acme", "seats", 4),
        "PUT",
        "/accounts/acme/limits/seats",
        {},
        {"limit": 4},
        200,
        {"account_id": "acme", "kind": "seats", "limit": 4},
        Override("acme", 4, "seats"),
        id="set_override",
    ),
    pytest.param(
        Invoke("set_override", "acme", "seats", 1, force=True),
        "PUT",
        "/accounts/acme/limits/seats",
        {},
        {"limit": 1, "force": True},
        200,
        {"account_id": "acme", "kind": "seats", "limit": 1},
        Override("acme", 1, "seats"),
        id="set_override-forced",
    ),
    pytest.param(
        Invoke("remove_override", "acme", "seats"),
        "DELETE",
        "/accounts/acme/limits/seats",
        {},
        None,
        204,
        None,
        None,
        id="remove_override",
    ),
    pytest.param(
        Invoke("remove_override", "acme", "seats", force=True),
        "DELETE",
        "/accounts/acme/limits/seats",
        {"force": "true"},
        None,
        204,
        None,
        None,
        id="remove_override-forced",
    ),
    pytest.param(
        Invoke("set_limit", "acme", 3),
        "PUT",
        "/accounts/acme/limit",
        {},
        {"limit": 3},
        200,
        {"account_id": "acme", "limit": 3},
        Override("acme", 3),
        id="set_limit",
    ),
    pytest.param(
        Invoke("set_limit", "acme", 0, force=True),
        "PUT",
        "/accounts/acme/limit",
        {},
        {"limit": 0, "force": True},
        200,
        {"account_id": "acme", "limit": 0},
        Override("acme", 0),
        id="set_limit-forced",
    ),
    pytest.param(
        Invoke("put_plan", "gold", {"projects": 2, "seats": 10}),
        "PUT",
        "/plans/gold",
        {},
        {"limits": {"projects": 2, "seats": 10}},
        200,
        PLAN,
        Plan("gold", {"projects": 2, "seats": 10}),
        id="put_plan",
    ),
    pytest.param(
        Invoke("get_plan", "gold"),
        "GET",
        "/plans/gold",
        {},
        None,
        200,
        PLAN,
        Plan("gold", {"projects": 2, "seats": 10}),
        id="get_plan",
    ),
    pytest.param(
        Invoke("assign_plan", "acme", "gold", force=True),
        "PUT",
        "/accounts/acme/plan",
        {},
        {"plan_id": "gold", "force": True},
        200,
        {"account_id": "acme", "plan_id": "gold"},
        AccountPlan("acme", "gold"),
        id="assign_plan",
    ),
    pytest.param(
        Invoke("list_resources", "acme", kind="projects", page_size=10),
        "GET",
        "/accounts/acme/kinds/projects/resources",
        {"limit": "10"},
        None,
        200,
        PAGE,
        [RESOURCE_OBJECT],
        id="list_resources",
    ),
    pytest.param(
        Invoke("list_resources", "acme", next_token="abc"),
        "GET",
        "/accounts/acme/resources",
        {"limit": "50", "next_token": "abc"},
        None,
        200,
        PAGE,
        [RESOURCE_OBJECT],
        id="list_resources-default-kind",
    ),
    pytest.param(
        Invoke("list_plans"),
        "GET",
        "/plans",
        {"limit": "50"},
        None,
        200,
        {"items": [PLAN], "next_token": None},
        [Plan("gold", {"projects": 2, "seats": 10})],
        id="list_plans",
    ),
    pytest.param(
        Invoke("account_history", "acme", kind="projects", page_size=5),
        "GET",
        "/accounts/acme/limits/history",
        {"limit": "5", "kind": "projects"},
        None,
        200,
        {"items": [CHANGE], "next_token": None},
        [CHANGE_OBJECT],
        id="account_history",
    ),
    pytest.param(
        Invoke("plan_history", "gold"),
        "GET",
        "/plans/gold/history",
        {"limit": "50"},
        None,
        200,
        {"items": [CHANGE], "next_token": None},
        [CHANGE_OBJECT],
        id="plan_history",
    ),
    pytest.param(
        Invoke("put_org", "acme-group", "gold"),
        "PUT",
        "/orgs/acme-group",
        {},
        {"plan_id": "gold"},
        201,
        ORG,
        replace(ORG_OBJECT, created=True),
        id="put_org-created",
    ),
    pytest.param(
        Invoke("put_org", "acme-group", "gold", force=True),
        "PUT",
        "/orgs/acme-group",
        {},
        {"plan_id": "gold", "force": True},
        200,
        ORG,
        replace(ORG_OBJECT, created=False),
        id="put_org-moved",
    ),
    pytest.param(
        Invoke("get_org", "acme-group"),
        "GET",
        "/orgs/acme-group",
        {},
        None,
        200,
        ORG,
        ORG_OBJECT,
        id="get_org",
    ),
    pytest.param(
        Invoke("delete_org", "acme-group"),
        "DELETE",
        "/orgs/acme-group",
        {},
        None,
        204,
        None,
        None,
        id="delete_org",
    ),
    pytest.param(
        Invoke("set_org_limit", "acme-group", "projects", 10),
        "PUT",
        "/orgs/acme-group/limits/projects",
        {},
        {"limit": 10},
        200,
        {"org_id": "acme-group", "kind": "projects", "limit": 10},
        OrgOverride("acme-group", "projects", 10),
        id="set_org_limit",
    ),
    pytest.param(
        Invoke("remove_org_limit", "acme-group", "projects", force=True),
        "DELETE",
        "/orgs/acme-group/limits/projects",
        {"force": "true"},
        None,
        204,
        None,
        None,
        id="remove_org_limit",
    ),
    pytest.param(
        Invoke("add_member", "acme-group", "acme"),
        "PUT",
        "/orgs/acme-group/accounts/acme",
        {},
        None,
        201,
        {"org_id": "acme-group", "account_id": "acme"},
        Membership("acme-group", "acme", joined=True),
        id="add_member-joined",
    ),
    pytest.param(
        Invoke("add_member", "acme-group", "acme"),
        "PUT",
        "/orgs/acme-group/accounts/acme",
        {},
        None,
        200,
        {"org_id": "acme-group", "account_id": "acme"},
        Membership("acme-group", "acme", joined=False),
        id="add_member-already",
    ),
    pytest.param(
        Invoke("remove_member", "acme-group", "acme"),
        "DELETE",
        "/orgs/acme-group/accounts/acme",
        {},
        None,
        204,
        None,
        None,
        id="remove_member",
    ),
    pytest.param(
        Invoke("org_usage", "acme-group", top=2),
        "GET",
        "/orgs/acme-group/usage",
        {"top": "2"},
        None,
        200,
        ORG_USAGE,
        ORG_USAGE_OBJECT,
        id="org_usage",
    ),
    pytest.param(
        Invoke("org_history", "acme-group", kind="projects"),
        "GET",
        "/orgs/acme-group/limits/history",
        {"limit": "50", "kind": "projects"},
        None,
        200,
        {"items": [ORG_CHANGE], "next_token": None},
        [ORG_CHANGE_OBJECT],
        id="org_history",
    ),
    pytest.param(
        Invoke("usage_over", threshold=80, kind="projects", page_size=10),
        "GET",
        "/usage/over",
        {"limit": "10", "kind": "projects", "threshold": "80"},
        None,
        200,
        {"items": [OVER_ROW], "next_token": None},
        [OVER_ROW_OBJECT],
        id="usage_over",
    ),
    pytest.param(
        Invoke("events", since="2026-11-25T00:00:00Z", page_size=10),
        "GET",
        "/events",
        {"limit": "10", "since": "2026-11-25T00:00:00Z"},
        None,
        200,
        {"items": [LOGGED], "next_token": None},
        [LOGGED_OBJECT],
        id="events",
    ),
]


@pytest.mark.parametrize(("call", "method", "path", "query", "body", "status", "answer", "result"), CALLS)
def test_each_call_sends_its_route_and_reads_its_answer(
    call, method, path, query, body, status, answer, result
):
    script = Script(ok(answer, status))
    got = call(client(script))
    (request,) = script.requests
    assert (request.method, request.url.path, dict(request.url.params)) == (method, path, query)
    assert (script.body() if request.content else None) == body
    assert got == result


def route_of(method: str, path: str) -> tuple[str, str] | None:
    """The API's route (api/access.py's table of every route) that a concrete request hits."""
    for route_method, template in ROUTE_ACCESS:
        parts, sent = template.split("/"), path.split("/")
        if (
            route_method == method
            and len(parts) == len(sent)
            and all(
                t == s or (t.startswith("{") and t.endswith("}")) for t, s in zip(parts, sent, strict=True)
            )
        ):
            return route_method, template
    return None


def test_every_route_of_the_api_has_a_call():
    hit = {route_of(param.values[1], param.values[2]) for param in CALLS}
    assert None not in hit
    # (the console's page and files are a browser's, not the client's)
    assert hit == set(ROUTE_ACCESS) - {("GET", "/openapi.json")} - CONSOLE_ROUTES


def test_the_callers_fields_come_back_in_fields_and_cannot_shadow_the_services():
    script = Script(ok(RESOURCE, 201))
    assert client(script).create("acme", "web", fields={"team": "blue"}).fields == {"team": "blue"}
    for reserved in ("name", "units", "kind", "resource_id"):
        with pytest.raises(ValueError, match=reserved):
            client(Script()).create("acme", "web", fields={reserved: "x"})


def test_a_hold_reads_held_and_its_deadline_and_a_resource_from_before_holds_is_not_held():
    assert Resource.from_json(HELD) == HELD_OBJECT
    assert HELD_OBJECT.fields == {"team": "blue"}  # held and expires_at are the service's, not fields
    assert (Resource.from_json(CONFIRMED).held, Resource.from_json(CONFIRMED).expires_at) == (False, None)
    assert Resource.from_json(RESOURCE) == RESOURCE_OBJECT  # a stack from before holds sends no held


def test_a_retry_safe_hold_is_a_put_of_a_client_made_id_with_hold_seconds():
    script = Script(ok(HELD, 201))
    got = client(script).create("acme", "web", kind="projects", hold_seconds=60, retry_safe=True)
    (request,) = script.requests
    assert request.method == "PUT"
    assert request.url.path.startswith("/accounts/acme/kinds/projects/resources/")
    assert dict(request.url.params) == {"hold_seconds": "60"}
    assert got == replace(HELD_OBJECT, created=True)


def test_held_and_expires_at_are_refused_as_the_callers_fields():
    for reserved in ("held", "expires_at"):
        with pytest.raises(ValueError, match=reserved):
            client(Script()).create("acme", "web", fields={reserved: "x"})


def test_ids_are_one_path_segment_each():
    script = Script(ok(RESOURCE))
    client(script).get("acme", "a/b?c")
    assert script.requests[0].url.raw_path == b"/accounts/acme/resources/a%2Fb%3Fc"
    for bad in ("", ".", ".."):
        with pytest.raises(ValueError, match="is not an id"):
            client(Script()).get("acme", bad)


def test_the_version_is_the_packages():
    pyproject = tomllib.loads((Path(__file__).parents[2] / "clients/python/pyproject.toml").read_text())
    assert __version__ == pyproject["project"]["version"]
    assert DEFAULT_HEADERS["User-Agent"] == f"hybrid-counter-client/{__version__}"


def test_history_records_and_usage_read_every_field():
    assert ChangeRecord.from_json(CHANGE) == CHANGE_OBJECT
    assert KindUsage.from_json(KIND_USAGE) == KindUsage(2, "plan", 1, 0, 1, 1)
    # A newer API's extra fields are ignored, not fatal.
    assert Usage.from_json({**USAGE, "something_new": 1}) == USAGE_OBJECT
    # An account outside any organization has neither its id nor a room per kind
    assert (USAGE_OBJECT.org_id, USAGE_OBJECT.kinds["projects"].organization) == (None, None)


def test_a_kinds_held_units_are_read_and_are_0_from_a_stack_from_before_holds():
    assert KindUsage.from_json({**KIND_USAGE, "held": 1}) == KindUsage(2, "plan", 1, 0, 1, 1, held=1)
    assert (
        Usage.from_json({**USAGE, "kinds": {"projects": {**KIND_USAGE, "held": 1}}}).kinds["projects"].held
        == 1
    )
    assert KindUsage.from_json(KIND_USAGE).held == 0
    with pytest.raises(TypeError):
        KindUsage.from_json({**KIND_USAGE, "held": "1"})


def test_a_members_usage_reads_its_organization_and_its_room_per_kind():
    usage = Usage.from_json(MEMBER_USAGE)
    assert usage.org_id == "acme-group"
    assert usage.kinds["projects"].organization == OrgRoom("acme-group", 10, "override", 7, 3)
    assert usage.kinds["projects"].used == 1  # the account's own figures are unchanged


@pytest.mark.parametrize(
    ("read", "body"),
    [
        (Org.from_json, {**ORG, "members": "2"}),
        (
            OrgUsage.from_json,
            {**ORG_USAGE, "kinds": {"p": {**ORG_KIND_USAGE, "top_accounts": {}}}},
        ),
        (OrgUsage.from_json, {**ORG_USAGE, "kinds": {"p": {**ORG_KIND_USAGE, "used": None}}}),
        (Usage.from_json, {**MEMBER_USAGE, "kinds": {"p": {**KIND_USAGE, "organization": {"org_id": "x"}}}}),
    ],
    ids=["org-members-a-string", "top-accounts-not-a-list", "org-used-missing", "room-without-numbers"],
)
def test_an_organization_body_that_is_not_the_apis_is_refused(read, body):
    # Given each reader's own valid body, Then it reads
    valid = {Org.from_json: ORG, OrgUsage.from_json: ORG_USAGE, Usage.from_json: MEMBER_USAGE}[read]
    read(valid)
    # And with one field of the wrong type, Then it refuses it (the client: UnexpectedResponse)
    with pytest.raises(TypeError):
        read(body)


# ---- paging -------------------------------------------------------------------------------------
def three_pages() -> Script:
    def page(request: httpx.Request) -> httpx.Response:
        token = request.url.params.get("next_token")
        number = {None: 1, "t2": 2, "t3": 3}[token]
        items = [{**RESOURCE, "resource_id": f"r-{number}-{n}"} for n in range(2 if number < 3 else 1)]
        return ok({"items": items, "next_token": {1: "t2", 2: "t3", 3: None}[number]})

    return Script(then=page)


def test_a_listing_reads_page_after_page_lazily():
    script = three_pages()
    listing = client(script).list_resources("acme", page_size=2)
    assert script.requests == []  # nothing sent before iterating
    ids = [resource.resource_id for resource in listing]
    assert ids == ["r-1-0", "r-1-1", "r-2-0", "r-2-1", "r-3-0"]
    assert [r.url.params.get("next_token") for r in script.requests] == [None, "t2", "t3"]
    assert {r.url.params["limit"] for r in script.requests} == {"2"}


def test_pages_carry_their_next_token_and_a_listing_resumes_from_one():
    script = three_pages()
    api = client(script)
    pages = list(api.list_resources("acme", page_size=2).pages())
    assert [page.next_token for page in pages] == ["t2", "t3", None]
    assert all(isinstance(page, Page) for page in pages)
    resumed = [r.resource_id for r in api.list_resources("acme", page_size=2, next_token="t3")]
    assert resumed == ["r-3-0"]


def test_an_empty_page_with_a_token_is_not_the_end():
    script = Script(ok({"items": [], "next_token": "more"}), ok({"items": [CHANGE], "next_token": None}))
    assert list(client(script).account_history("acme", kind="projects")) == [CHANGE_OBJECT]
    assert len(script.requests) == 2


def test_async_listings_page_the_same_way():
    script = three_pages()

    async def scenario() -> tuple[list[str], list[str | None]]:
        async with async_client(script) as api:
            ids = [r.resource_id async for r in api.list_resources("acme", page_size=2)]
            tokens = [page.next_token async for page in api.list_resources("acme", page_size=2).pages()]
            return ids, tokens

    assert run(scenario()) == (["r-1-0", "r-1-1", "r-2-0", "r-2-1", "r-3-0"], ["t2", "t3", None])


# ---- SigV4 --------------------------------------------------------------------------------------
def test_sigv4_signs_each_request_as_api_gateway_verifies_it():
    verifier = SigV4Verifier("us-east-1")
    verified: list[str] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        context = verifier.verify(
            request.method,
            request.url.raw_path.decode(),
            list(request.headers.multi_items()),
            request.content,
        )
        verified.append(context["iam"]["accessKey"])
        return ok(RESOURCE, 201) if request.method != "GET" else ok(PAGE)

    credentials = Credentials(LOCAL_CALLER.access_key_id, LOCAL_CALLER.secret_access_key)
    api = client(Script(then=gateway), auth=SigV4(credentials, "us-east-1"))
    api.create("tenant-a", "web", kind="projects", fields={"note": "ünïcode"})
    list(api.list_resources("tenant-a", page_size=5, next_token="a b+c"))
    assert verified == [LOCAL_CALLER.access_key_id] * 2


def test_sigv4_with_the_wrong_secret_or_region_is_refused_by_the_verifier():
    verifier = SigV4Verifier("us-east-1")
    refusals: list[str] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        try:
            verifier.verify(
                request.method,
                request.url.raw_path.decode(),
                list(request.headers.multi_items()),
                request.content,
            )
        except Exception as refused:
            refusals.append(str(refused))
            return httpx.Response(403, json={"message": str(refused)})
        return ok(USAGE)

    wrong_secret = SigV4(Credentials(LOCAL_CALLER.access_key_id, "not-the-secret"), "us-east-1")
    wrong_region = SigV4(Credentials(LOCAL_CALLER.access_key_id, LOCAL_CALLER.secret_access_key), "eu-west-1")
    for auth in (wrong_secret, wrong_region):
        with pytest.raises(Exception, match=r"signature|region"):
            client(Script(then=gateway), auth=auth).usage("acme")
    assert len(refusals) == 2


# ---- the two clients ----------------------------------------------------------------------------
def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_") and name not in {"close", "aclose"}
    }


def test_the_async_client_has_the_sync_clients_methods_with_the_same_parameters():
    sync, asynchronous = public_methods(Client), public_methods(AsyncClient)
    assert sync.keys() == asynchronous.keys()
    listings = {
        "list_resources",
        "list_plans",
        "account_history",
        "plan_history",
        "org_history",
        "usage_over",
        "events",
    }
    for name, signature in sync.items():
        assert list(signature.parameters) == list(asynchronous[name].parameters), name
        assert [p.default for p in signature.parameters.values()] == [
            p.default for p in asynchronous[name].parameters.values()
        ], name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)) is (name not in listings), name
    assert len(sync) == 32


@pytest.mark.parametrize(("call", "method", "path", "query", "body", "status", "answer", "result"), CALLS)
def test_the_async_client_sends_the_same_requests(call, method, path, query, body, status, answer, result):
    script = Script(ok(answer, status))

    async def scenario() -> Any:
        async with async_client(script) as api:
            return await call.on(api)

    assert run(scenario()) == result
    (request,) = script.requests
    assert (request.method, request.url.path, dict(request.url.params)) == (method, path, query)
    assert (script.body() if request.content else None) == body
