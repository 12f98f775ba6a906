"""The API's errors as exceptions, one class per error code.

The API answers `{"error": {"code", "message", ...}}` (layers/counter/hybrid_counter/api/errors.py);
the code picks the class, so the 409s (`LimitExceeded`, `IdempotencyConflict`, `HoldExpired`, ...)
are told apart without reading messages. API Gateway answers some requests itself, before the service runs,
with `{"message": ...}` only (401 for a missing or bad token, 403 for a missing scope or a bad
SigV4 signature, 429 for its own throttling): those are mapped by status to the same classes, so
callers catch `Unauthorized` whichever of the two refused them.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx


class HybridCounterError(Exception):
    """An error answer of the API (or of API Gateway in front of it).

    `status` is the HTTP status, `code` the API's error code (for API Gateway's own answers, the
    code the API uses for that status), `message` the human-readable text, `retry_after` the
    `Retry-After` header in seconds when there was one, `body` the decoded error object.
    """

    default_code = "Error"

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retry_after: float | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.body: Mapping[str, Any] = body or {}


class ValidationError(HybridCounterError):
    """400: the request was malformed (bad JSON, ids, types, reserved fields); nothing changed."""

    default_code = "ValidationError"


class Unauthorized(HybridCounterError):
    """401: no valid token (API Gateway's `{"message": "Unauthorized"}`); nothing happened."""

    default_code = "Unauthorized"


class Forbidden(HybridCounterError):
    """403: another account than the token's, a missing operator scope, or a rejected signature."""

    default_code = "Forbidden"


class NotFound(HybridCounterError):
    """404: no such resource or plan (or it is already deleted), or no such route.

    For a resource by id (`get`, `delete`, `confirm`, `resize`, `would_resize`), `hint` says
    which kind it was looked for in (without `kind=`: the stack's default kind) and that `kind=`
    names another; it is part of the exception's text, not of `message` (the API's own).
    """

    default_code = "NotFound"
    hint: str | None = None

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.hint is None else f"{text} ({self.hint})"


class LimitExceeded(HybridCounterError):
    """409: no room for the request's units under the kind's limit; nothing was created or grown.

    `scope` says whose limit refused it: "account" (the account's own) or "organization" (the
    organization the account belongs to: its other members use the room). `kind` is the kind,
    `limit` that level's limit and `used` that level's units in use.
    """

    default_code = "LimitExceeded"

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        kind: str | None,
        limit: int,
        used: int,
        scope: str = "account",
        **kw: Any,
    ) -> None:
        super().__init__(status, code, message, **kw)
        self.kind = kind
        self.limit = limit
        self.used = used
        self.scope = scope


@dataclass(frozen=True, slots=True)
class KindBelowUsage:
    """One kind a limit change would have put below its current use."""

    kind: str
    limit: int  # the refused new limit
    used: int


class LimitBelowUsage(HybridCounterError):
    """409: a limit change (override, its removal, or a plan move) would put a kind below its
    current use; nothing changed. Send it again with `force=True` to apply it anyway.

    `kinds` lists every kind concerned; `kind`, `limit` and `used` are set when there is one.
    """

    default_code = "LimitBelowUsage"

    def __init__(
        self, status: int, code: str, message: str, *, kinds: tuple[KindBelowUsage, ...], **kw: Any
    ) -> None:
        super().__init__(status, code, message, **kw)
        self.kinds = kinds
        only = kinds[0] if len(kinds) == 1 else None
        self.kind: str | None = only.kind if only else None
        self.limit: int | None = only.limit if only else None
        self.used: int | None = only.used if only else None


class IdempotencyConflict(HybridCounterError):
    """409: a PUT of an id that exists with another body than the one that created it."""

    default_code = "IdempotencyConflict"


class MembershipConflict(HybridCounterError):
    """409: an organization's membership cannot change now; nothing changed. `code` says why:
    "AccountNotEmpty" (the account holds resources: it joins or leaves an organization only while
    empty), "AccountInAnotherOrganization" (it belongs to another one), or "OrganizationNotEmpty"
    (an organization to delete still has members)."""

    default_code = "MembershipConflict"
    CODES = frozenset({"AccountNotEmpty", "AccountInAnotherOrganization", "OrganizationNotEmpty"})


