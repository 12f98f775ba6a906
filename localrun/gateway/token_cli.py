"""`hybrid-counter-token`: a token from the running `make dev`'s local issuer, for curl and scripts.

    TOKEN=$(.venv/bin/hybrid-counter-token --account acme)       # a tenant of account acme
    OP=$(.venv/bin/hybrid-counter-token --operator)              # the operator scope
    ADMIN=$(.venv/bin/hybrid-counter-token --org widgets)        # administrator of organization widgets
    curl -H "Authorization: Bearer $TOKEN" localhost:3000/accounts/acme/usage

It reads `.local/runtime.json` (written by `make dev`) for the issuer's token endpoint and the
template's AccountClaim, OperatorScope and OrgClaim, and asks the issuer for a token (OAuth 2.0
client credentials), as a client of a real identity provider would. An organization
administrator's token carries the OrgClaim claim naming the organization, and no scope: the claim
alone makes its administrator (api/access.py). Also here: what `make dev` prints about
authentication (from the description the runtime gives, ``LocalRuntime.auth_description``).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from localrun.gateway.sigv4_authorizer import SERVICE

STATE_FILE = Path(".local/runtime.json")
DEFAULT_ACCOUNT_CLAIM = "account_id"
DEFAULT_OPERATOR_SCOPE = "hybrid-counter/operator"
DEFAULT_ORG_CLAIM = "org_id"


def banner_lines(description: dict[str, Any], api_url: str) -> list[str]:
    mode = description["mode"]
    if mode == "jwt":
        lines = [
            f"  auth            JWT, issuer {description['issuer']}, audience {description['audiences'][0]}"
        ]
        if description.get("token_endpoint"):
            lines += [
                "  tokens          TOKEN=$(.venv/bin/hybrid-counter-token --account acme)   # tenant of acme",
                "                  OP=$(.venv/bin/hybrid-counter-token --operator)          # operator scope",
                "                  ADMIN=$(.venv/bin/hybrid-counter-token --org widgets)    # org admin of widgets",
                f'                  curl -H "Authorization: Bearer $TOKEN" {api_url}/accounts/acme/usage',
                f"  console         {api_url}/console   (the local issuer signs in any user name, as an operator)",
            ]
        return lines
    if mode == "iam":
        user = f"{description['access_key_id']}:{description['secret_access_key']}"
        return [
            f"  auth            IAM (SigV4, service {SERVICE}, region {description['region']})",
            f'                  curl --aws-sigv4 "aws:amz:{description["region"]}:{SERVICE}" --user {user} \\',
            f"                       {api_url}/accounts/acme/usage",
        ]
    return ["  auth            none"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hybrid-counter-token", description="Mint a token from the running `make dev`'s local issuer."
    )
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--account", help="a tenant token for this account (the AccountClaim claim)")
    who.add_argument("--operator", action="store_true", help="a token with the operator scope")
    who.add_argument(
        "--org",
        metavar="ORG_ID",
        help="an organization administrator's token (the OrgClaim claim naming it; no scope needed)",
    )
    parser.add_argument("--scope", action="append", default=[], help="an extra scope (repeatable)")
    parser.add_argument(
        "--claim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra claim (a string; not iss, aud, exp, nbf, iat, jti or scope, which the issuer sets)",
    )
    parser.add_argument("--expires-in", type=int, default=3600, help="lifetime in seconds (default 3600)")
    parser.add_argument(
        "--state", type=Path, default=STATE_FILE, help=f"make dev's state file ({STATE_FILE})"
    )
    args = parser.parse_args(argv)
    try:
        auth = json.loads(args.state.read_text())["auth"]
    except (OSError, ValueError, KeyError):
        print(f"hybrid-counter-token: no running `make dev` found ({args.state})", file=sys.stderr)
        return 1
    if auth["mode"] != "jwt" or not auth.get("token_endpoint"):
        print(
            f"hybrid-counter-token: the running API uses {auth['mode']} authorization without the local issuer; "
            "see its banner for how to call it",
            file=sys.stderr,
        )
        return 1
    claims: dict[str, str] = dict(item.split("=", 1) for item in args.claim if "=" in item)
    scopes = list(args.scope)
    if args.operator:
        scopes.append(auth["operator_scope"])
        claims.setdefault("sub", "local-operator")
    elif args.org is not None:
        claims[auth.get("org_claim", DEFAULT_ORG_CLAIM)] = args.org
        claims.setdefault("sub", f"local-org-admin-{args.org}")
    else:
        claims[auth["account_claim"]] = args.account
        claims.setdefault("sub", f"local-tenant-{args.account}")
    form = urllib.parse.urlencode(
        {
            "grant_type": "client_credentials",
            "scope": " ".join(scopes),
            "claims": json.dumps(claims),
            "expires_in": str(args.expires_in),
        }
    ).encode()
    try:
        with urllib.request.urlopen(auth["token_endpoint"], data=form, timeout=10) as response:  # noqa: S310 - our own loopback issuer
            print(json.load(response)["access_token"])
    except urllib.error.HTTPError as refusal:  # e.g. --claim exp=...: the issuer sets exp itself
        print(f"hybrid-counter-token: the local issuer refused: {refusal_reason(refusal)}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
        print(f"hybrid-counter-token: the local issuer did not answer ({error})", file=sys.stderr)
        return 1
    return 0


def refusal_reason(refusal: urllib.error.HTTPError) -> str:
    """The issuer's OAuth error (`error_description`, else `error`), else the HTTP status."""
    try:
        error = json.load(refusal)
        return str(error.get("error_description") or error["error"])
    except (ValueError, KeyError, AttributeError, OSError):
        return f"HTTP {refusal.code}"


if __name__ == "__main__":
    sys.exit(main())
