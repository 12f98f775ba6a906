"""Credentials: a bearer token from a provider (JWT mode), or SigV4 signatures (IAM mode).

A stack runs in one of two modes (README, "Authentication"): API Gateway
validates an OIDC access token, or a SigV4 signature for `execute-api`. The client takes either.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from botocore.credentials import Credentials

TokenProvider = Callable[[], str]
"""Returns a bearer token (without "Bearer "). Called for the first request and again after a 401."""

AsyncTokenProvider = Callable[[], str | Awaitable[str]]
"""The same for `AsyncClient`; it may be a coroutine function."""


class BearerTokens:
    """The token requests carry, kept between requests so that the provider is not asked per
    request (minting can be a round trip to the identity provider). After a 401 the client asks
    for a fresh one, once, unless another request already replaced the rejected token: tokens
    expire, and a 401 is answered before the service runs, so sending again is always safe."""

    def __init__(self, provider: TokenProvider) -> None:
        self._provider = provider
        self._token: str | None = None

    def current(self) -> str:
        if self._token is None:
            self._token = self._provider()
        return self._token

    def refresh(self, rejected: str) -> None:
        if self._token in (None, rejected):
            self._token = self._provider()


class AsyncBearerTokens:
    """`BearerTokens` for `AsyncClient`: the provider may be sync or async."""

    def __init__(self, provider: AsyncTokenProvider) -> None:
        self._provider = provider
        self._token: str | None = None

    async def current(self) -> str:
        if self._token is None:
            self._token = await self._ask()
        return self._token

    async def refresh(self, rejected: str) -> None:
        if self._token in (None, rejected):
            self._token = await self._ask()

    async def _ask(self) -> str:
        token = self._provider()
        return await token if inspect.isawaitable(token) else token


class SigV4(httpx.Auth):
    """Signs every request, each retry anew (a signature holds a timestamp), with AWS Signature
    Version 4 by botocore's own signer: service `execute-api` in the API's region.

    `credentials`: botocore credentials, e.g. `boto3.Session().get_credentials()`; refreshable
    ones (an assumed role, instance metadata) are read afresh for each request. Needs the
    `sigv4` extra (botocore), imported only here so that JWT users need not install it.
    """

    requires_request_body = True  # the body's SHA-256 is part of the signature

    def __init__(self, credentials: Credentials, region: str, service: str = "execute-api") -> None:
        try:
            from botocore.auth import SigV4Auth  # noqa: PLC0415 - optional dependency
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("SigV4 needs botocore: pip install 'hybrid-counter-client[sigv4]'") from error
        self._signer = SigV4Auth
        self.credentials = credentials
        self.region = region
        self.service = service

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415 - optional dependency

        # Sign what travels: the URL as httpx encodes it, its Host header, the exact body bytes.
        headers = {"host": request.headers["host"]}
        if "content-type" in request.headers:
            headers["content-type"] = request.headers["content-type"]
        signed = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        frozen = self.credentials.get_frozen_credentials()
        self._signer(frozen, self.service, self.region).add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = signed.headers.get(name)
            if value is not None:
                request.headers[name] = value
        yield request