class HoldExpired(HybridCounterError):
    """409: a confirm of a hold whose deadline passed: its units are (or are being) released and
    the resource is gone (or going); nothing is counted for it. Create it again to hold again."""

    default_code = "HoldExpired"


class TooManyRequests(HybridCounterError):
    """429: throttled (the account's counter item, or API Gateway's route); nothing was done."""

    default_code = "TooManyRequests"


class ServiceUnavailable(HybridCounterError):
    """503: the request did nothing or will be finished; sending it again gets the final answer."""

    default_code = "ServiceUnavailable"


class UnexpectedResponse(HybridCounterError):
    """A success status whose body is not what the API answers (a proxy, or another service)."""

    default_code = "UnexpectedResponse"


_BY_CODE: dict[str, type[HybridCounterError]] = {
    cls.default_code: cls
    for cls in (
        ValidationError,
        Unauthorized,
        Forbidden,
        NotFound,
        LimitExceeded,
        LimitBelowUsage,
        IdempotencyConflict,
        HoldExpired,
        TooManyRequests,
        ServiceUnavailable,
    )
} | dict.fromkeys(MembershipConflict.CODES, MembershipConflict)
# API Gateway's own answers carry no code: the status says which.
_BY_STATUS: dict[int, type[HybridCounterError]] = {
    400: ValidationError,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    429: TooManyRequests,
    503: ServiceUnavailable,
}


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds (the API sends seconds; an HTTP date is read too), or None."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def error_from_response(response: httpx.Response) -> HybridCounterError:
    """The exception for an error answer, by the API's code, else by status."""
    status = response.status_code
    wait = retry_after(response)
    try:
        decoded: Any = json.loads(response.content)
    except ValueError:
        decoded = None
    detail = decoded.get("error") if isinstance(decoded, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("code"), str):
        code: str = detail["code"]
        message = str(detail.get("message", ""))
        return _typed(
            _BY_CODE.get(code) or _BY_STATUS.get(status) or HybridCounterError,
            status,
            code,
            message,
            wait=wait,
            detail=detail,
        )
    cls = _BY_STATUS.get(status, HybridCounterError)
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        message = decoded["message"]
    else:
        message = response.text[:200] or response.reason_phrase
    code = cls.default_code if cls is not HybridCounterError else f"HTTP{status}"
    return cls(status, code, message, retry_after=wait, body=decoded if isinstance(decoded, dict) else None)


def _typed(
    cls: type[HybridCounterError],
    status: int,
    code: str,
    message: str,
    *,
    wait: float | None,
    detail: dict[str, Any],
) -> HybridCounterError:
    common: dict[str, Any] = {"retry_after": wait, "body": detail}
    if cls is LimitExceeded:
        limit, used, kind = _int(detail.get("limit")), _int(detail.get("used")), detail.get("kind")
        # A stack from before organizations sends no scope: its limits are all the account's.
        scope = detail.get("scope", "account")
        if (
            limit is not None
            and used is not None
            and (kind is None or isinstance(kind, str))
            and isinstance(scope, str)
        ):
            return LimitExceeded(
                status, code, message, kind=kind, limit=limit, used=used, scope=scope, **common
            )
        # Not the API's body (it always sends both): no made-up numbers, the base class.
        return HybridCounterError(status, code, message, **common)
    if cls is LimitBelowUsage:
        listed = detail.get("kinds")
        if not isinstance(listed, list):
            listed = [detail]  # a single kind, as fields of the error itself
        kinds = tuple(
            KindBelowUsage(str(entry.get("kind")), limit, used)
            for entry in listed
            if isinstance(entry, dict)
            and (limit := _int(entry.get("limit"))) is not None
            and (used := _int(entry.get("used"))) is not None
        )
        return LimitBelowUsage(status, code, message, kinds=kinds, **common)
    return cls(status, code, message, **common)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
