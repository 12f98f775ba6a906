"""Key scheme of the single table, and the tokens that name one incarnation of a resource.

An account's counter item and its resources share a partition key. A resource's sort key
starts with its *range*, one of 16 buckets by a hash of its id: ranges are what the counter
item keeps per-range shares and versions for (the recount's fences, see ``counters``), and a
range's resources are contiguous, so one range can be read on its own.
"""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime

ACCOUNT_PREFIX = "ACCOUNT#"
CONTROL_PREFIX = "CONTROL#"  # the sweeper's saved progress, not an account
RESOURCE_PREFIX = "RESOURCE#"
REPAIR_PREFIX = "REPAIR#"  # a requested census of one range (recount_requests.py)
COUNTER_SK = "COUNTER"
RANGES = 16
COUNTER_SHARDS = 16

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.fullmatch(value))


def account_pk(account_id: str) -> str:
    return f"{ACCOUNT_PREFIX}{account_id}"


def range_of(resource_id: str) -> str:
    """The resource's range: one hex digit, fixed by its id (every incarnation shares it)."""
    return f"{zlib.crc32(resource_id.encode()) % RANGES:x}"


def all_ranges() -> list[str]:
    return [f"{n:x}" for n in range(RANGES)]


def range_prefix(range_id: str) -> str:
    return f"{RESOURCE_PREFIX}{range_id}#"


def resource_sk(resource_id: str) -> str:
    return f"{range_prefix(range_of(resource_id))}{resource_id}"


def repair_sk(range_id: str) -> str:
    return f"{REPAIR_PREFIX}{range_id}"


def counter_key(account_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": COUNTER_SK}}


def resource_key(account_id: str, resource_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": resource_sk(resource_id)}}


def pending_shard(account_id: str, resource_id: str) -> str:
    """Partition key of the sparse PendingIndex (written only on failure paths, see design.md):
    a hash of the resource, so the index has no fixed set of hot keys whatever writes it. The
    sweeper scans the index instead of querying keys."""
    return f"PENDING#{zlib.crc32(f'{account_id}/{resource_id}'.encode()):08x}"


def counter_shard(account_id: str) -> str:
    """Bucket of the sparse CounterIndex that lists every account's counter item."""
    return f"COUNTERS#{zlib.crc32(account_id.encode()) % COUNTER_SHARDS:02d}"


def all_counter_shards() -> list[str]:
    return [f"COUNTERS#{n:02d}" for n in range(COUNTER_SHARDS)]


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
    """The resource id of a resource sort key (``RESOURCE#<range>#<id>``)."""
    if not sk.startswith(RESOURCE_PREFIX):
        raise ValueError(f"not a resource key: {sk!r}")
    range_id, sep, resource_id = sk[len(RESOURCE_PREFIX) :].partition("#")
    if not sep or not resource_id or range_id != range_of(resource_id):
        raise ValueError(f"not a resource key: {sk!r}")
    return resource_id


def token(resource_id: str, incarnation: str) -> str:
    """Names one incarnation of a resource on the counter item (last_admission, last_release)."""
    return f"{resource_id}#{incarnation}"


def parse_token(value: str) -> tuple[str, str]:
    resource_id, sep, incarnation = value.rpartition("#")
    if not sep or not is_valid_id(resource_id) or not incarnation:
        raise ValueError(f"malformed token {value!r}")
    return resource_id, incarnation
