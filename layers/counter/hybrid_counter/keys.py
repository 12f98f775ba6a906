"""Key scheme of the single table: an account's counter item and its resources share a partition."""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime

ACCOUNT_PREFIX = "ACCOUNT#"
RESOURCE_PREFIX = "RESOURCE#"
COUNTER_SK = "COUNTER"
PENDING_SHARDS = 16

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.fullmatch(value))


def account_pk(account_id: str) -> str:
    return f"{ACCOUNT_PREFIX}{account_id}"


def resource_sk(resource_id: str) -> str:
    return f"{RESOURCE_PREFIX}{resource_id}"


def counter_key(account_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": COUNTER_SK}}


def resource_key(account_id: str, resource_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": account_pk(account_id)}, "sk": {"S": resource_sk(resource_id)}}


def pending_shard(account_id: str, resource_id: str) -> str:
    """Spread pending items over a few index partitions so the sparse index never runs hot."""
    shard = zlib.crc32(f"{account_id}/{resource_id}".encode()) % PENDING_SHARDS
    return f"PENDING#{shard:02d}"


def all_pending_shards() -> list[str]:
    return [f"PENDING#{n:02d}" for n in range(PENDING_SHARDS)]


def iso_utc(epoch_seconds: float) -> str:
    """The one timestamp format of pending_since: the sweeper compares these as strings."""
    return (
        datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def counter_shard(account_id: str) -> str:
    """Bucket of the sparse CounterIndex that lists every account's counter item."""
    return f"COUNTERS#{zlib.crc32(account_id.encode()) % PENDING_SHARDS:02d}"


def all_counter_shards() -> list[str]:
    return [f"COUNTERS#{n:02d}" for n in range(PENDING_SHARDS)]


def parse_account_pk(pk: str) -> str:
    if not pk.startswith(ACCOUNT_PREFIX):
        raise ValueError(f"not an account key: {pk!r}")
    return pk[len(ACCOUNT_PREFIX) :]


def parse_resource_sk(sk: str) -> str:
    if not sk.startswith(RESOURCE_PREFIX):
        raise ValueError(f"not a resource key: {sk!r}")
    return sk[len(RESOURCE_PREFIX) :]
