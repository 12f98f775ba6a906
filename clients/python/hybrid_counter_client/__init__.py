"""A typed client for the hybrid-counter HTTP API: `Client` (sync) and `AsyncClient` (asyncio)."""

from hybrid_counter_client._http import RetryPolicy
from hybrid_counter_client.aio import AsyncClient, AsyncPaginator
from hybrid_counter_client.auth import AsyncTokenProvider, SigV4, TokenProvider
from hybrid_counter_client.client import Client, Paginator, __version__
from hybrid_counter_client.errors import (
    Forbidden,
    HybridCounterError,
    IdempotencyConflict,
    KindBelowUsage,
    LimitBelowUsage,
    LimitExceeded,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnexpectedResponse,
    ValidationError,
)
from hybrid_counter_client.models import (
    AccountPlan,
    ChangeRecord,
    KindUsage,
    Override,
    Page,
    Plan,
    Resource,
    Usage,
    WouldAdmit,
)

__all__ = [
    "AccountPlan",
    "AsyncClient",
    "AsyncPaginator",
    "AsyncTokenProvider",
    "ChangeRecord",
    "Client",
    "Forbidden",
    "HybridCounterError",
    "IdempotencyConflict",
    "KindBelowUsage",
    "KindUsage",
    "LimitBelowUsage",
    "LimitExceeded",
    "NotFound",
    "Override",
    "Page",
    "Paginator",
    "Plan",
    "Resource",
    "RetryPolicy",
    "ServiceUnavailable",
    "SigV4",
    "TokenProvider",
    "TooManyRequests",
    "Unauthorized",
    "UnexpectedResponse",
    "Usage",
    "ValidationError",
    "WouldAdmit",
    "__version__",
]
