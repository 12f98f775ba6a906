"""Key scheme of the single table, and the tokens that name one incarnation of a resource.

An account's items share a partition key: one counter item per kind of resource the account
holds (``COUNTER#<kind>``), its resources (``RESOURCE#<kind>#<range>#<id>``), the plan it is on
(``PLAN``), and census requests (``REPAIR#<kind>#<range>``). So every counter of an account is
one Query away (its usage), and each kind has its own counter item: one kind's admissions never
wait on another's, and DynamoDB splits a hot item collection by sort key, so each counter item
gets its own 1,000 write units a second.

A resource's sort key carries its *range*, one of 16 buckets by a hash of its id: ranges are
what a counter item keeps per-range shares and versions for (the recount's fences, see
``counters``), and a range's resources are contiguous, so one range can be read on its own.

Plans live in one partition of their own (``PLANS`` / ``<plan id>``): a handful of small items
that are read through a cache, never per request (``plans/``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

ACCOUNT_PREFIX = "ACCOUNT#"
CONTROL_PREFIX = "CONTROL#"  # the sweeper's saved progress, not an account
# How many organizations were ever created: each one's split counter's epochs start above the last's
ORG_INCARNATIONS_KEY = {"pk": {"S": f"{CONTROL_PREFIX}orgs"}, "sk": {"S": "incarnations"}}
RESOURCE_PREFIX = "RESOURCE#"
COUNTER_PREFIX = "COUNTER#"
REPAIR_PREFIX = "REPAIR#"  # a requested census of one range (recount_requests.py)
PROFILE_SK = "PLAN"  # the account's plan (absent: the plan "default")
EVENT_PREFIX = "EVENT#"  # a threshold crossing's event, until published (governance/thresholds.py)
EXPIRED_PREFIX = "EXPIRED#"  # an expired hold's tombstone (resources/holds.py)
ALERT_PREFIX = "ALERT#"  # a split organization's threshold state for a kind (governance/thresholds.py)
HISTORY_PREFIX = "HISTORY#"  # the history of limit changes (governance/history.py)
CHANGE_PREFIX = "CHANGE#"  # a limit change's record until it is in history (governance/records.py)
PLANS_PK = "PLANS"
ORG_PREFIX = "ORG#"  # an organization: its profile, its counter items, its members (orgs/)
ORG_PROFILE_SK = "PROFILE"
MEMBER_PREFIX = "MEMBER#"
# An account that left the organization, for FORMER_SECONDS: a create of it judged a member before
# it left may still hold units there, which the organization's recount must see (review 37)
FORMER_PREFIX = "FORMER#"
FORMER_SECONDS = 86_400
RANGES = 16
COUNTER_SHARDS = 16
ORG_USAGE_KEYS_PER_SHARD = 4
# The kind the routes without a kind act on, unless the stack's DefaultKind says otherwise.
DEFAULT_KIND = "resources"

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)


# Words the routes use where a kind would stand: GET /accounts/{id}/limits/history is beside
# PUT/DELETE /accounts/{id}/limits/{kind} (and issue 24's /orgs/{id}/limits/history beside
# /orgs/{id}/limits/{kind}). A kind so named could be given an override that GET of the same
# path never shows, so no kind may be named so (tests/unit/test_reserved_kinds.py checks the
# routes against this list).
RESERVED_KINDS = frozenset({"history"})


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.fullmatch(value))


def check_kind(kind: str) -> str:
    """The kind, unless it is a reserved word (ValueError naming it). The id pattern is the
    caller's to check (the API's models do)."""
    if kind in RESERVED_KINDS:
        raise ValueError(f"kind '{kind}' is reserved (a route uses the word) and cannot name a kind")
    return kind


def account_pk(account_id: str) -> str:
    return f"{ACCOUNT_PREFIX}{account_id}"


def range_of(resource_id: str) -> str:
    """The resource's range: one hex digit, fixed by its id (every incarnation shares it)."""
    return f"{zlib.crc32(resource_id.encode()) % RANGES:x}"


