"""Typed results: frozen dataclasses read from the API's JSON.

Dataclasses rather than pydantic models: the client's only dependency stays httpx, so a service
embedding it does not have to agree with it on a pydantic major version, and the bodies were
already validated by the API. Each `from_json` reads the fields it knows, checks their JSON types
(a wrong one raises `ValueError`, turned into `UnexpectedResponse` by the client) and ignores
fields it does not know, so a newer API that adds a field does not break an older client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

RESOURCE_FIELDS = frozenset(
    {"account_id", "kind", "resource_id", "name", "units", "created_at", "held", "expires_at"}
)


@dataclass(frozen=True, slots=True)
class Page[T]:
    """One page of a listing; `next_token` resumes after it (None: it was the last)."""

    items: list[T]
    next_token: str | None


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource. `fields` holds the caller's own fields, stored and returned as given.

    `created` says what the request that returned it did: True, it created it (201); False, it
    existed already with this very body (an idempotent PUT's retry, 200); None for reads.

    `held`: a hold not confirmed yet (a create with `hold_seconds`): its units are released at
    `expires_at` (ISO 8601 UTC) unless it is confirmed (`confirm`) before. A confirmed or plain
    resource (or any from a stack from before holds) has `held` False and `expires_at` None.
    """

    account_id: str
    kind: str
    resource_id: str
    name: str
    units: int
    created_at: str
    fields: dict[str, Any] = field(default_factory=dict)
    created: bool | None = None
    held: bool = False
    expires_at: str | None = None

    @classmethod
    def from_json(cls, data: object, *, created: bool | None = None) -> Resource:
        body = _object(data)
        return cls(
            account_id=_str(body, "account_id"),
            kind=_str(body, "kind"),
            resource_id=_str(body, "resource_id"),
            name=_str(body, "name"),
            units=_int(body, "units"),
            created_at=_str(body, "created_at"),
            fields={key: value for key, value in body.items() if key not in RESOURCE_FIELDS},
            created=created,
            held=body.get("held") is True,
            expires_at=_optional_str(body, "expires_at"),
        )


@dataclass(frozen=True, slots=True)
class OrgRoom:
    """What the account's organization has left of a kind (in a member's usage): a create needs
    room here as well as under the account's own limit."""

    org_id: str
    limit: int
    limit_source: str  # "override" (the organization's own) or "plan"
    used: int
    remaining: int

    @classmethod
    def from_json(cls, data: object) -> OrgRoom:
        body = _object(data)
        return cls(
            org_id=_str(body, "org_id"),
            limit=_int(body, "limit"),
            limit_source=_str(body, "limit_source"),
            used=_int(body, "used"),
            remaining=_int(body, "remaining"),
        )


