"""boto3 clients, and what a failed DynamoDB call tells us about whether it took effect.

Every write is classified after a failure as *not applied* (throttling, a conflict with a
transaction in progress on the item, an error raised before the request's first byte was sent:
retrying is safe), *unknown* (a timeout, TLS failure or reset once the request may have left, a
5xx: it may have taken effect) or a condition failure the caller interprets. The counter writes
that are not idempotent (the admission and the release) run on a client without botocore retries
and are retried here only when the failure proves nothing was written; the idempotent writes
(each conditional on the state it changes) use botocore's retries plus a retry of transaction
conflicts, which botocore's standard mode does not retry.

Which exceptions prove nothing was sent is an explicit table of exact classes (``EFFECTS``), read
off botocore's and urllib3's source: a class is looked up by ``type(error)``, never by
``isinstance``, so a subclass added later (say one of EndpointConnectionError raised after
sending) is *unknown* until someone reads where it is raised and adds it.
tests/unit/test_error_effects.py walks both libraries' exception hierarchies and fails on any
class the table does not name.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import boto3
import boto3.exceptions as b3
import botocore.exceptions as bc
import urllib3.exceptions as u3
from botocore import discovery, eventstream
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from hybrid_counter.errors import DomainError, StoreUnavailable, Throttled

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_events import EventBridgeClient

RETRYING = Config(retries={"mode": "standard", "total_max_attempts": 5}, connect_timeout=2, read_timeout=5)
SINGLE_ATTEMPT = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=2, read_timeout=5
)

CONDITION_FAILED = "ConditionalCheckFailedException"
THROTTLING_ERRORS = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)
# A single-item write that meets a transaction in progress on the same item is refused whole.
CONFLICT_ERRORS = frozenset({"TransactionConflictException", "TransactionInProgressException"})
NOT_APPLIED_ERRORS = THROTTLING_ERRORS | CONFLICT_ERRORS


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class Effect(Enum):
    NOT_APPLIED = "not_applied"
    UNKNOWN = "unknown"
    CONDITION_FAILED = "condition_failed"
    REFUSED = "refused"  # a 4xx that is neither: a bug, not a state of the world


NOT_APPLIED, UNKNOWN = Effect.NOT_APPLIED, Effect.UNKNOWN

# Every exception a DynamoDB call can raise other than ClientError, by exact class: NOT_APPLIED only
# where every place it is raised (botocore 1.44, urllib3 2.8) comes before the attempt's first byte
# is sent. "Before sending" holds for one attempt: on a client with botocore retries, the credentials
# or the rate limiter of attempt 2 may fail after attempt 1 was sent, which is one more reason the
# admission and the release run on a single-attempt client (SINGLE_ATTEMPT).
EFFECTS: Mapping[type[BaseException], Effect] = {
    # --- Sending and receiving (botocore/httpsession.py wraps urllib3's errors into these) ---
    bc.EndpointConnectionError: NOT_APPLIED,  # urllib3 NewConnectionError or DNS: no connection made
    bc.ConnectTimeoutError: NOT_APPLIED,  # urllib3 ConnectTimeoutError: TCP connect timed out
    bc.SSLError: UNKNOWN,  # TLS fails in the handshake, or while the response is read (after sending)
    # A connection dropped after the request went through the proxy is one too: http.client closes
    # it, which makes urllib3 take it for a connection that never reached the proxy (ProxyError).
    bc.ProxyConnectionError: UNKNOWN,
    bc.ReadTimeoutError: UNKNOWN,  # sent, no answer in time (also a TLS handshake timing out)
    bc.ConnectionClosedError: UNKNOWN,  # urllib3 ProtocolError: dropped while sending or reading
    bc.HTTPClientError: UNKNOWN,  # httpsession's catch-all for anything else raised while sending
    bc.ConnectionError: UNKNOWN,  # base class: never raised itself, says nothing of when
    bc.ResponseStreamingError: UNKNOWN,  # reading a streamed response body
    bc.IncompleteReadError: UNKNOWN,  # a streamed response body shorter than its length
    bc.ChecksumError: UNKNOWN,  # the response's CRC32 did not match (legacy retry handler)
    bc.FlexibleChecksumError: UNKNOWN,  # request checksum (before) or response checksum (after)
    bc.AwsChunkedWrapperError: UNKNOWN,  # seeking the request body back for a retry
    bc.UnseekableStreamError: UNKNOWN,  # rewinding the request body for a retry: an attempt went out
    ResponseParserError: UNKNOWN,  # the response arrived and could not be parsed (not a BotoCoreError)
    eventstream.ParserError: UNKNOWN,  # the event stream responses: all raised reading a response
    eventstream.DuplicateHeader: UNKNOWN,
    eventstream.InvalidHeadersLength: UNKNOWN,
    eventstream.InvalidPayloadLength: UNKNOWN,
    eventstream.ChecksumMismatch: UNKNOWN,
    eventstream.NoInitialResponseError: UNKNOWN,
    concurrent.futures.CancelledError: UNKNOWN,  # re-raised by httpsession: a cancelled body upload
    bc.BotoCoreError: UNKNOWN,  # base class: anything
    # --- Raised between a call's pages or polls: earlier calls were sent ---
    bc.PaginationError: UNKNOWN,
    bc.WaiterError: UNKNOWN,
    # --- Raised before the request is sent: building the client, resolving the endpoint, checking
    # the parameters (before-call and serialisation), signing (credentials and tokens are resolved
    # when the request is signed, in Endpoint.create_request, before _send), the adaptive rate
    # limiter's before-send hook, or a Stubber answering in before-call ---
    bc.ParamValidationError: NOT_APPLIED,
    bc.ValidationError: NOT_APPLIED,
    bc.AliasConflictParameterError: NOT_APPLIED,
    bc.RangeError: NOT_APPLIED,
    bc.UnknownKeyError: NOT_APPLIED,
    bc.UnknownParameterError: NOT_APPLIED,
    bc.MissingParametersError: NOT_APPLIED,
    bc.InvalidExpressionError: NOT_APPLIED,
    bc.MD5UnavailableError: NOT_APPLIED,
    bc.MissingDependencyException: NOT_APPLIED,
    bc.CapacityNotAvailableError: NOT_APPLIED,  # the adaptive token bucket, in before-send
    bc.StubResponseError: NOT_APPLIED,
    bc.StubAssertionError: NOT_APPLIED,
    bc.UnStubbedResponseError: NOT_APPLIED,
    bc.NoCredentialsError: NOT_APPLIED,
    bc.PartialCredentialsError: NOT_APPLIED,
    bc.CredentialRetrievalError: NOT_APPLIED,
    bc.UnknownCredentialError: NOT_APPLIED,
    bc.RefreshWithMFAUnsupportedError: NOT_APPLIED,
    bc.MetadataRetrievalError: NOT_APPLIED,
    bc.NoAuthTokenError: NOT_APPLIED,
    bc.TokenRetrievalError: NOT_APPLIED,
    bc.UnknownTokenProviderError: NOT_APPLIED,
    bc.SSOError: NOT_APPLIED,
    bc.SSOTokenLoadError: NOT_APPLIED,
    bc.UnauthorizedSSOTokenError: NOT_APPLIED,
    bc.LoginError: NOT_APPLIED,
    bc.LoginAuthorizationCodeError: NOT_APPLIED,
    bc.LoginInsufficientPermissions: NOT_APPLIED,
    bc.LoginRefreshRequired: NOT_APPLIED,
    bc.LoginTokenLoadError: NOT_APPLIED,
    bc.UnknownSignatureVersionError: NOT_APPLIED,
    bc.UnsupportedSignatureVersionError: NOT_APPLIED,
    bc.NoRegionError: NOT_APPLIED,
    bc.UnknownRegionError: NOT_APPLIED,
    bc.InvalidRegionError: NOT_APPLIED,
    bc.BaseEndpointResolverError: NOT_APPLIED,
    bc.EndpointVariantError: NOT_APPLIED,
    bc.UnknownEndpointError: NOT_APPLIED,
    bc.UnknownFIPSEndpointError: NOT_APPLIED,
    bc.EndpointProviderError: NOT_APPLIED,
    bc.EndpointResolutionError: NOT_APPLIED,
    bc.UnknownEndpointResolutionBuiltInName: NOT_APPLIED,
    bc.InvalidEndpointConfigurationError: NOT_APPLIED,
    bc.InvalidHostLabelError: NOT_APPLIED,
    bc.InvalidDNSNameError: NOT_APPLIED,
    bc.ServiceNotInRegionError: NOT_APPLIED,
    bc.UnsupportedOutpostResourceError: NOT_APPLIED,
    bc.UnsupportedS3AccesspointConfigurationError: NOT_APPLIED,
    bc.UnsupportedS3ArnError: NOT_APPLIED,
    bc.UnsupportedS3ConfigurationError: NOT_APPLIED,
    bc.UnsupportedS3ControlArnError: NOT_APPLIED,
    bc.UnsupportedS3ControlConfigurationError: NOT_APPLIED,
    discovery.EndpointDiscoveryException: NOT_APPLIED,  # endpoint discovery runs in before-call
    discovery.EndpointDiscoveryRequired: NOT_APPLIED,
    discovery.EndpointDiscoveryRefreshFailed: NOT_APPLIED,
    bc.InvalidProxiesConfigError: NOT_APPLIED,  # building the proxy's pool manager
    bc.ApiVersionNotFoundError: NOT_APPLIED,  # the rest: loading models, configuration, sessions
    bc.DataNotFoundError: NOT_APPLIED,
    bc.UnknownServiceError: NOT_APPLIED,
    bc.UnknownServiceStyle: NOT_APPLIED,
    bc.UnsupportedServiceProtocolsError: NOT_APPLIED,
    bc.UnknownClientMethodError: NOT_APPLIED,
    bc.OperationNotPageableError: NOT_APPLIED,
    bc.WaiterConfigError: NOT_APPLIED,
    bc.ConfigNotFound: NOT_APPLIED,
    bc.ConfigParseError: NOT_APPLIED,
    bc.ProfileNotFound: NOT_APPLIED,
    bc.InvalidConfigError: NOT_APPLIED,
    bc.InfiniteLoopConfigError: NOT_APPLIED,
    bc.InvalidDefaultsMode: NOT_APPLIED,
    bc.InvalidRetryConfigurationError: NOT_APPLIED,
    bc.InvalidMaxRetryAttemptsError: NOT_APPLIED,
    bc.InvalidRetryModeError: NOT_APPLIED,
    bc.InvalidChecksumConfigError: NOT_APPLIED,
    bc.InvalidEndpointDiscoveryConfigurationError: NOT_APPLIED,
    bc.InvalidIMDSEndpointError: NOT_APPLIED,
    bc.InvalidIMDSEndpointModeError: NOT_APPLIED,
    bc.InvalidS3AddressingStyleError: NOT_APPLIED,
    bc.InvalidS3UsEast1RegionalEndpointConfigError: NOT_APPLIED,
    bc.InvalidSTSRegionalEndpointsConfigError: NOT_APPLIED,
    b3.ResourceNotExistsError: NOT_APPLIED,  # boto3 building a resource
    b3.UnknownAPIVersionError: NOT_APPLIED,
    # --- urllib3's own classes. botocore's httpsession wraps every one into the classes above, so
    # none escapes a call today; they are here for a botocore that lets one through. ---
    u3.NewConnectionError: NOT_APPLIED,  # HTTPConnection._new_conn: the TCP connect failed
    u3.NameResolutionError: NOT_APPLIED,  # _new_conn: DNS failed
    u3.ConnectTimeoutError: NOT_APPLIED,  # _new_conn (and the SOCKS proxy's connect) timed out
    u3.LocationValueError: NOT_APPLIED,  # no host: the URL is refused before connecting
    u3.LocationParseError: NOT_APPLIED,
    u3.URLSchemeUnknown: NOT_APPLIED,
    u3.ProxySchemeUnknown: NOT_APPLIED,
    u3.HostChangedError: NOT_APPLIED,  # urlopen's same-host check, before the request
    u3.ClosedPoolError: NOT_APPLIED,  # _get_conn: no connection to send on
    u3.EmptyPoolError: NOT_APPLIED,
    u3.TimeoutStateError: NOT_APPLIED,  # the connect timer, started before the request
    u3.SSLError: UNKNOWN,  # as botocore's SSLError
    u3.ProxyError: UNKNOWN,  # as botocore's ProxyConnectionError
    u3.ReadTimeoutError: UNKNOWN,
    u3.ProtocolError: UNKNOWN,  # connection aborted while sending or reading
    u3.ResponseNotChunked: UNKNOWN,  # the rest are raised reading a response, or are base classes
    u3.IncompleteRead: UNKNOWN,
    u3.InvalidChunkLength: UNKNOWN,
    u3.BodyNotHttplibCompatible: UNKNOWN,
    u3.DecodeError: UNKNOWN,
    u3.HeaderParsingError: UNKNOWN,
    u3.InvalidHeader: UNKNOWN,  # a response header (or its Retry-After) is malformed
    u3.ResponseError: UNKNOWN,
    u3.MaxRetryError: UNKNOWN,  # wraps whatever the last attempt raised
    u3.FullPoolError: UNKNOWN,  # _put_conn, returning the connection after the response
    u3.UnrewindableBodyError: UNKNOWN,  # rewinding the body for a retry or redirect
    u3.HTTPError: UNKNOWN,
    u3.PoolError: UNKNOWN,
    u3.RequestError: UNKNOWN,
    u3.TimeoutError: UNKNOWN,
}

# What a call on a DynamoDB client can raise that is a failure of the call, not a bug of ours:
# attempt_write classifies these and lets anything else through. (CancelledError is let through
# too: a cancellation asks the caller to stop, not to find out what the write did.)
AWS_ERRORS: tuple[type[Exception], ...] = (
    ClientError,
    BotoCoreError,
    ResponseParserError,
    eventstream.ParserError,
    u3.HTTPError,
)


def effect_of(error: Exception) -> Effect:
    """Whether a failed DynamoDB write may have taken effect.

    A ClientError is judged by its code (botocore makes a subclass per code, so by isinstance);
    any other exception by its exact class in ``EFFECTS``, and a class not there is UNKNOWN.
    """
    if isinstance(error, ClientError):
        code = error_code(error)
        if code == CONDITION_FAILED:
            return Effect.CONDITION_FAILED
        if code in NOT_APPLIED_ERRORS:
            return Effect.NOT_APPLIED
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return Effect.UNKNOWN if status >= 500 or status == 0 else Effect.REFUSED
    return EFFECTS.get(type(error), Effect.UNKNOWN)


@dataclass(frozen=True)
class Attempted:
    """What came of a write tried until it applied or could be known not to have."""

    effect: Effect | None  # None: applied
    response: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None

    @property
    def applied(self) -> bool:
        return self.effect is None

    @property
    def throttled(self) -> bool:
        return (
            self.effect is Effect.NOT_APPLIED
            and isinstance(self.error, ClientError)
            and error_code(self.error) in NOT_APPLIED_ERRORS
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often a write refused without effect is tried again, and how long to pause."""

    attempts: int = 6
    first_delay: float = 0.02
    max_delay: float = 0.5
    sleep: Callable[[float], None] = time.sleep


