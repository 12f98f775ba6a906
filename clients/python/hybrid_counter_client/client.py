"""The synchronous client."""

from __future__ import annotations

import random as _random
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any

import httpx

from hybrid_counter_client import _calls
from hybrid_counter_client._calls import Call
from hybrid_counter_client._http import RetryPolicy, Sender, Settings
from hybrid_counter_client.auth import BearerTokens, SigV4, TokenProvider
from hybrid_counter_client.errors import NotFound
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
)

__version__ = "0.1.0"
DEFAULT_HEADERS = {"User-Agent": f"hybrid-counter-client/{__version__}", "Accept": "application/json"}


class Paginator[T]:
    """A listing, read lazily page by page: iterate it for the items, or `pages()` for the pages
    (each with the `next_token` that resumes after it). Nothing is sent before iteration, and
    each iteration starts again from `next_token` given to the call (None: the beginning)."""

    def __init__(self, fetch: Callable[[str | None], Page[T]], next_token: str | None = None) -> None:
        self._fetch = fetch
        self._start = next_token

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from page.items

    def pages(self) -> Iterator[Page[T]]:
        token = self._start
        while True:
            page = self._fetch(token)
            yield page
            if page.next_token is None:
                return
            token = page.next_token


class Client:
    """The hybrid-counter API, synchronously. Thread-safe as httpx.Client is; close it (or use
    it as a context manager) to release its connections.

    `base_url`: the API's URL (the stack's `ApiUrl` output, or `http://127.0.0.1:3000` for
    `make dev`). `auth`: a token provider (JWT mode: a callable returning an access token; the
    client keeps the token and asks again after a 401) or `SigV4(credentials, region)` (IAM
    mode). `retry`: see `RetryPolicy`; `timeout`: seconds per attempt. `transport`: an httpx
    transport (e.g. `httpx.MockTransport` in tests). `sleep`, `clock`, `random`: injected by
    tests to observe the waits.

    Kind arguments: None acts on the stack's default kind through the routes from before kinds
    (`/accounts/{id}/resources`); a name acts on that kind (`/accounts/{id}/kinds/{kind}/...`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        auth: TokenProvider | SigV4 | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        settings = Settings(
            base_url=base_url.rstrip("/"),
            headers={**DEFAULT_HEADERS, **(headers or {})},
            timeout=timeout,
            policy=retry or RetryPolicy(),
            clock=clock,
            draw=random,
        )
        self._http = httpx.Client(transport=transport, timeout=timeout)
        credentials = auth if auth is None or isinstance(auth, SigV4) else BearerTokens(auth)
        self._sender = Sender(self._http, settings, credentials, sleep)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _send[T](self, call: Call[T]) -> T:
        return self._sender.send(call)

    # ---- the tenant's calls (the account's own token, or IAM) ----------------------------------
    def usage(self, account_id: str) -> Usage:
        """The account's use and limits, of the default kind (top level) and every kind."""
        return self._send(_calls.usage(account_id))

    def create(
        self,
        account_id: str,
        name: str,
        *,
        kind: str | None = None,
        units: int = 1,
        fields: Mapping[str, Any] | None = None,
        retry_safe: bool = False,
        hold_seconds: int | None = None,
    ) -> Resource:
        """Create a resource of `units` units (LimitExceeded if they do not fit); `fields` are
        stored and returned with it.

        With `hold_seconds` it is a hold (`held` True, until `expires_at`): its units are held
        now and released after that many seconds (1 to the stack's maximum, 24 h by default;
        else ValidationError) unless `confirm` makes it permanent before.

        By default a POST, which is never retried: a lost answer cannot tell whether it was
        created, and sending it again could create a second one. A 503 or 429 raises; an
        `httpx.TransportError` raises too and then the resource may or may not exist (except
        `httpx.ConnectError`/`ConnectTimeout`: nothing was sent). With `retry_safe=True` it is a
        PUT of an id made here (a uuid4 hex), retried like any PUT: created exactly once.
        """
        body = _calls.resource_body(name, units, fields)
        if retry_safe:
            return self._send(_calls.create_by_put(account_id, kind, body, hold_seconds))
        return self._send(_calls.create(account_id, kind, body, hold_seconds))

    def put(
        self,
        account_id: str,
        resource_id: str,
        name: str,
        *,
        kind: str | None = None,
        units: int = 1,
        fields: Mapping[str, Any] | None = None,
        hold_seconds: int | None = None,
    ) -> Resource:
        """Create the resource `resource_id`, idempotently: sending the same body again answers
        the same resource (`created` False) and counts it once; another body for an existing id
        raises IdempotencyConflict. Retried on 429, 503 and connection errors. `hold_seconds`:
        a hold, as `create`'s."""
        body = _calls.resource_body(name, units, fields)
        return self._send(_calls.put(account_id, kind, resource_id, body, hold_seconds))

    def confirm(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        """Make a hold permanent (`held` False, no `expires_at`): its units stay counted until it
        is deleted. Idempotent (confirming a confirmed or plain resource answers it again), so,
        though a POST, retried like a PUT on 429, 503 and connection errors. HoldExpired once its
        deadline passed (its units were released: create it again); NotFound if there is no such
        resource."""
        return self._send(_calls.confirm(account_id, kind, resource_id))

    def get(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        return self._send(_calls.get(account_id, kind, resource_id))

    def list_resources(
        self, account_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> Paginator[Resource]:
        """The account's resources of a kind, `page_size` (1 to 100) per request."""
        return Paginator(
            lambda token: self._send(_calls.resources_page(account_id, kind, page_size, token)), next_token
        )

    def delete(
        self, account_id: str, resource_id: str, *, kind: str | None = None, missing_ok: bool = False
    ) -> None:
        """Delete it and free its units at once. NotFound if it does not exist, which is also
        the answer to a retry whose first attempt deleted it but lost its answer: with
        ``missing_ok=True`` ("make sure it is gone") a NotFound is success."""
        try:
            self._send(_calls.delete(account_id, kind, resource_id))
        except NotFound:
            if not missing_ok:
                raise

    def resize(self, account_id: str, resource_id: str, units: int, *, kind: str) -> Resource:
        """Set the resource's size to `units` (a target, not a delta, so a retry asks the same):
        growing needs room under the limit (LimitExceeded), shrinking frees units at once.
        Resizes exist on the routes with a kind only."""
        return self._send(_calls.resize(account_id, kind, resource_id, units))

    def would_create(
        self,
        account_id: str,
        name: str,
        *,
        kind: str | None = None,
        units: int = 1,
        fields: Mapping[str, Any] | None = None,
        hold_seconds: int | None = None,
    ) -> WouldAdmit:
        """Would this create (a hold, with `hold_seconds`) be admitted now? Writes nothing, so
        it is retried like a GET."""
        body = _calls.resource_body(name, units, fields)
        return self._send(_calls.would_create(account_id, kind, body, hold_seconds))

    def would_put(
        self,
        account_id: str,
        resource_id: str,
        name: str,
        *,
        kind: str | None = None,
        units: int = 1,
        fields: Mapping[str, Any] | None = None,
        hold_seconds: int | None = None,
    ) -> WouldAdmit:
        """Would this PUT be admitted now (an existing id with the same body: yes, adding 0)?"""
        body = _calls.resource_body(name, units, fields)
        return self._send(_calls.would_put(account_id, kind, resource_id, body, hold_seconds))

    def would_resize(self, account_id: str, resource_id: str, units: int, *, kind: str) -> WouldAdmit:
        """Would resizing it to `units` be admitted now? `units` of the answer is the difference."""
        return self._send(_calls.would_resize(account_id, kind, resource_id, units))

    # ---- the operators' calls (a token with the operator scope, or IAM) ------------------------
    def limits(self, account_id: str) -> Usage:
        """Any account's usage and limits, for operators."""
        return self._send(_calls.limits(account_id))

    def set_override(self, account_id: str, kind: str, limit: int, *, force: bool = False) -> Override:
        """The account's own limit for a kind, instead of its plan's. Below its current use:
        LimitBelowUsage unless `force` (lowering never removes resources; it refuses creates)."""
        return self._send(_calls.set_override(account_id, kind, limit, force))

    def remove_override(self, account_id: str, kind: str, *, force: bool = False) -> None:
        """Back to the plan's limit for the kind; the same rule as setting one."""
        self._send(_calls.remove_override(account_id, kind, force))

    def set_limit(self, account_id: str, limit: int, *, force: bool = False) -> Override:
        """The legacy route (`PUT /accounts/{id}/limit`): the default kind's override."""
        return self._send(_calls.set_limit(account_id, limit, force))

    def put_plan(self, plan_id: str, limits: Mapping[str, int]) -> Plan:
        """Create or replace a plan's limits (kind -> limit). Takes effect for its accounts
        within the stack's PlanCacheSeconds."""
        return self._send(_calls.put_plan(plan_id, limits))

    def get_plan(self, plan_id: str) -> Plan:
        return self._send(_calls.get_plan(plan_id))

    def list_plans(self, *, page_size: int = 50, next_token: str | None = None) -> Paginator[Plan]:
        return Paginator(lambda token: self._send(_calls.plans_page(page_size, token)), next_token)

    def assign_plan(self, account_id: str, plan_id: str, *, force: bool = False) -> AccountPlan:
        """Move the account to a plan (ValidationError if the plan does not exist); LimitBelowUsage
        if a kind would end below its use, unless `force`."""
        return self._send(_calls.assign_plan(account_id, plan_id, force))

    def account_history(
        self, account_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> Paginator[ChangeRecord]:
        """The account's limit changes (overrides, plan moves), newest first; `kind` filters."""
        return Paginator(
            lambda token: self._send(_calls.account_history_page(account_id, kind, page_size, token)),
            next_token,
        )

    def plan_history(
        self, plan_id: str, *, page_size: int = 50, next_token: str | None = None
    ) -> Paginator[ChangeRecord]:
        """The plan's changes of limits, newest first."""
        return Paginator(
            lambda token: self._send(_calls.plan_history_page(plan_id, page_size, token)), next_token
        )

    # ---- organizations (writes: operators; reads: operators and the organization's administrator)
    def put_org(self, org_id: str, plan_id: str, *, force: bool = False) -> Org:
        """Create the organization on a plan (`created` True), or move it to another (False;
        LimitBelowUsage if a kind it uses, without an override, would end below its use, unless
        `force`). ValidationError if the plan does not exist."""
        return self._send(_calls.put_org(org_id, plan_id, force))

    def get_org(self, org_id: str) -> Org:
        """The organization (NotFound if there is none). Its administrator may read it too."""
        return self._send(_calls.get_org(org_id))

    def delete_org(self, org_id: str, *, missing_ok: bool = False) -> None:
        """Delete it: MembershipConflict (OrganizationNotEmpty) while it has members. NotFound if
        there is none, which is also the answer to a retry whose first attempt deleted it: with
        ``missing_ok=True`` a NotFound is success."""
        try:
            self._send(_calls.delete_org(org_id))
        except NotFound:
            if not missing_ok:
                raise

    def set_org_limit(self, org_id: str, kind: str, limit: int, *, force: bool = False) -> OrgOverride:
        """The organization's own limit for a kind, instead of its plan's (LimitBelowUsage below
        its members' use, unless `force`)."""
        return self._send(_calls.set_org_limit(org_id, kind, limit, force))

    def remove_org_limit(self, org_id: str, kind: str, *, force: bool = False) -> None:
        """Back to the organization's plan's limit for the kind; the same rule as setting one."""
        self._send(_calls.remove_org_limit(org_id, kind, force))

    def add_member(self, org_id: str, account_id: str) -> Membership:
        """The account joins the organization (`joined` False: it already was a member). Only an
        empty account changes organization: MembershipConflict (AccountNotEmpty, or
        AccountInAnotherOrganization); NotFound if the organization does not exist."""
        return self._send(_calls.add_member(org_id, account_id))

    def remove_member(self, org_id: str, account_id: str) -> None:
        """The account leaves the organization (nothing if it was not a member); only while empty:
        MembershipConflict (AccountNotEmpty)."""
        self._send(_calls.remove_member(org_id, account_id))

    def org_usage(self, org_id: str, *, top: int = 5) -> OrgUsage:
        """Per kind, the organization's limit and use, and its `top` (0 to 100) members by use."""
        return self._send(_calls.org_usage(org_id, top))

    def usage_over(
        self,
        *,
        threshold: int | None = None,
        kind: str | None = None,
        page_size: int = 50,
        next_token: str | None = None,
    ) -> Paginator[OverRow]:
        """Who is at or over a usage threshold (operators): newest crossing first; `threshold` a
        configured one (default the lowest), `kind` one kind (default every kind)."""
        return Paginator(
            lambda token: self._send(_calls.usage_over_page(threshold, kind, page_size, token)), next_token
        )

    def events(
        self, *, since: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> Paginator[LoggedEvent]:
        """The events published since `since` (ISO 8601; default 24 hours ago, at most EventLogDays
        back), every account's and organization's, newest first (operators)."""
        return Paginator(lambda token: self._send(_calls.events_page(since, page_size, token)), next_token)

    def org_history(
        self, org_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> Paginator[ChangeRecord]:
        """The organization's limit changes (its plan, its overrides), newest first; `kind` filters."""
        return Paginator(
            lambda token: self._send(_calls.org_history_page(org_id, kind, page_size, token)), next_token
        )
