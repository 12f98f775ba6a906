"""Credentials for the end-to-end suite: a bearer token for each request, like a real client's.

- local target: tokens from the embedded runtime's local OIDC issuer, for any account;
- url/stack targets: `HC_OPERATOR_TOKEN` (a token with the operator scope) and
  `HC_TOKEN_COMMAND`, a command that prints a tenant token for the account in `{account}`
  (e.g. a script that asks your identity provider; against `make dev`:
  `.venv/bin/hybrid-counter-token --account {account}`);

`for_request()` picks what a well-behaved client sends: the operator token to set a limit,
the path's account's tenant token otherwise, nothing for `/openapi.json`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

import pytest

ACCOUNT_PATH = re.compile(r"^/accounts/([^/?]+)")
OPERATOR_SCOPE = "hybrid-counter/operator"
ACCOUNT_CLAIM = "account_id"


@dataclass
class Tokens:
    tenant: Callable[[str], str]  # account -> token
    operator: Callable[[], str]
    _cache: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tenant_token(self, account: str) -> str:
        with self._lock:
            if account not in self._cache:
                self._cache[account] = self.tenant(account)
            return self._cache[account]

    def for_request(self, method: str, path: str) -> dict[str, str]:
        """Headers of a caller allowed to make this request (none for the public routes)."""
        match = ACCOUNT_PATH.match(path)
        if match is None:
            return {}
        if method.upper() == "PUT" and path.split("?", maxsplit=1)[0].endswith("/limit"):
            return bearer(self.operator())
        return bearer(self.tenant_token(unquote(match.group(1))))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def local_tokens(issuer) -> Tokens:
    return Tokens(
        tenant=lambda account: issuer.mint({ACCOUNT_CLAIM: account}),
        operator=lambda: issuer.mint({}, [OPERATOR_SCOPE]),
    )


def tokens_from_environment() -> Tokens:
    command = os.environ.get("HC_TOKEN_COMMAND")
    operator = os.environ.get("HC_OPERATOR_TOKEN")

    def tenant(account: str) -> str:
        if not command:
            pytest.skip("HC_TOKEN_COMMAND is not set: no tenant tokens for this target")
        argv = [part.replace("{account}", account) for part in shlex.split(command)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()

    def operator_token() -> str:
        if not operator:
            pytest.skip("HC_OPERATOR_TOKEN is not set")
        return operator

    return Tokens(tenant=tenant, operator=operator_token)
