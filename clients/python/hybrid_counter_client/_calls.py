"""Every API call as data: what it sends, how its answer is read, whether it may be sent twice.

`Client` and `AsyncClient` build the same `Call`s and differ only in how they send them
(`_http.py`), so the two cannot drift apart on a path, a body or a retry rule.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from hybrid_counter_client.models import (
    AccountPlan,
    ChangeRecord,
    LoggedEvent,
    Membership,
    Org,
    OrgOverride,
    OrgUsage,
    Override,
    OverRow,
    Page,
    Plan,
    Resource,
    Usage,
    WouldAdmit,
    page_from_json,
)

# The service's own fields of a resource (models.RESOURCE_FIELDS, and name and units, which are
# arguments): a caller's field of one of these names would be shadowed by the service's.
RESERVED = frozenset(
    {"name", "units", "account_id", "resource_id", "created_at", "kind", "held", "expires_at"}
)


@dataclass(frozen=True, slots=True)
class Call[T]:
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, str | int] = field(default_factory=dict)
    body: object | None = None
    writes_nothing: bool = False
    idempotent: bool = False  # a POST whose second arrival does what the first did (a confirm)
    not_found_hint: str | None = None  # added to a 404's NotFound (errors.NotFound.hint)

    @property
    def retryable(self) -> bool:
        """Whether sending it again can do no harm. GET, PUT (by id: the API recognises its own
        earlier create), DELETE (by id) and PATCH (to a target size, not by a delta) are; a POST
        creates another resource each time it arrives, so it never is, unless it writes nothing
        (a dry run) or is idempotent (a confirm: confirming a confirmed hold answers the same)."""
        return self.method != "POST" or self.writes_nothing or self.idempotent


# ---- paths --------------------------------------------------------------------------------------
def segment(value: str) -> str:
    """One path segment, percent-encoded, so an id can never reach another route."""
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} is not an id")
    return quote(value, safe="")


def resources_path(account_id: str, kind: str | None) -> str:
    """A kind's resources, or (kind None) the stack's default kind's through the routes from before kinds."""
    account = f"/accounts/{segment(account_id)}"
    return f"{account}/resources" if kind is None else f"{account}/kinds/{segment(kind)}/resources"


def looked_in(kind: str | None) -> str:
    """A by-id call's hint for its 404: the API says only that the resource is not there, and a
    resource of another kind than the one asked for is not there either."""
    if kind is None:
        return "looked for it among the stack's default kind, as no kind= was given; pass kind= for a resource of another kind"
    return f"looked for it among kind {kind!r}; pass the resource's own kind as kind="


def resource_body(name: str, units: int, fields: Mapping[str, Any] | None) -> dict[str, Any]:
    extra = dict(fields or {})
    clash = RESERVED.intersection(extra)
    if clash:
        raise ValueError(f"fields may not hold {', '.join(sorted(clash))}: pass name and units as arguments")
    return {**extra, "name": name, "units": units}


def _dry(dry_run: bool) -> dict[str, str | int]:
    return {"dry_run": "true"} if dry_run else {}


def _hold(hold_seconds: int | None) -> dict[str, str | int]:
    # Sent only when set: a stack from before holds refuses parameters it does not know.
    return {"hold_seconds": hold_seconds} if hold_seconds is not None else {}


def _paging(page_size: int, next_token: str | None) -> dict[str, str | int]:
    return {"limit": page_size} | ({"next_token": next_token} if next_token else {})


def _forced(body: dict[str, Any], force: bool) -> dict[str, Any]:
    # Sent only when set: a stack from before `force` refuses fields it does not know.
    return {**body, "force": True} if force else body


# ---- readers ------------------------------------------------------------------------------------
def _nothing(response: httpx.Response) -> None:
    return None


def _usage(response: httpx.Response) -> Usage:
    return Usage.from_json(response.json())


def _would_admit(response: httpx.Response) -> WouldAdmit:
    return WouldAdmit.from_json(response.json())


def _resource(response: httpx.Response) -> Resource:
    return Resource.from_json(response.json())


def _created(response: httpx.Response) -> Resource:
    return Resource.from_json(response.json(), created=True)


def _put(response: httpx.Response) -> Resource:
    """201: this PUT created it; 200: the id existed with this body (a retry), nothing changed."""
    return Resource.from_json(response.json(), created=response.status_code == 201)


def _override(response: httpx.Response) -> Override:
    return Override.from_json(response.json())


def _plan(response: httpx.Response) -> Plan:
    return Plan.from_json(response.json())


def _account_plan(response: httpx.Response) -> AccountPlan:
    return AccountPlan.from_json(response.json())


def _resources(response: httpx.Response) -> Page[Resource]:
    return page_from_json(response.json(), Resource.from_json)


