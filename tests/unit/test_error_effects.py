"""What a failed call says about whether its write applied: every exception class, explicitly.

The sockets that show SSLError and ProxyConnectionError being raised after the request arrived are
in tests/integration/test_lost_responses.py (unit tests open no connections).
"""

from __future__ import annotations

import concurrent.futures
import importlib
import pkgutil
import warnings
from collections.abc import Iterator
from typing import Any

import boto3
import botocore
import botocore.exceptions as bc
import pytest
import urllib3
import urllib3.exceptions as u3
from botocore import eventstream
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from hybrid_counter.aws import EFFECTS, Effect, RetryPolicy, attempt_write, effect_of

LIBRARIES = (botocore, urllib3, boto3)
# Every root of what botocore's HTTP layer can raise besides ClientError (classified by its code):
# its own errors, urllib3's (which httpsession wraps, but a later botocore may let through), the
# response parser's and the event stream's (not BotoCoreErrors: parsing runs outside httpsession's
# try), and CancelledError, which httpsession re-raises as it is.
ROOTS: tuple[type[BaseException], ...] = (
    bc.BotoCoreError,
    u3.HTTPError,
    ResponseParserError,
    eventstream.ParserError,
    concurrent.futures.CancelledError,
)


def every_module_of_the_libraries() -> None:
    """Import every module of botocore, urllib3 and boto3, so that subclasses defined anywhere in
    them (botocore.discovery, boto3.exceptions, ...) are registered. Modules whose optional
    dependencies are not installed (awscrt, h2, pyOpenSSL, socks, ...) cannot raise anything here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for library in LIBRARIES:
            for module in pkgutil.walk_packages(library.__path__, f"{library.__name__}."):
                try:
                    importlib.import_module(module.name)
                except ImportError:
                    continue


def subclasses(root: type[BaseException]) -> Iterator[type[BaseException]]:
    yield root
    for child in root.__subclasses__():
        yield from subclasses(child)


def library_classes() -> set[type[BaseException]]:
    # Subclasses defined outside the libraries (by a test, or another package such as moto) are not
    # raised by botocore's HTTP layer; at run time they are UNKNOWN, as anything not in the table.
    names = tuple(f"{library.__name__}." for library in LIBRARIES)
    return {
        cls
        for root in ROOTS
        for cls in subclasses(root)
        if cls is root or f"{cls.__module__}.".startswith(names)
    }


def test_every_exception_class_botocore_and_urllib3_can_raise_is_in_the_table():
    # Given every module of botocore, urllib3 and boto3 imported
    every_module_of_the_libraries()
    # When their exception hierarchies are walked from each root, recursively
    found = library_classes()
    # Then each class is named in the table itself (not merely a subclass of one that is)
    missing = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in found - EFFECTS.keys())
    assert missing == [], "classify these in hybrid_counter.aws.EFFECTS (read where they are raised)"
    # and each class the table names was reached by the walk (no root of the hierarchy is left out)
    assert found == set(EFFECTS)


def test_a_subclass_missing_from_the_table_is_unknown_even_under_a_not_applied_class():
    # Given a subclass of a class that proves nothing was sent, which a later release might raise
    # after sending (the table has not been told about it)
    class RaisedLater(bc.EndpointConnectionError):
        pass

    # When a write fails with it, or with anything else the table does not name
    # Then its outcome is unknown: it is not taken to prove the write was not applied
    assert effect_of(bc.EndpointConnectionError(endpoint_url="https://x")) is Effect.NOT_APPLIED
    assert effect_of(RaisedLater(endpoint_url="https://x")) is Effect.UNKNOWN
    assert effect_of(RuntimeError("from a hook")) is Effect.UNKNOWN


@pytest.mark.parametrize(
    ("error", "effect"),
    [
        (bc.SSLError(endpoint_url="https://x", error=u3.SSLError("bad record mac")), Effect.UNKNOWN),
        (
            bc.ProxyConnectionError(
                proxy_url="http://p", error=u3.ProxyError("dropped", ConnectionResetError())
            ),
            Effect.UNKNOWN,
        ),
        (bc.ReadTimeoutError(endpoint_url="https://x"), Effect.UNKNOWN),
        (bc.ConnectionClosedError(endpoint_url="https://x"), Effect.UNKNOWN),
        (bc.HTTPClientError(error=ValueError("anything")), Effect.UNKNOWN),
        (ResponseParserError("garbled"), Effect.UNKNOWN),
        (bc.EndpointConnectionError(endpoint_url="https://x"), Effect.NOT_APPLIED),
        (bc.ConnectTimeoutError(endpoint_url="https://x"), Effect.NOT_APPLIED),
        (bc.NoCredentialsError(), Effect.NOT_APPLIED),
        (bc.ParamValidationError(report="bad"), Effect.NOT_APPLIED),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else value.name,
)
def test_what_the_lost_responses_and_the_errors_before_sending_are_taken_for(error, effect):
    # Given a failure raised after the request may have been sent, or before any byte of it
    # When it is classified
    # Then only the ones raised before sending prove the write was not applied
    assert effect_of(error) is effect


def client_error(code: str, status: int) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "UpdateItem")


@pytest.mark.parametrize(
    ("code", "status", "effect"),
    [
        ("ConditionalCheckFailedException", 400, Effect.CONDITION_FAILED),
        ("ThrottlingException", 400, Effect.NOT_APPLIED),
        ("ProvisionedThroughputExceededException", 400, Effect.NOT_APPLIED),
        ("TransactionConflictException", 400, Effect.NOT_APPLIED),
        ("InternalServerError", 500, Effect.UNKNOWN),
        ("ValidationException", 400, Effect.REFUSED),
    ],
)
def test_client_errors_are_judged_by_their_code_whatever_subclass_botocore_made(code, status, effect):
    # Given DynamoDB's answer as a plain ClientError and as the per-code subclass botocore makes
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    modeled = getattr(dynamodb.exceptions, code, None)
    errors = [client_error(code, status)]
    if modeled is not None:
        errors.append(modeled(client_error(code, status).response, "UpdateItem"))
    # When each is classified
    # Then by its code: the classes botocore makes per code are not in the table, and need not be
    assert [effect_of(error) for error in errors] == [effect] * len(errors)


class Calls:
    """A write that fails with the given errors, in turn, then succeeds."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.count = 0

    def __call__(self) -> dict:
        self.count += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"Attributes": {}}