@dataclass(frozen=True, slots=True)
class KindUsage:
    """An account's use of one kind, in units. `used` is max(best_effort, eventual).
    `organization`: its organization's room for the kind (None: the account is in none).
    `held`: units of holds not confirmed yet, counted in `used` like any (0 from a stack from
    before holds)."""

    limit: int
    limit_source: str  # "override" (the account's own) or "plan"
    best_effort: int
    eventual: int
    used: int
    remaining: int
    organization: OrgRoom | None = None
    held: int = 0

    @classmethod
    def from_json(cls, data: object) -> KindUsage:
        body = _object(data)
        room = body.get("organization")
        return cls(
            limit=_int(body, "limit"),
            limit_source=_str(body, "limit_source"),
            best_effort=_int(body, "best_effort"),
            eventual=_int(body, "eventual"),
            used=_int(body, "used"),
            remaining=_int(body, "remaining"),
            organization=None if room is None else OrgRoom.from_json(room),
            held=_int(body, "held") if "held" in body else 0,
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """An account's usage. The top-level numbers are the stack's default kind's (what the
    routes without a kind act on), also when its plan lacks that kind (then 0 of 0); `kinds` has
    every kind its plan lists, an override names, or it has used (the default kind only on those
    terms too). `org_id`: the organization it belongs to (None: none)."""

    account_id: str
    plan_id: str
    limit: int
    best_effort: int
    eventual: int
    used: int
    remaining: int
    kinds: dict[str, KindUsage] = field(default_factory=dict)
    org_id: str | None = None

    @classmethod
    def from_json(cls, data: object) -> Usage:
        body = _object(data)
        kinds = _object(body.get("kinds", {}))
        return cls(
            account_id=_str(body, "account_id"),
            plan_id=str(body.get("plan_id", "default")),
            limit=_int(body, "limit"),
            best_effort=_int(body, "best_effort"),
            eventual=_int(body, "eventual"),
            used=_int(body, "used"),
            remaining=_int(body, "remaining"),
            kinds={str(kind): KindUsage.from_json(usage) for kind, usage in kinds.items()},
            org_id=_optional_str(body, "org_id"),
        )


@dataclass(frozen=True, slots=True)
class WouldAdmit:
    """A dry run's answer: would the request be admitted now? Nothing was written, and a real
    request a moment later may be judged otherwise (others create and delete meanwhile).

    `units` is what the request would add: a create's units, a resize's difference (negative
    when shrinking), 0 for a PUT that would repeat an existing create."""

    would_admit: bool
    kind: str
    units: int
    limit: int
    used: int
    remaining: int
    # which level would refuse it ("account" or "organization"); None when it would be admitted
    scope: str | None = None
    organization: WouldAdmitAtOrg | None = None  # a member's: its organization's answer

    @classmethod
    def from_json(cls, data: object) -> WouldAdmit:
        body = _object(data)
        admit = body.get("would_admit")
        if not isinstance(admit, bool):
            raise TypeError("would_admit is not a boolean")
        scope = body.get("scope")
        org = body.get("organization")
        return cls(
            would_admit=admit,
            kind=_str(body, "kind"),
            units=_int(body, "units"),
            limit=_int(body, "limit"),
            used=_int(body, "used"),
            remaining=_int(body, "remaining"),
            scope=scope if isinstance(scope, str) else None,
            organization=None if org is None else WouldAdmitAtOrg.from_json(org),
        )


@dataclass(frozen=True, slots=True)
class WouldAdmitAtOrg:
    """A member's dry run at its organization."""

    org_id: str
    would_admit: bool
    limit: int
    used: int
    remaining: int

    @classmethod
    def from_json(cls, data: object) -> WouldAdmitAtOrg:
        body = _object(data)
        admit = body.get("would_admit")
        if not isinstance(admit, bool):
            raise TypeError("would_admit is not a boolean")
        return cls(
            org_id=_str(body, "org_id"),
            would_admit=admit,
            limit=_int(body, "limit"),
            used=_int(body, "used"),
            remaining=_int(body, "remaining"),
        )


@dataclass(frozen=True, slots=True)
class Override:
    """An account's own limit for a kind (`kind` is None for the legacy `set_limit` answer,
    which acts on the stack's default kind and does not name it)."""

    account_id: str
    limit: int
    kind: str | None = None

    @classmethod
    def from_json(cls, data: object) -> Override:
        body = _object(data)
        kind = body.get("kind")
        return cls(_str(body, "account_id"), _int(body, "limit"), kind if isinstance(kind, str) else None)


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan: a limit per kind (a kind it does not list has limit 0 for its accounts)."""

    plan_id: str
    limits: dict[str, int]

    @classmethod
    def from_json(cls, data: object) -> Plan:
        body = _object(data)
        limits = _object(body.get("limits"))
        return cls(_str(body, "plan_id"), {str(kind): _int(limits, kind) for kind in limits})


@dataclass(frozen=True, slots=True)
class AccountPlan:
    account_id: str
    plan_id: str

    @classmethod
    def from_json(cls, data: object) -> AccountPlan:
        body = _object(data)
        return cls(_str(body, "account_id"), _str(body, "plan_id"))


@dataclass(frozen=True, slots=True)
class Org:
    """An organization: its plan and how many member accounts it has. `created` says what the
    request that returned it did (`put_org`: True, it created it; False, it existed); None for
    reads."""

    org_id: str
    plan_id: str
    members: int
    created_at: str
    created: bool | None = None

    @classmethod
    def from_json(cls, data: object, *, created: bool | None = None) -> Org:
        body = _object(data)
        return cls(
            _str(body, "org_id"),
            _str(body, "plan_id"),
            _int(body, "members"),
            _str(body, "created_at"),
            created,
        )


@dataclass(frozen=True, slots=True)
class OrgOverride:
    """An organization's own limit for a kind."""

    org_id: str
    kind: str
    limit: int

    @classmethod
    def from_json(cls, data: object) -> OrgOverride:
        body = _object(data)
        return cls(_str(body, "org_id"), _str(body, "kind"), _int(body, "limit"))


@dataclass(frozen=True, slots=True)
class Membership:
    """An account in an organization. `joined`: True, this request made it a member (201);
    False, it already was one (200)."""

    org_id: str
    account_id: str
    joined: bool

    @classmethod
    def from_json(cls, data: object, *, joined: bool) -> Membership:
        body = _object(data)
        return cls(_str(body, "org_id"), _str(body, "account_id"), joined)


@dataclass(frozen=True, slots=True)
class TopAccount:
    """A member and its counted use of a kind (the stream path's count: seconds behind)."""

    account_id: str
    used: int

    @classmethod
    def from_json(cls, data: object) -> TopAccount:
        body = _object(data)
        return cls(_str(body, "account_id"), _int(body, "used"))


@dataclass(frozen=True, slots=True)
class OrgKindUsage:
    """An organization's use of one kind across its members, and the members that use most."""

    limit: int
    limit_source: str  # "override" (the organization's own) or "plan"
    best_effort: int
    eventual: int
    used: int
    remaining: int
    top_accounts: list[TopAccount] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: object) -> OrgKindUsage:
        body = _object(data)
        top = body.get("top_accounts", [])
        if not isinstance(top, list):
            raise TypeError("top_accounts is not a list")
        return cls(
            limit=_int(body, "limit"),
            limit_source=_str(body, "limit_source"),
            best_effort=_int(body, "best_effort"),
            eventual=_int(body, "eventual"),
            used=_int(body, "used"),
            remaining=_int(body, "remaining"),
            top_accounts=[TopAccount.from_json(entry) for entry in top],
        )


