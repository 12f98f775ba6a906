"""What an account uses of its limits, per kind and in units, and what a dry run answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hybrid_counter.counters import CounterState, Judged


@dataclass(frozen=True)
class KindUsage:
    kind: str
    limit: int
    limit_source: str  # "override" | "plan"
    best_effort: int
    eventual: int
    org: OrgRoom | None = None  # the account's organization's room for the kind, if it has one
    held: int = 0  # units of holds not confirmed yet (counted in ``used`` like any)

    @classmethod
    def of(cls, kind: str, state: CounterState, judged: Judged, org: OrgRoom | None = None) -> KindUsage:
        return cls(kind, judged.limit, judged.source, state.best_effort, state.eventual, org)

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual, 0)

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def to_json(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "limit_source": self.limit_source,
            "best_effort": max(self.best_effort, 0),
            "eventual": max(self.eventual, 0),
            "used": self.used,
            "remaining": self.remaining,
            "held": self.held,
            **({"organization": self.org.to_json()} if self.org is not None else {}),
        }


@dataclass(frozen=True)
class OrgRoom:
    """What an account's organization has left of a kind (shown with the account's usage)."""

    org_id: str
    limit: int
    limit_source: str
    used: int

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def to_json(self) -> dict[str, Any]:
        return {
            "org_id": self.org_id,
            "limit": self.limit,
            "limit_source": self.limit_source,
            "used": self.used,
            "remaining": self.remaining,
        }


@dataclass(frozen=True)
class TopAccount:
    account_id: str
    used: int  # its counted use (eventual: the stream path's, a few seconds behind)

    def to_json(self) -> dict[str, Any]:
        return {"account_id": self.account_id, "used": self.used}


@dataclass(frozen=True)
class OrgKindUsage:
    kind: str
    limit: int
    limit_source: str
    best_effort: int
    eventual: int
    top: tuple[TopAccount, ...] = ()

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "limit_source": self.limit_source,
            "best_effort": max(self.best_effort, 0),
            "eventual": max(self.eventual, 0),
            "used": self.used,
            "remaining": max(0, self.limit - self.used),
            "top_accounts": [account.to_json() for account in self.top],
        }


@dataclass(frozen=True)
class OrgUsage:
    org_id: str
    plan_id: str
    members: int
    kinds: dict[str, OrgKindUsage] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "org_id": self.org_id,
            "plan_id": self.plan_id,
            "members": self.members,
            "kinds": {kind: usage.to_json() for kind, usage in sorted(self.kinds.items())},
        }


@dataclass(frozen=True)
class Usage:
    """An account's usage. The top-level fields are always the default kind's (the routes without
    a kind, and their callers, read those): on a plan that does not list it, and with no override
    or use of it, they say limit 0, used 0, remaining 0, which is what a create on those routes
    would meet. ``kinds`` holds every kind the plan lists, an override names, or the account has
    used (the default kind only on those same terms)."""

    account_id: str
    limit: int
    best_effort: int
    eventual: int
    plan_id: str = "default"
    kinds: dict[str, KindUsage] = field(default_factory=dict)
    org_id: str | None = None  # the organization the account belongs to

    @property
    def used(self) -> int:
        return max(self.best_effort, self.eventual, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "account_id": self.account_id,
            "plan_id": self.plan_id,
            **({"org_id": self.org_id} if self.org_id is not None else {}),
            "limit": self.limit,
            "best_effort": max(self.best_effort, 0),
            "eventual": max(self.eventual, 0),
            "used": self.used,
            "remaining": max(0, self.limit - self.used),
            "kinds": {kind: usage.to_json() for kind, usage in sorted(self.kinds.items())},
        }


@dataclass(frozen=True)
class WouldAdmit:
    """A dry run's answer: would the request be admitted now (nothing was written)."""

    kind: str
    units: int  # what the request would add (a resize: the difference; a repeated PUT: 0)
    limit: int
    used: int
    would_admit: bool
    # a member's: its organization's level (the create is judged by both: design.md §10)
    organization: OrgAnswer | None = None
    org_first: bool = False  # (not shown) judged at its organization first: a member's grow
    account_admits: bool = (
        True  # (not shown) a member's: its account's verdict, its own expired holds counted
    )

    @property
    def scope(self) -> str:
        """Which level would refuse it, as the request judges: a create at its account first, a
        member's grow at its organization first (review 75: its dry run named the account where
        the PATCH's 409 named the organization)."""
        if not self.would_admit and self.organization is not None and self.organization.would_admit is False:
            return "organization" if self.account_admits or self.org_first else "account"
        return "account"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "would_admit": self.would_admit,
            "kind": self.kind,
            "units": self.units,
            "limit": self.limit,
            "used": self.used,
            "remaining": max(0, self.limit - self.used),
        }
        if not self.would_admit:
            body["scope"] = self.scope
        if self.organization is not None:
            body["organization"] = self.organization.to_json()
        return body


@dataclass(frozen=True)
class OrgAnswer:
    """A dry run's answer at the member's organization."""

    org_id: str
    limit: int
    used: int
    would_admit: bool
    holds: bool | None = None  # a hold was ever admitted at it (not shown: whether to look for expired ones)
    hold_keys: int | None = (
        None  # (not shown) the OrgHoldIndex keys its holds are under (org_level.hold_keys)
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "org_id": self.org_id,
            "would_admit": self.would_admit,
            "limit": self.limit,
            "used": self.used,
            "remaining": max(0, self.limit - self.used),
        }