def attempt_write(call: Callable[[], Any], policy: RetryPolicy) -> Attempted:
    """Run ``call`` until it applies, retrying only failures that prove it did not.

    A condition failure is returned to the caller (with the response's error), never retried.
    """
    delay = policy.first_delay
    last: Exception | None = None
    for attempt in range(policy.attempts):
        try:
            return Attempted(None, dict(call() or {}))
        except AWS_ERRORS as error:
            effect = effect_of(error)
            if effect is Effect.REFUSED:
                raise
            if effect is not Effect.NOT_APPLIED:
                return Attempted(effect, error=error)
            last = error
        if attempt < policy.attempts - 1:
            policy.sleep(delay)
            delay = min(delay * 2, policy.max_delay)
    return Attempted(Effect.NOT_APPLIED, error=last)


def retry_conflicts[T](call: Callable[[], T], policy: RetryPolicy) -> T:
    """An idempotent write on a retrying client, also retried on transaction conflicts."""
    delay = policy.first_delay
    for attempt in range(policy.attempts):
        try:
            return call()
        except ClientError as error:
            if error_code(error) not in CONFLICT_ERRORS or attempt == policy.attempts - 1:
                raise
        policy.sleep(delay)
        delay = min(delay * 2, policy.max_delay)
    raise AssertionError("unreachable")