@dataclass(frozen=True, slots=True)
class OrgUsage:
    """An organization's usage: per kind its plan lists, an override names, or its members used."""

    org_id: str
    plan_id: str
    members: int
    kinds: dict[str, OrgKindUsage] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: object) -> OrgUsage:
        body = _object(data)
        kinds = _object(body.get("kinds", {}))
        return cls(
            org_id=_str(body, "org_id"),
            plan_id=_str(body, "plan_id"),
            members=_int(body, "members"),
            kinds={str(kind): OrgKindUsage.from_json(usage) for kind, usage in kinds.items()},
        )


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One recorded limit change, newest first in history.

    `what`: "override", "override_removed", "plan_limits", "account_plan" or "org_plan". `old`/`new`:
    an override's limit (int or None), a plan's limits ({kind: limit}), or an account's or an
    organization's plan id. `org_id` is set on an organization's changes (its overrides and plan).
    `by`: the token's subject or the IAM principal that made it; `at`: ISO 8601 UTC."""

    change_id: str
    at: str
    by: str
    what: str
    old: Any
    new: Any
    force: bool = False
    account_id: str | None = None
    kind: str | None = None
    plan_id: str | None = None
    org_id: str | None = None

    @classmethod
    def from_json(cls, data: object) -> ChangeRecord:
        body = _object(data)
        return cls(
            change_id=_str(body, "change_id"),
            at=_str(body, "at"),
            by=_str(body, "by"),
            what=_str(body, "what"),
            old=body.get("old"),
            new=body.get("new"),
            force=body.get("force") is True,
            account_id=_optional_str(body, "account_id"),
            kind=_optional_str(body, "kind"),
            plan_id=_optional_str(body, "plan_id"),
            org_id=_optional_str(body, "org_id"),
        )


@dataclass(frozen=True, slots=True)
class OverRow:
    """An account's (or, `scope` "organization", an organization's) kind at or over a usage
    threshold (`GET /usage/over`): `threshold` is the highest reached; `used` and `limit` are those
    of the crossing, at `since` (ISO 8601 UTC), when it became the highest reached."""

    scope: str
    kind: str
    threshold: int
    used: int
    limit: int
    since: str
    account_id: str | None = None
    org_id: str | None = None

    @classmethod
    def from_json(cls, data: object) -> OverRow:
        body = _object(data)
        return cls(
            scope=_str(body, "scope"),
            kind=_str(body, "kind"),
            threshold=_int(body, "threshold"),
            used=_int(body, "used"),
            limit=_int(body, "limit"),
            since=_str(body, "since"),
            account_id=_optional_str(body, "account_id"),
            org_id=_optional_str(body, "org_id"),
        )


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event published on the bus (`GET /events`, operators): `event_id` is its
    `detail.event_id` (what consumers dedupe on), `detail_type` its DetailType ("Quota Threshold
    Reached", "Quota Threshold Cleared", "Quota Limit Changed"), `time` when it was published (ISO
    8601 UTC), `detail` its detail as EventBridge carried it."""

    event_id: str
    detail_type: str
    time: str
    detail: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: object) -> LoggedEvent:
        body = _object(data)
        return cls(
            event_id=_str(body, "event_id"),
            detail_type=_str(body, "detail_type"),
            time=_str(body, "time"),
            detail=_object(body.get("detail")),
        )


def page_from_json[T](data: object, item: Callable[[object], T]) -> Page[T]:
    """`{"items": [...], "next_token": ...}` with each item read by `item`."""
    body = _object(data)
    items = body.get("items")
    if not isinstance(items, list):
        raise TypeError("items is not a list")
    token = body.get("next_token")
    if token is not None and not isinstance(token, str):
        raise TypeError("next_token is not a string")
    return Page([item(entry) for entry in items], token or None)


def _object(data: object) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise TypeError("expected a JSON object")
    return data


def _str(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def _optional_str(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def _int(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} is not an integer")
    return value