def _plans(response: httpx.Response) -> Page[Plan]:
    return page_from_json(response.json(), Plan.from_json)


def _changes(response: httpx.Response) -> Page[ChangeRecord]:
    return page_from_json(response.json(), ChangeRecord.from_json)


def _org(response: httpx.Response) -> Org:
    return Org.from_json(response.json())


def _put_org(response: httpx.Response) -> Org:
    """201: this PUT created the organization; 200: it existed (moved to the plan, or already on it)."""
    return Org.from_json(response.json(), created=response.status_code == 201)


def _org_override(response: httpx.Response) -> OrgOverride:
    return OrgOverride.from_json(response.json())


def _membership(response: httpx.Response) -> Membership:
    """201: the account joined with this request; 200: it already was a member."""
    return Membership.from_json(response.json(), joined=response.status_code == 201)


def _org_usage(response: httpx.Response) -> OrgUsage:
    return OrgUsage.from_json(response.json())


def _over_rows(response: httpx.Response) -> Page[OverRow]:
    return page_from_json(response.json(), OverRow.from_json)


def _events(response: httpx.Response) -> Page[LoggedEvent]:
    return page_from_json(response.json(), LoggedEvent.from_json)


# ---- the tenant's calls -------------------------------------------------------------------------
def usage(account_id: str) -> Call[Usage]:
    return Call("GET", f"/accounts/{segment(account_id)}/usage", _usage)


def create(
    account_id: str, kind: str | None, body: dict[str, Any], hold_seconds: int | None = None
) -> Call[Resource]:
    return Call("POST", resources_path(account_id, kind), _created, params=_hold(hold_seconds), body=body)


def create_by_put(
    account_id: str, kind: str | None, body: dict[str, Any], hold_seconds: int | None = None
) -> Call[Resource]:
    """A create that may be sent again: a PUT of an id made here, once, so every retry names the
    same resource. The id is new, so whichever attempt created it, this call did: a 200 (the
    answer to a retry whose first attempt's answer was lost) is reported as created too."""
    path = f"{resources_path(account_id, kind)}/{uuid.uuid4().hex}"
    return Call("PUT", path, _created, params=_hold(hold_seconds), body=body)


def would_create(
    account_id: str, kind: str | None, body: dict[str, Any], hold_seconds: int | None = None
) -> Call[WouldAdmit]:
    path = resources_path(account_id, kind)
    params = _dry(True) | _hold(hold_seconds)
    return Call("POST", path, _would_admit, params=params, body=body, writes_nothing=True)


def put(
    account_id: str, kind: str | None, resource_id: str, body: dict[str, Any], hold_seconds: int | None = None
) -> Call[Resource]:
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}"
    return Call("PUT", path, _put, params=_hold(hold_seconds), body=body)


def would_put(
    account_id: str, kind: str | None, resource_id: str, body: dict[str, Any], hold_seconds: int | None = None
) -> Call[WouldAdmit]:
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}"
    params = _dry(True) | _hold(hold_seconds)
    return Call("PUT", path, _would_admit, params=params, body=body, writes_nothing=True)


def confirm(account_id: str, kind: str | None, resource_id: str) -> Call[Resource]:
    """A hold made permanent. Idempotent (a confirmed resource's confirm answers it again), so
    retried like a PUT although it is a POST."""
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}/confirm"
    return Call("POST", path, _resource, idempotent=True, not_found_hint=looked_in(kind))


def get(account_id: str, kind: str | None, resource_id: str) -> Call[Resource]:
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}"
    return Call("GET", path, _resource, not_found_hint=looked_in(kind))


def resources_page(
    account_id: str, kind: str | None, page_size: int, next_token: str | None
) -> Call[Page[Resource]]:
    return Call("GET", resources_path(account_id, kind), _resources, params=_paging(page_size, next_token))


def delete(account_id: str, kind: str | None, resource_id: str) -> Call[None]:
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}"
    return Call("DELETE", path, _nothing, not_found_hint=looked_in(kind))


def resize(account_id: str, kind: str, resource_id: str, units: int) -> Call[Resource]:
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}"
    return Call("PATCH", path, _resource, body={"units": units}, not_found_hint=looked_in(kind))


def would_resize(account_id: str, kind: str, resource_id: str, units: int) -> Call[WouldAdmit]:
    path = f"{resources_path(account_id, kind)}/{segment(resource_id)}"
    return Call(
        "PATCH",
        path,
        _would_admit,
        params=_dry(True),
        body={"units": units},
        writes_nothing=True,
        not_found_hint=looked_in(kind),
    )