def transact_conditionally(
    dynamodb: DynamoDBClient, actions: list[dict[str, Any]], policy: RetryPolicy
) -> list[str | None] | None:
    """A transaction of idempotent writes whose conditions may refuse it (operators' changes
    and rebases: no admission waits on one): None if it applied; each action's cancellation
    code if a condition refused it (which item refused is the caller's answer). Retried on
    conflicts with other writes of its items, since a transaction cancelled by one is not the
    conflict error that ``retry_conflicts`` retries (and the stream path relies on that)."""
    delay = policy.first_delay
    for attempt in range(policy.attempts):
        try:
            dynamodb.transact_write_items(TransactItems=actions)  # type: ignore[arg-type]
        except ClientError as error:
            codes = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
            if "ConditionalCheckFailed" in codes:
                return [None if code in (None, "None") else code for code in codes]
            conflict = "TransactionConflict" in codes or error_code(error) in CONFLICT_ERRORS
            if not conflict or attempt == policy.attempts - 1:
                raise
            policy.sleep(delay)
            delay = min(delay * 2, policy.max_delay)
            continue
        return None
    raise AssertionError("unreachable")


@dataclass
class Clients:
    """The AWS clients a component uses; pass your own to inject stubs or wrapped clients."""

    dynamodb: DynamoDBClient = field(default_factory=lambda: boto3.client("dynamodb", config=RETRYING))
    dynamodb_single_attempt: DynamoDBClient = field(
        default_factory=lambda: boto3.client("dynamodb", config=SINGLE_ATTEMPT)
    )
    streams: DynamoDBStreamsClient | None = None
    events: EventBridgeClient | None = None

    def streams_client(self) -> DynamoDBStreamsClient:
        if self.streams is None:
            self.streams = boto3.client("dynamodbstreams", config=RETRYING)
        return self.streams

    def events_client(self) -> EventBridgeClient:
        if self.events is None:
            self.events = boto3.client("events", config=RETRYING)
        return self.events


def store_error(error: Exception, what: str) -> DomainError:
    """An AWS error as the domain's retryable answer: 429 if DynamoDB throttled, else 503."""
    if isinstance(error, ClientError) and error_code(error) in THROTTLING_ERRORS:
        return Throttled(f"too many requests for this account; {what} was not done, retry the request")
    return StoreUnavailable(f"the data store is unavailable; {what} was not done, retry the request")
