"""A resource item and its states.

``state`` is one of:

- ``pending``: written by a create that has not (yet) been admitted. Invisible to readers and
  deletes; holds a slot only once its admission has applied. A pending item that nobody finishes
  (its create crashed, or was refused and could not roll back) expires by TTL (``expires_at``)
  or is adopted by a retried PUT of the same id after the grace period.
- ``live``: admitted and visible.
- ``deleting``: claimed by one delete (``delete_request``), still visible, still holding its slot
  until that delete's release is applied, after which the item is deleted (by the delete, or by
  the stream path if the delete could not finish). A member's (``org``) claim is released at
  its account first, then at its organization: once its account's release is known to have
  applied (``account_released``, noted by the stream path from that release's record) it is
  no longer visible, and holds its units at its organization only, until that release too
  (design.md §10.4).

``org`` names the organization whose counter holds the resource's units as well as its account's
(orgs/; the levels of its admission, recorded before it), ``org_counted`` says the stream path
has counted it there (exactly once, as ``counter_processed`` for the account), ``undoing`` marks a
create refused at the account's level whose organization's admission is being undone.

``kind`` is the kind of resource it is, ``units`` how many units of that kind it holds (1 unless
the create said otherwise; a PATCH changes it), ``created_units`` what its create asked for. ``counter_processed`` says the stream path has counted it into
``eventual`` (exactly once: the flag flips in the same transaction); a counted resource
contributes its ``units`` there. While a resize is in flight, ``resize_request`` (with
``resize_from``, ``resize_to``, ``resizing_since``) names the one request that may move its
counters (resize.py). ``pending_shard``/``pending_since`` are set only on failure paths (the
sparse PendingIndex the sweeper reads). A hold (holds.py) has ``hold_until`` (epoch seconds) and
``hold_account`` (the sparse HoldIndex's keys) until it is confirmed, and a member's hold
``hold_org`` (with ``hold_until``, the sparse OrgHoldIndex's keys: one of its organization's,
``keys.org_hold_key``), removed with ``hold_account``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hybrid_counter.keys import DEFAULT_KIND, account_pk, iso_utc, org_hold_key, pending_shard, resource_sk

PENDING = "pending"
LIVE = "live"
DELETING = "deleting"
VISIBLE = frozenset({LIVE, DELETING})
# A pending item outlives every queue that could still need it (the operator queue keeps 14 days).
PENDING_TTL_SECONDS = 15 * 24 * 3600


@dataclass(frozen=True)
class Resource:
    account_id: str
    resource_id: str
    name: str
    created_at: str
    extra: dict[str, Any] = field(default_factory=dict)
    kind: str = DEFAULT_KIND
    units: int = 1
    # The units its create asked for (a PATCH changes ``units``, not what the create was): a
    # repeated PUT is the same request if it repeats these.
    requested_units: int | None = None
    # A hold (holds.py): until when (epoch seconds) it holds its units unless confirmed.
    hold_until: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "account_id": self.account_id,
            "kind": self.kind,
            "resource_id": self.resource_id,
            "name": self.name,
            "units": self.units,
            "created_at": self.created_at,
            "held": self.hold_until is not None,
            **({"expires_at": iso_utc(self.hold_until)} if self.hold_until is not None else {}),
        }


def org_of(item: dict[str, Any]) -> str | None:
    """The organization whose counter holds the resource's units too (None: the account's only)."""
    org = item.get("org", {}).get("S")
    return None if org is None else str(org)


def org_shard(item: dict[str, Any]) -> int:
    """Which of its organization's counter items holds its units (counters/split.py; 0 unless split)."""
    return int(item.get("org_shard", {}).get("N", "0"))


def org_counted(item: dict[str, Any]) -> bool:
    return bool(item.get("org_counted", {}).get("BOOL", False))


def account_released(item: dict[str, Any]) -> bool:
    """A member's claim whose account's release is known to have applied (design.md §10.4)."""
    return bool(item.get("account_released", {}).get("BOOL", False))


def left_to_census(item: dict[str, Any] | None) -> bool:
    """A claim whose owner took it over from a delete that died and could not tell whether that
    delete's release at the account applied: it released nothing itself and left the account's
    level to the census of the range (resources/dead_claims.py), which counts it as holding
    nothing there. Only the owner that wrote it leaves it: a later takeover's claim is not; and
    once a member's is marked ``account_released`` its account's level is settled."""
    return (
        bool(item)
        and state_of(item) == DELETING
        and not account_released(item)  # type: ignore[arg-type]
        and "left_to_census" in item  # type: ignore[operator]
        and item.get("left_to_census") == item.get("delete_request")  # type: ignore[union-attr]
    )


def visible(item: dict[str, Any] | None) -> bool:
    """What a reader sees: live, or claimed by a delete whose account's release is not known to
    have applied and not left to the census (a slot freed at the account, or that a census may
    free at any moment, is gone from the account's resources)."""
    return (
        bool(item)
        and state_of(item) in VISIBLE
        and not account_released(item)  # type: ignore[arg-type]
        and not left_to_census(item)
    )


