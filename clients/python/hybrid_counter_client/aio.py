"""The asyncio client: `Client`'s API, awaited."""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

import httpx

from hybrid_counter_client import _calls
from hybrid_counter_client._calls import Call
from hybrid_counter_client._http import AsyncSender, RetryPolicy, Settings
from hybrid_counter_client.auth import AsyncBearerTokens, AsyncTokenProvider, SigV4
from hybrid_counter_client.client import DEFAULT_HEADERS
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


class AsyncPaginator[T]:
    """`Paginator` for asyncio: `async for` over the items, or over `pages()`."""

    def __init__(
        self, fetch: Callable[[str | None], Awaitable[Page[T]]], next_token: str | None = None
    ) -> None:
        self._fetch = fetch
        self._start = next_token

    def __aiter__(self) -> AsyncIterator[T]:
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        async for page in self.pages():
            for item in page.items:
                yield item

    async def pages(self) -> AsyncIterator[Page[T]]:
        token = self._start
        while True:
            page = await self._fetch(token)
            yield page
            if page.next_token is None:
                return
            token = page.next_token


class AsyncClient:
    """The hybrid-counter API on asyncio: `Client`'s methods, each awaited (the listings are
    async iterables: `async for resource in client.list_resources(...)`), with the same
    retries, errors and results; see `Client` for what each does. The token provider may be a
    coroutine function. Close it with `aclose()` or use it with `async with`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        auth: AsyncTokenProvider | SigV4 | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
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
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout)
        credentials = auth if auth is None or isinstance(auth, SigV4) else AsyncBearerTokens(auth)
        self._sender = AsyncSender(self._http, settings, credentials, sleep)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send[T](self, call: Call[T]) -> T:
        return await self._sender.send(call)

    # ---- the tenant's calls (the account's own token, or IAM) ----------------------------------
    async def usage(self, account_id: str) -> Usage:
        return await self._send(_calls.usage(account_id))

    async def create(
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
        body = _calls.resource_body(name, units, fields)
        if retry_safe:
            return await self._send(_calls.create_by_put(account_id, kind, body, hold_seconds))
        return await self._send(_calls.create(account_id, kind, body, hold_seconds))

    async def put(
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
        body = _calls.resource_body(name, units, fields)
        return await self._send(_calls.put(account_id, kind, resource_id, body, hold_seconds))

    async def confirm(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        return await self._send(_calls.confirm(account_id, kind, resource_id))

    async def get(self, account_id: str, resource_id: str, *, kind: str | None = None) -> Resource:
        return await self._send(_calls.get(account_id, kind, resource_id))

    def list_resources(
        self, account_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> AsyncPaginator[Resource]:
        return AsyncPaginator(
            lambda token: self._send(_calls.resources_page(account_id, kind, page_size, token)), next_token
        )

    async def delete(
        self, account_id: str, resource_id: str, *, kind: str | None = None, missing_ok: bool = False
    ) -> None:
        try:
            await self._send(_calls.delete(account_id, kind, resource_id))
        except NotFound:
            if not missing_ok:
                raise

    async def resize(self, account_id: str, resource_id: str, units: int, *, kind: str) -> Resource:
        return await self._send(_calls.resize(account_id, kind, resource_id, units))

    async def would_create(
        self,
        account_id: str,
        name: str,
        *,
        kind: str | None = None,
        units: int = 1,
        fields: Mapping[str, Any] | None = None,
        hold_seconds: int | None = None,
    ) -> WouldAdmit:
        body = _calls.resource_body(name, units, fields)
        return await self._send(_calls.would_create(account_id, kind, body, hold_seconds))

    async def would_put(
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
        body = _calls.resource_body(name, units, fields)
        return await self._send(_calls.would_put(account_id, kind, resource_id, body, hold_seconds))

    async def would_resize(self, account_id: str, resource_id: str, units: int, *, kind: str) -> WouldAdmit:
        return await self._send(_calls.would_resize(account_id, kind, resource_id, units))

    # ---- the operators' calls (a token with the operator scope, or IAM) ------------------------
    async def limits(self, account_id: str) -> Usage:
        return await self._send(_calls.limits(account_id))

    async def set_override(self, account_id: str, kind: str, limit: int, *, force: bool = False) -> Override:
        return await self._send(_calls.set_override(account_id, kind, limit, force))

    async def remove_override(self, account_id: str, kind: str, *, force: bool = False) -> None:
        await self._send(_calls.remove_override(account_id, kind, force))

    async def set_limit(self, account_id: str, limit: int, *, force: bool = False) -> Override:
        return await self._send(_calls.set_limit(account_id, limit, force))

    async def put_plan(self, plan_id: str, limits: Mapping[str, int]) -> Plan:
        return await self._send(_calls.put_plan(plan_id, limits))

    async def get_plan(self, plan_id: str) -> Plan:
        return await self._send(_calls.get_plan(plan_id))

    def list_plans(self, *, page_size: int = 50, next_token: str | None = None) -> AsyncPaginator[Plan]:
        return AsyncPaginator(lambda token: self._send(_calls.plans_page(page_size, token)), next_token)

    async def assign_plan(self, account_id: str, plan_id: str, *, force: bool = False) -> AccountPlan:
        return await self._send(_calls.assign_plan(account_id, plan_id, force))

    def account_history(
        self, account_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> AsyncPaginator[ChangeRecord]:
        return AsyncPaginator(
            lambda token: self._send(_calls.account_history_page(account_id, kind, page_size, token)),
            next_token,
        )

    def plan_history(
        self, plan_id: str, *, page_size: int = 50, next_token: str | None = None
    ) -> AsyncPaginator[ChangeRecord]:
        return AsyncPaginator(
            lambda token: self._send(_calls.plan_history_page(plan_id, page_size, token)), next_token
        )

    # ---- organizations (writes: operators; reads: operators and the organization's administrator)
    async def put_org(self, org_id: str, plan_id: str, *, force: bool = False) -> Org:
        return await self._send(_calls.put_org(org_id, plan_id, force))

    async def get_org(self, org_id: str) -> Org:
        return await self._send(_calls.get_org(org_id))

    async def delete_org(self, org_id: str, *, missing_ok: bool = False) -> None:
        try:
            await self._send(_calls.delete_org(org_id))
        except NotFound:
            if not missing_ok:
                raise

    async def set_org_limit(self, org_id: str, kind: str, limit: int, *, force: bool = False) -> OrgOverride:
        return await self._send(_calls.set_org_limit(org_id, kind, limit, force))

    async def remove_org_limit(self, org_id: str, kind: str, *, force: bool = False) -> None:
        await self._send(_calls.remove_org_limit(org_id, kind, force))

    async def add_member(self, org_id: str, account_id: str) -> Membership:
        return await self._send(_calls.add_member(org_id, account_id))

    async def remove_member(self, org_id: str, account_id: str) -> None:
        await self._send(_calls.remove_member(org_id, account_id))

    async def org_usage(self, org_id: str, *, top: int = 5) -> OrgUsage:
        return await self._send(_calls.org_usage(org_id, top))

    def usage_over(
        self,
        *,
        threshold: int | None = None,
        kind: str | None = None,
        page_size: int = 50,
        next_token: str | None = None,
    ) -> AsyncPaginator[OverRow]:
        return AsyncPaginator(
            lambda token: self._send(_calls.usage_over_page(threshold, kind, page_size, token)), next_token
        )

    def events(
        self, *, since: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> AsyncPaginator[LoggedEvent]:
        return AsyncPaginator(
            lambda token: self._send(_calls.events_page(since, page_size, token)), next_token
        )

    def org_history(
        self, org_id: str, *, kind: str | None = None, page_size: int = 50, next_token: str | None = None
    ) -> AsyncPaginator[ChangeRecord]:
        return AsyncPaginator(
            lambda token: self._send(_calls.org_history_page(org_id, kind, page_size, token)), next_token
        )
