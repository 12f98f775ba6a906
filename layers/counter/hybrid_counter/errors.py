"""Domain errors. They know nothing of HTTP; the API maps them to status codes in one place."""

from __future__ import annotations


class DomainError(Exception):
    code = "Error"
    retry_after: int | None = None


class ValidationError(DomainError):
    code = "ValidationError"


class NotFound(DomainError):
    code = "NotFound"


class LimitExceeded(DomainError):
    """No room for the units: at the account's limit, or (``scope`` "organization") at the limit
    of the organization the account belongs to. ``limit`` and ``used`` are that level's."""

    code = "LimitExceeded"

    def __init__(
        self,
        limit: int,
        used: int,
        kind: str | None = None,
        units: int = 1,
        *,
        scope: str = "account",
        holds: bool | None = None,
        org: str | None = None,
        org_holds: bool | None = None,
        org_hold_keys: int | None = None,
    ) -> None:
        what = f"{kind} units" if kind else "resources"
        asked = f"; {units} more asked for" if units != 1 else ""
        whose = "account" if scope == "account" else "organization"
        super().__init__(f"{whose} is at its limit of {limit} {what} ({used} in use{asked})")
        self.limit = limit
        self.used = used
        self.kind = kind
        self.units = units
        self.scope = scope
        # Whether the account's counter item ever admitted a hold (None: not known): False
        # spares a refusal the search for its expired holds (holds.py).
        self.holds = holds
        # (scope "organization") the organization that refused: a refusal there first expires
        # its members' expired holds of the kind (holds.py, OrgHoldIndex), unless its counter
        # items say none of them ever held (``org_holds`` False; None: not known, looked for)
        self.org = org
        self.org_holds = org_holds
        # the OrgHoldIndex keys its members' holds of the kind are under, as its counter items
        # read say (keys.org_hold_key; None: not known, the organization's profile read for it)
        self.org_hold_keys = org_hold_keys


class IdempotencyConflict(DomainError):
    """A PUT of an existing id with a body other than the one that created it."""

    code = "IdempotencyConflict"


class HoldExpired(DomainError):
    """A confirm of a hold whose deadline passed: its units are (or are being) released, and
    nothing is counted for it (holds.py)."""

    code = "HoldExpired"


class LimitBelowUsage(DomainError):
    """A limit change would put a kind's limit below what the account already uses (refused
    unless forced: lowering never removes resources, it only refuses creates)."""

    code = "LimitBelowUsage"

    def __init__(self, below: list[tuple[str, int, int]]) -> None:
        described = ", ".join(f"{kind}: limit {limit} < {used} in use" for kind, limit, used in below)
        super().__init__(
            f"the new limit is below current use ({described}); send force: true to apply it anyway"
        )
        self.below = below  # (kind, new limit, used)


class Throttled(DomainError):
    """DynamoDB throttled the account's writes on every attempt; nothing was written."""

    code = "TooManyRequests"
    retry_after = 1


class StoreUnavailable(DomainError):
    """DynamoDB could not be reached or failed after retries; nothing needs undoing."""

    code = "ServiceUnavailable"
    retry_after = 1


class InProgress(StoreUnavailable):
    """Another request on the same resource has not finished; retrying shortly will see its outcome."""


class MembershipConflict(DomainError):
    """An organization's membership cannot change now: the account holds resources (an account
    moves between organizations only while empty), it belongs to another organization, or an
    organization to be deleted still has members. ``code`` says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
