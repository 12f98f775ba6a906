"""Log lines of the local gateway and issuer keep what was asked and lose every secret value."""

from __future__ import annotations

import logging

import pytest

from localrun.gateway.redaction import RedactSecrets, redact_text

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "GET /a?limit=5&access_token=s1&ID_TOKEN=s2&Code=s3&client_secret=s4&password=s5&token=s6 -> 200",
            "GET /a?limit=5&access_token=[REDACTED]&ID_TOKEN=[REDACTED]&Code=[REDACTED]"
            "&client_secret=[REDACTED]&password=[REDACTED]&token=[REDACTED] -> 200",
        ),
        (
            '"GET /a?X-Amz-Security-Token=s1&access%5Ftoken=s2&zipcode=75001 HTTP/1.1" 200 -',
            '"GET /a?X-Amz-Security-Token=[REDACTED]&access%5Ftoken=[REDACTED]&zipcode=75001 HTTP/1.1" 200 -',
        ),
        ("Authorization: Bearer s1", "Authorization: [REDACTED]"),
        (
            "{'authorization': 'AWS4-HMAC-SHA256 s1', 'host': 'h'}",
            "{'authorization': '[REDACTED]', 'host': 'h'}",
        ),
        (
            "[('X-Amz-Security-Token', 's1'), ('Host', 'h')]",
            "[('X-Amz-Security-Token', '[REDACTED]'), ('Host', 'h')]",
        ),
        (f"refused {JWT} at /a", "refused [REDACTED] at /a"),
    ],
)
def test_secret_values_are_replaced_and_the_rest_kept(line: str, expected: str) -> None:
    assert redact_text(line) == expected


def test_the_filter_rewrites_a_record_with_its_arguments_merged() -> None:
    # Given a record whose secret is in an argument, not in the format
    record = logging.LogRecord(
        "localrun.http", logging.INFO, __file__, 1, "%s %s", ("GET", "/a?token=s1"), None
    )

    # When the filter sees it
    kept = RedactSecrets().filter(record)

    # Then it is kept, without the secret
    assert kept
    assert record.getMessage() == "GET /a?token=[REDACTED]"