def all_ranges() -> list[str]:
    return [f"{n:x}" for n in range(RANGES)]


def kind_prefix(kind: str) -> str:
    """Every resource of one kind of an account sorts under this."""
    return f"{RESOURCE_PREFIX}{kind}#"


def range_prefix(range_id: str, *, kind: str = DEFAULT_KIND) -> str:
    return f"{kind_prefix(kind)}{range_id}#"


def resource_sk(resource_id: str, *, kind: str = DEFAULT_KIND) -> str:
    return f"{range_prefix(range_of(resource_id), kind=kind)}{resource_id}"


def counter_sk(kind: str = DEFAULT_KIND) -> str:
    return f"{COUNTER_PREFIX}{kind}"


def repair_sk(range_id: str, *, kind: str = DEFAULT_KIND) -> str:
    return f"{REPAIR_PREFIX}{kind}#{range_id}"


def counter_key(account_id: str, *, kind: str = DEFAULT_KIND) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": counter_sk(kind)}}


def resource_key(account_id: str, resource_id: str, *, kind: str = DEFAULT_KIND) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": resource_sk(resource_id, kind=kind)}}


def profile_key(account_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": PROFILE_SK}}


def plan_key(plan_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": PLANS_PK}, "sk": {"S": plan_id}}


def pending_shard(account_id: str, resource_id: str, *, kind: str = DEFAULT_KIND) -> str:
    """Partition key of the sparse PendingIndex (written only on failure paths, see design.md):
    a hash of the resource, so the index has no fixed set of hot keys whatever writes it. The
    sweeper scans the index instead of querying keys."""
    return f"PENDING#{zlib.crc32(f'{account_id}/{kind}/{resource_id}'.encode()):08x}"


def counter_shard(account_id: str) -> str:
    """Bucket of the sparse CounterIndex that lists every counter item (all kinds of an account
    in one bucket)."""
    return f"COUNTERS#{zlib.crc32(account_id.encode()) % COUNTER_SHARDS:02d}"


def all_counter_shards() -> list[str]:
    return [f"COUNTERS#{n:02d}" for n in range(COUNTER_SHARDS)]


def org_usage_keys(shards: int) -> int:
    """How many OrgUsageIndex keys an organization split over ``shards`` spreads its members'
    counter items over: each count or release of a member moves its item's sort key there (two
    index writes), and one key is one index partition's writes a second, so a split organization
    gets ORG_USAGE_KEYS_PER_SHARD keys a shard; one not split keeps the one key it always had."""
    return 1 if shards <= 1 else ORG_USAGE_KEYS_PER_SHARD * shards


def org_usage_key(org_id: str, kind: str, account_id: str, keys: int = 1) -> str:
    """A member's OrgUsageIndex key: ``<org>#<kind>``, and beyond the first of ``keys`` a
    bucket of the account (``<org>#<kind>#<n>``), so the first is the key written before
    organizations were split over several."""
    bucket = zlib.crc32(account_id.encode()) % max(1, keys)
    return f"{org_id}#{kind}" if bucket == 0 else f"{org_id}#{kind}#{bucket}"


def usage_keys_of(item: Mapping[str, Any]) -> int:
    """An organization's OrgUsageIndex keys, from its item: the most its shards ever asked for
    (``usage_keys``, which set_shards records; one split before it did: as its shards ask)."""
    shards = int(item.get("shards", {}).get("N", "1"))
    return max(int(item.get("usage_keys", {}).get("N", "1")), org_usage_keys(shards))


def all_org_usage_keys(org_id: str, kind: str, keys: int) -> list[str]:
    return [f"{org_id}#{kind}"] + [f"{org_id}#{kind}#{n}" for n in range(1, max(1, keys))]


def org_hold_key(org_id: str, incarnation: str, keys: int = 1) -> str:
    """A member's hold's OrgHoldIndex key: ``<org>``, and beyond the first of ``keys`` (the
    organization's usage keys: 4 S for one split over S) a bucket of the hold's incarnation
    (``<org>#<n>``). Each hold writes its key about three times (put, made live, confirmed or
    expired), so one key a split organization would be one index partition's 1,000 writes a
    second against S x 1,000 admissions; the first is the key written before holds were spread,
    and the incarnation (random) spreads them whatever ids a client picks."""
    bucket = zlib.crc32(incarnation.encode()) % max(1, keys)
    return org_id if bucket == 0 else f"{org_id}#{bucket}"


def all_org_hold_keys(org_id: str, keys: int) -> list[str]:
    return [org_id] + [f"{org_id}#{n}" for n in range(1, max(1, keys))]


def iso_utc(epoch_seconds: float) -> str:
    """The one timestamp format of the items: the sweeper compares these as strings."""
    return (
        datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def epoch_of(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def parse_account_pk(pk: str) -> str:
    if not pk.startswith(ACCOUNT_PREFIX):
        raise ValueError(f"not an account key: {pk!r}")
    return pk[len(ACCOUNT_PREFIX) :]


def parse_resource_sk(sk: str) -> str:
    """The resource id of a resource sort key (``RESOURCE#<kind>#<range>#<id>``)."""
    return parse_kind_resource_sk(sk)[1]


def parse_kind_resource_sk(sk: str) -> tuple[str, str]:
    """(kind, resource id) of a resource sort key."""
    if not sk.startswith(RESOURCE_PREFIX):
        raise ValueError(f"not a resource key: {sk!r}")
    parts = sk[len(RESOURCE_PREFIX) :].split("#")
    if len(parts) != 3:
        raise ValueError(f"not a resource key: {sk!r}")
    kind, range_id, resource_id = parts
    if not is_valid_id(kind) or not is_valid_id(resource_id) or range_id != range_of(resource_id):
        raise ValueError(f"not a resource key: {sk!r}")
    return kind, resource_id


def parse_counter_sk(sk: str) -> str:
    """The kind of a counter item's sort key (``COUNTER#<kind>``)."""
    kind = sk[len(COUNTER_PREFIX) :] if sk.startswith(COUNTER_PREFIX) else ""
    if not is_valid_id(kind):
        raise ValueError(f"not a counter key: {sk!r}")
    return kind


def parse_repair_sk(sk: str) -> tuple[str, str]:
    """(kind, range) of a census request's sort key."""
    kind, sep, range_id = sk[len(REPAIR_PREFIX) :].rpartition("#")
    if not sk.startswith(REPAIR_PREFIX) or not sep or not is_valid_id(kind) or range_id not in all_ranges():
        raise ValueError(f"not a census request key: {sk!r}")
    return kind, range_id


def org_pk(org_id: str) -> str:
    return f"{ORG_PREFIX}{org_id}"


def org_key(org_id: str) -> dict[str, dict[str, str]]:
    """The organization's profile: its plan, its member count."""
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": ORG_PROFILE_SK}}


def org_counter_sk(kind: str, shard: int = 0) -> str:
    return f"{COUNTER_PREFIX}{kind}#{shard:x}"


# An organization's split counter's epochs start at its creation's number times this (a number no
# organization created before had, its ``epoch_base``): above every epoch a deleted one of its id
# reached, unless that one rebased a kind 10**12 times. So a shard's epoch says which creation of
# the organization laid it out (orgs/counters.py of_creation).
EPOCHS_PER_INCARNATION = 10**12


def org_creation_key(org_id: str) -> dict[str, dict[str, str]]:
    """The last ``epoch_base`` an organization of this id was created with. Outside its partition:
    kept when it is deleted, so a creation whose number was drawn before another creation of the
    id (and that one's deletion) is refused rather than made below it (governance/changes.py)."""
    return {"pk": {"S": f"{CONTROL_PREFIX}org#{org_id}"}, "sk": {"S": "creation"}}


def org_counter_key(org_id: str, *, kind: str = DEFAULT_KIND, shard: int = 0) -> dict[str, dict[str, str]]:
    """One of the organization's counter items for a kind (shard 0 of S, orgs/)."""
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": org_counter_sk(kind, shard)}}


def org_alert_key(org_id: str, kind: str) -> dict[str, dict[str, str]]:
    """Which thresholds a split organization's use of a kind has reached (no shard holds it all)."""
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": f"{ALERT_PREFIX}{kind}"}}


REBASE_PREFIX = "REBASE#"


def org_rebase_key(org_id: str, kind: str) -> dict[str, dict[str, str]]:
    """A rebase of the organization's split counter for a kind, while under way (counters/split.py)."""
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": f"{REBASE_PREFIX}{kind}"}}


def member_key(org_id: str, account_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": f"{MEMBER_PREFIX}{account_id}"}}


def former_key(org_id: str, account_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": org_pk(org_id)}, "sk": {"S": f"{FORMER_PREFIX}{account_id}"}}


def parse_org_pk(pk: str) -> str:
    if not pk.startswith(ORG_PREFIX):
        raise ValueError(f"not an organization key: {pk!r}")
    return pk[len(ORG_PREFIX) :]


def parse_org_counter_sk(sk: str) -> tuple[str, int]:
    """(kind, shard) of an organization's counter item's sort key."""
    kind, sep, shard = sk[len(COUNTER_PREFIX) :].rpartition("#")
    if not sk.startswith(COUNTER_PREFIX) or not sep or not is_valid_id(kind) or len(shard) != 1:
        raise ValueError(f"not an organization counter key: {sk!r}")
    return kind, int(shard, 16)


def member_token(account_id: str, resource_id: str, incarnation: str) -> str:
    """Names one incarnation of a member's resource on its organization's counter item."""
    return f"{account_id}/{resource_id}#{incarnation}"


def parse_member_token(value: str) -> tuple[str, str, str]:
    """(account id, resource id, incarnation) of a token on an organization's counter item."""
    account_id, sep, rest = value.partition("/")
    resource_id, incarnation = parse_token(rest)
    if not sep or not is_valid_id(account_id):
        raise ValueError(f"not a member token: {value!r}")
    return account_id, resource_id, incarnation


def token(resource_id: str, incarnation: str) -> str:
    """Names one incarnation of a resource on its counter item (last_admission, last_release)."""
    return f"{resource_id}#{incarnation}"


def parse_token(value: str) -> tuple[str, str]:
    resource_id, sep, incarnation = value.rpartition("#")
    if not sep or not is_valid_id(resource_id) or not incarnation:
        raise ValueError(f"malformed token {value!r}")
    return resource_id, incarnation


def resize_token(resource_id: str, incarnation: str, request_id: str) -> str:
    """Names one resize of one incarnation (last_resize): an incarnation may be resized often."""
    return f"{resource_id}#{incarnation}#{request_id}"


UNDO_SUFFIX = ".undo"  # on an organization's resize token: the undoing of that resize's grow there


def org_resize_token(
    account_id: str, resource_id: str, incarnation: str, request_id: str, *, undo: bool = False
) -> str:
    """Names one member resize (or its undoing) on its organization's counter item."""
    return f"{account_id}/{resize_token(resource_id, incarnation, request_id)}{UNDO_SUFFIX if undo else ''}"


def parse_org_resize_token(value: str) -> tuple[str, str, str, str, bool]:
    """(account id, resource id, incarnation, request id, whether it undoes) of a member resize."""
    account_id, sep, rest = value.partition("/")
    if not sep or not is_valid_id(account_id):
        raise ValueError(f"not a member resize token: {value!r}")
    undo = rest.endswith(UNDO_SUFFIX)
    resource_id, incarnation, request_id = parse_resize_token(rest.removesuffix(UNDO_SUFFIX))
    return account_id, resource_id, incarnation, request_id, undo


def parse_resize_token(value: str) -> tuple[str, str, str]:
    head, sep, request_id = value.rpartition("#")
    if not sep or not request_id:
        raise ValueError(f"malformed resize token {value!r}")
    resource_id, incarnation = parse_token(head)
    return resource_id, incarnation, request_id
