"""Credentials for the end-to-end suite: a bearer token for each request, like a real client's.

- local target: tokens from the embedded runtime's local OIDC issuer, for any account;
- url/stack targets: `HC_OPERATOR_TOKEN` (a token with the operator scope) and
  `HC_TOKEN_COMMAND`, a command that prints a tenant token for the account in `{account}`
  (e.g. a script that asks your identity provider; against `make dev`:
  `.venv/bin/hybrid-counter-token --account {account}`); `HC_ORG_TOKEN_COMMAND` likewise prints
  an organization administrator's token for the organization in `{org}` (against `make dev`:
  `.venv/bin/hybrid-counter-token --org {org}`);

An organization administrator's token carries the `OrgClaim` claim naming its organization and no
scope at all, as issue 24 words it (and as tenant tokens carry only the `AccountClaim` claim), so
the suite proves that the claim alone is enough.

`for_request()` picks what a well-behaved client sends: the operator token for the operator
routes and the organization reads (the API's own access rules say which), the path's account's
tenant token otherwise, nothing for `/openapi.json`.
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

from hybrid_counter.api.access import ROUTE_ACCESS, Access

ACCOUNT_PATH = re.compile(r"^/accounts/([^/?]+)")
OPERATOR_SCOPE = "hybrid-counter/operator"
ACCOUNT_CLAIM = "account_id"
ORG_CLAIM = "org_id"
# The scope an earlier deployment gave org admins beside the claim: needed by nothing now
ORG_ADMIN_SCOPE = "hybrid-counter/org-admin"


@dataclass
class Tokens:
    tenant: Callable[[str], str]  # account -> token
    operator: Callable[[], str]
    org_admin: Callable[[str], str] | None = None  # organization -> its administrator's token
    _cache: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tenant_token(self, account: str) -> str:
        with self._lock:
            if account not in self._cache:
                self._cache[account] = self.tenant(account)
            return self._cache[account]

    def org_admin_token(self, org: str) -> str:
        if self.org_admin is None:
            pytest.skip("no organization administrator's tokens for this target (HC_ORG_TOKEN_COMMAND)")
        return self.org_admin(org)

    def for_request(self, method: str, path: str) -> dict[str, str]:
        """Headers of a caller allowed to make this request (none for the public routes)."""
        access = access_of(method, path)
        if access in (Access.OPERATOR, Access.ORG_READER):
            return bearer(self.operator())
        match = ACCOUNT_PATH.match(path)
        if match is None or access is Access.PUBLIC:
            return {}
        return bearer(self.tenant_token(unquote(match.group(1))))


def access_of(method: str, path: str) -> Access | None:
    """The access rule of the route a concrete path matches (None: no route)."""
    bare = path.split("?", maxsplit=1)[0]
    for (route_method, template), access in ROUTE_ACCESS.items():
        pattern = "^" + re.sub(r"\\{[a-z_]+\\}", "[^/]+", re.escape(template)) + "$"
        if route_method == method.upper() and re.match(pattern, bare):
            return access
    return None


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def local_tokens(issuer) -> Tokens:
    return Tokens(
        tenant=lambda account: issuer.mint({ACCOUNT_CLAIM: account}),
        operator=lambda: issuer.mint({}, [OPERATOR_SCOPE]),
        org_admin=lambda org: issuer.mint({ORG_CLAIM: org, "sub": f"admin-of-{org}"}),
    )


def tokens_from_environment() -> Tokens:
    command = os.environ.get("HC_TOKEN_COMMAND")
    operator = os.environ.get("HC_OPERATOR_TOKEN")
    org_command = os.environ.get("HC_ORG_TOKEN_COMMAND")

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

    def org_admin(org: str) -> str:
        if not org_command:
            pytest.skip("HC_ORG_TOKEN_COMMAND is not set: no organization administrator's tokens")
        argv = [part.replace("{org}", org) for part in shlex.split(org_command)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()

    return Tokens(tenant=tenant, operator=operator_token, org_admin=org_admin)
