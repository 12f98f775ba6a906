"""Domain errors. They know nothing of HTTP; the API maps them to status codes in one place."""

from __future__ import annotations


class DomainError(Exception):
    code = "Error"


class ValidationError(DomainError):
    code = "ValidationError"


class NotFound(DomainError):
    code = "NotFound"


class LimitExceeded(DomainError):
    code = "LimitExceeded"

    def __init__(self, limit: int, used: int) -> None:
        super().__init__(f"account is at its limit of {limit} resources ({used} in use)")
        self.limit = limit
        self.used = used


class StoreUnavailable(DomainError):
    """DynamoDB refused a plain single-item write after retries (not a counter-internal failure)."""

    code = "ServiceUnavailable"