NO_SLEEP = RetryPolicy(sleep=lambda _: None)


def test_a_write_whose_response_was_lost_to_tls_is_not_sent_again():
    # Given a write whose first attempt fails with SSLError (the response was lost after sending)
    call = Calls(bc.SSLError(endpoint_url="https://x", error=u3.SSLError("bad record mac")))
    # When it is attempted
    attempted = attempt_write(call, NO_SLEEP)
    # Then it is not sent again, and its outcome is reported unknown for the caller to resolve
    assert (call.count, attempted.effect) == (1, Effect.UNKNOWN)


def test_a_write_whose_response_cannot_be_parsed_is_unknown_not_an_escaped_error():
    # Given a write whose response arrived but could not be parsed (not a BotoCoreError)
    call = Calls(ResponseParserError("garbled"))
    # When it is attempted
    attempted = attempt_write(call, NO_SLEEP)
    # Then its outcome is unknown (to be resolved), not an exception out of the write
    assert (call.count, attempted.effect) == (1, Effect.UNKNOWN)


def test_a_write_that_could_not_connect_is_sent_again():
    # Given a write whose first attempt could not connect (nothing was sent)
    call = Calls(bc.EndpointConnectionError(endpoint_url="https://x"))
    # When it is attempted
    attempted = attempt_write(call, NO_SLEEP)
    # Then it is tried again, and applies
    assert (call.count, attempted.applied) == (2, True)