def state_of(item: dict[str, Any] | None) -> str | None:
    return None if not item else str(item["state"]["S"])


def incarnation_of(item: dict[str, Any]) -> str:
    return str(item["incarnation"]["S"])


def is_counted(item: dict[str, Any]) -> bool:
    return bool(item.get("counter_processed", {}).get("BOOL", False))


def units_of(item: dict[str, Any]) -> int:
    return int(item.get("units", {}).get("N", "1"))


def kind_of(item: dict[str, Any]) -> str:
    return str(item.get("kind", {}).get("S", DEFAULT_KIND))


def resizing(item: dict[str, Any] | None) -> bool:
    return bool(item) and "resize_request" in item  # type: ignore[operator]


def slot_units(item: dict[str, Any]) -> int:
    """The most units the item may hold a slot for: with a resize in flight, whether its
    counters moved yet is not known from the item, so the larger size."""
    resize_to = item.get("resize_to", {}).get("N")
    return max(units_of(item), int(resize_to)) if resize_to is not None else units_of(item)


def since(item: dict[str, Any], attribute: str) -> str:
    return str(item.get(attribute, {}).get("S", ""))


def in_time(started: float, now: float, grace: float) -> bool:
    """Whether a write a process owes by a claim, a lease or a mark it made at ``started`` may
    still be made: within half the grace period, by its own clock. Others take over what is
    older than the grace period, so a process stalled longer could make a write they made too
    (design.md §10.4); the write itself is one attempt of a few seconds at most."""
    return now - started <= grace / 2


def resource_from_item(item: dict[str, Any]) -> Resource:
    return Resource(
        account_id=item["account_id"]["S"],
        resource_id=item["resource_id"]["S"],
        name=item["name"]["S"],
        created_at=item["created_at"]["S"],
        kind=kind_of(item),
        units=units_of(item),
        requested_units=int(item["created_units"]["N"]) if "created_units" in item else None,
        hold_until=hold_until_of(item),
        extra=json.loads(item.get("extra_json", {"S": "{}"})["S"], parse_constant=_non_finite_as_null),
    )


def epoch_number(seconds: float) -> dict[str, str]:
    """A hold's deadline, or a clock compared with one, as a DynamoDB number: one format
    everywhere, since a condition names the deadline by equality (``hold_until = :until``)."""
    return {"N": f"{seconds:.3f}"}


def hold_until_of(item: dict[str, Any]) -> float | None:
    """Until when a hold holds its units unless confirmed (None: not a hold)."""
    until = item.get("hold_until", {}).get("N")
    return None if until is None else float(until)


def _non_finite_as_null(_: str) -> None:
    """Items written before bodies were parsed strictly may hold NaN or +-Infinity in their extra
    fields; they are read as null (as JSON.stringify writes them), so a response is valid JSON."""


def pending_item(
    account_id: str,
    resource_id: str,
    name: str,
    extra: dict[str, Any],
    incarnation: str,
    *,
    now: float,
    kind: str = DEFAULT_KIND,
    units: int = 1,
    org: str | None = None,
    org_shard: int = 0,
    hold_until: float | None = None,
    hold_keys: int = 1,
) -> dict[str, Any]:
    created = iso_utc(now)
    item = {
        "pk": {"S": account_pk(account_id)},
        "sk": {"S": resource_sk(resource_id, kind=kind)},
        "account_id": {"S": account_id},
        "kind": {"S": kind},
        "resource_id": {"S": resource_id},
        "units": {"N": str(units)},
        "created_units": {"N": str(units)},
        "name": {"S": name},
        "extra_json": {"S": json.dumps(extra, separators=(",", ":"), sort_keys=True, allow_nan=False)},
        "created_at": {"S": created},
        "incarnation": {"S": incarnation},
        "state": {"S": PENDING},
        "counter_processed": {"BOOL": False},
        "expires_at": {"N": str(int(now) + PENDING_TTL_SECONDS)},
    }
    if org is not None:  # the levels that hold its units: the account's, and this organization's
        item["org"] = {"S": org}
        item["org_counted"] = {"BOOL": False}
        if org_shard:
            item["org_shard"] = {"N": str(org_shard)}
    if hold_until is not None:  # a hold: in the sparse HoldIndex (its account, its deadline)
        item["hold_until"] = epoch_number(hold_until)
        item["hold_account"] = {"S": account_id}
        if org is not None:  # a member's: in the sparse OrgHoldIndex too (one of its organization's keys)
            item["hold_org"] = {"S": org_hold_key(org, incarnation, hold_keys)}
    return item


def pending_index(
    account_id: str, resource_id: str, now: float, *, kind: str = DEFAULT_KIND
) -> dict[str, Any]:
    """The attribute values that put an item into the sweeper's PendingIndex."""
    return {
        ":pending_shard": {"S": pending_shard(account_id, resource_id, kind=kind)},
        ":pending_since": {"S": iso_utc(now)},
    }