# ---- the operators' calls -----------------------------------------------------------------------
def limits(account_id: str) -> Call[Usage]:
    return Call("GET", f"/accounts/{segment(account_id)}/limits", _usage)


def set_limit(account_id: str, limit: int, force: bool) -> Call[Override]:
    body = _forced({"limit": limit}, force)
    return Call("PUT", f"/accounts/{segment(account_id)}/limit", _override, body=body)


def set_override(account_id: str, kind: str, limit: int, force: bool) -> Call[Override]:
    body = _forced({"limit": limit}, force)
    return Call("PUT", f"/accounts/{segment(account_id)}/limits/{segment(kind)}", _override, body=body)


def remove_override(account_id: str, kind: str, force: bool) -> Call[None]:
    params: dict[str, str | int] = {"force": "true"} if force else {}
    return Call("DELETE", f"/accounts/{segment(account_id)}/limits/{segment(kind)}", _nothing, params=params)


def assign_plan(account_id: str, plan_id: str, force: bool) -> Call[AccountPlan]:
    body = _forced({"plan_id": plan_id}, force)
    return Call("PUT", f"/accounts/{segment(account_id)}/plan", _account_plan, body=body)


def put_plan(plan_id: str, plan_limits: Mapping[str, int]) -> Call[Plan]:
    return Call("PUT", f"/plans/{segment(plan_id)}", _plan, body={"limits": dict(plan_limits)})


def get_plan(plan_id: str) -> Call[Plan]:
    return Call("GET", f"/plans/{segment(plan_id)}", _plan)


def plans_page(page_size: int, next_token: str | None) -> Call[Page[Plan]]:
    return Call("GET", "/plans", _plans, params=_paging(page_size, next_token))


def account_history_page(
    account_id: str, kind: str | None, page_size: int, next_token: str | None
) -> Call[Page[ChangeRecord]]:
    params = _paging(page_size, next_token) | ({"kind": kind} if kind else {})
    return Call("GET", f"/accounts/{segment(account_id)}/limits/history", _changes, params=params)


def plan_history_page(plan_id: str, page_size: int, next_token: str | None) -> Call[Page[ChangeRecord]]:
    return Call("GET", f"/plans/{segment(plan_id)}/history", _changes, params=_paging(page_size, next_token))


def usage_over_page(
    threshold: int | None, kind: str | None, page_size: int, next_token: str | None
) -> Call[Page[OverRow]]:
    params = _paging(page_size, next_token) | ({"kind": kind} if kind else {})
    return Call(
        "GET", "/usage/over", _over_rows, params=params | ({"threshold": threshold} if threshold else {})
    )


def events_page(since: str | None, page_size: int, next_token: str | None) -> Call[Page[LoggedEvent]]:
    params = _paging(page_size, next_token) | ({"since": since} if since else {})
    return Call("GET", "/events", _events, params=params)


# ---- organizations (writes: operators; the reads: operators and the organization's administrator)
def org_path(org_id: str) -> str:
    return f"/orgs/{segment(org_id)}"


def put_org(org_id: str, plan_id: str, force: bool) -> Call[Org]:
    return Call("PUT", org_path(org_id), _put_org, body=_forced({"plan_id": plan_id}, force))


def get_org(org_id: str) -> Call[Org]:
    return Call("GET", org_path(org_id), _org)


def delete_org(org_id: str) -> Call[None]:
    return Call("DELETE", org_path(org_id), _nothing)


def set_org_limit(org_id: str, kind: str, limit: int, force: bool) -> Call[OrgOverride]:
    body = _forced({"limit": limit}, force)
    return Call("PUT", f"{org_path(org_id)}/limits/{segment(kind)}", _org_override, body=body)


def remove_org_limit(org_id: str, kind: str, force: bool) -> Call[None]:
    params: dict[str, str | int] = {"force": "true"} if force else {}
    return Call("DELETE", f"{org_path(org_id)}/limits/{segment(kind)}", _nothing, params=params)


def add_member(org_id: str, account_id: str) -> Call[Membership]:
    return Call("PUT", f"{org_path(org_id)}/accounts/{segment(account_id)}", _membership)


def remove_member(org_id: str, account_id: str) -> Call[None]:
    return Call("DELETE", f"{org_path(org_id)}/accounts/{segment(account_id)}", _nothing)


def org_usage(org_id: str, top: int) -> Call[OrgUsage]:
    return Call("GET", f"{org_path(org_id)}/usage", _org_usage, params={"top": top})


def org_history_page(
    org_id: str, kind: str | None, page_size: int, next_token: str | None
) -> Call[Page[ChangeRecord]]:
    params = _paging(page_size, next_token) | ({"kind": kind} if kind else {})
    return Call("GET", f"{org_path(org_id)}/limits/history", _changes, params=params)
