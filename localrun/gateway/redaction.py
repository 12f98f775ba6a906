"""Secrets kept out of the local gateway's and issuer's log lines.

Request lines carry tokens in query strings (`?access_token=...`, OAuth's `code`, a presigned
URL's `X-Amz-Signature`), and a header or an error may quote an `Authorization` value. Local logs
end up in terminals, CI output and bug reports, so every line those loggers write goes through
`RedactSecrets` first: values of secret-looking query parameters, of `Authorization` and
`X-Amz-Security-Token`, and anything shaped like a JWT become `[REDACTED]`. The rest of the line
(path, other parameters, status) stays, so the log still says what was asked.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

REDACTED = "[REDACTED]"

# A parameter is secret if its name is, or ends in `_`/`-` and, one of these words (any case):
# access_token, id_token, token, X-Amz-Security-Token, client_secret, password, code, api_key...
_SECRET_NAME = re.compile(r"(?:^|[_-])(?:token|secret|password|passwd|code|signature|api[_-]?key)$", re.I)
_QUERY = re.compile(r"\?([^\s\"'#]*)")
# A header as a log line would show it: `Name: value`, `'name': 'value'` or `('Name', 'value')`.
_SECRET_HEADER = re.compile(
    r"(?i)\b(authorization|x-amz-security-token)([\"']?\s*[:,]\s*[\"']?)(?!\[REDACTED\])[^\"'\r\n]+"
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


def is_secret_parameter(name: str) -> bool:
    return _SECRET_NAME.search(unquote_plus(name).strip()) is not None


def redact_query(query: str) -> str:
    """`a=1&access_token=x` -> `a=1&access_token=[REDACTED]` (names and order kept)."""
    pieces = []
    for piece in query.split("&"):
        name, separator, _ = piece.partition("=")
        pieces.append(f"{name}={REDACTED}" if separator and is_secret_parameter(name) else piece)
    return "&".join(pieces)


def redact_text(text: str) -> str:
    """A log line with every secret value it quotes replaced."""
    text = _QUERY.sub(lambda match: "?" + redact_query(match.group(1)), text)
    text = _SECRET_HEADER.sub(lambda match: match.group(1) + match.group(2) + REDACTED, text)
    return _JWT.sub(REDACTED, text)


class RedactSecrets(logging.Filter):
    """Rewrites each record's message, arguments merged in, without its secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
