"""An organization's counter items read back, by kind: each kind's shard items as one
``ShardSet`` (one item until the kind's counter is split: counters/split.py)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from hybrid_counter.counters.split import Shard, ShardSet, SplitCounter
from hybrid_counter.counters.state import EPOCH, ORG_EPOCH, CounterState
from hybrid_counter.keys import (
    COUNTER_PREFIX,
    EPOCHS_PER_INCARNATION,
    org_counter_key,
    org_key,
    org_pk,
    org_rebase_key,
    parse_org_counter_sk,
    pending_shard,
)

Fence = tuple[tuple[str, int | None], ...]  # (attribute, value as read; None: absent)

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability


def org_split_counter(table: str, clients: Clients, obs: Observability, effects: Effects) -> SplitCounter:
    """An organization's counter items for a kind, as a split counter (counters/split.py)."""
    return SplitCounter(
        table,
        clients,
        obs,
        effects,
        shard_key=lambda org, kind, n: org_counter_key(org, kind=kind, shard=n),
        record_key=org_rebase_key,
        list_key=lambda org, kind: (org_pk(org), f"{COUNTER_PREFIX}{kind}#"),
        shard_of_sk=lambda sk: parse_org_counter_sk(sk)[1],
        pending_key=lambda org, kind: pending_shard(org_pk(org), "REBASE", kind=kind),
        owner_check=partial(_rebase_owner_check, table),
        epoch_floor=lambda org: org_epoch_base(clients, table, org),
        creation_mark=ORG_EPOCH,
    )


def _rebase_owner_check(table: str, org: str, epoch: int, creation: int | None) -> dict[str, Any]:
    """A rebase's record is put only while its organization lives, at an epoch above where its
    creation's epochs start (one created again under the id starts above every epoch the old one
    reached), and, for a create's, only while it is the ``creation`` the create was judged by."""
    condition = "(attribute_not_exists(epoch_base) OR epoch_base < :e)"
    values: dict[str, Any] = {":e": {"N": str(epoch)}}
    if creation is not None:
        this_one, creation_values = org_is(creation)
        condition += f" AND {this_one}"
        values.update(creation_values)
    return org_lives(table, org, condition, values)


def of_creation(picture: ShardSet, creation: int) -> bool:
    """Whether nothing in the picture was written by another creation of the organization than
    ``creation`` (its epoch_base): a split shard's epoch is within its creation's range, an
    opened single item carries its creation's mark; an unmarked item says nothing."""
    for shard in picture.shards.values():
        state = shard.state
        if state.in_a_split:
            if not creation < max(state.epoch, state.rebasing or 0) < creation + EPOCHS_PER_INCARNATION:
                return False
        elif state.org_epoch is not None and state.org_epoch != creation:
            return False
    return True


def creation_in(picture: ShardSet) -> int | None:
    """The creation of the organization that wrote the picture (as of_creation reads it: a split
    shard's epoch, an opened item's mark), or None if nothing in it says."""
    for shard in picture.shards.values():
        if (creation := creation_of(shard.state)) is not None:
            return creation
    return None


def creation_of(state: CounterState) -> int | None:
    """The creation of the organization one shard item is of: a split shard's by its epoch (a
    split shard carries no ``org_epoch``), an opened single item's by its mark; None: it says
    nothing."""
    if state.in_a_split:
        epoch = max(state.epoch, state.rebasing or 0)
        return epoch - epoch % EPOCHS_PER_INCARNATION
    return state.org_epoch


def creation_fence(state: CounterState) -> Fence:
    """What a write fenced by the creation ``state`` was read of checks on its item: both marks
    that say which creation it is of, each as read (None: absent). A split shard's ``epoch``
    (each creation's epochs are its own range, and a rebase that moves it moves no share: a
    refused write is one more attempt), and a single item's ``org_epoch``, which it keeps while
    its first split freezes it with no epoch yet (review 63: fenced on the epoch alone, a
    stalled correction read on such an item landed on the single item of the organization
    created again, which has none either: 2 seats live of 1). A shard its first split creates has
    neither until laid out, but holds nothing until then: no correction is made on it."""
    return ((EPOCH, state.epoch or None), (ORG_EPOCH, state.org_epoch))


def org_lives(
    table: str, org_id: str, also: str = "", values: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A transaction's check that the organization exists and no DELETE /orgs has marked it
    (which it does first, then removes its rebase records, then its counter items), and ``also``."""
    condition = "attribute_exists(pk) AND attribute_not_exists(deleting)"
    check: dict[str, Any] = {
        "TableName": table,
        "Key": org_key(org_id),
        "ConditionExpression": f"{condition} AND {also}" if also else condition,
    }
    if values:
        check["ExpressionAttributeValues"] = values
    return {"ConditionCheck": check}


def org_is(epoch: int) -> tuple[str, dict[str, Any]]:
    """The condition (for ``org_lives``) that the organization is the creation of its id whose
    ``epoch_base`` is ``epoch`` (0: one created before organizations recorded it)."""
    if epoch == 0:
        return "attribute_not_exists(epoch_base)", {}
    return "epoch_base = :epoch_base", {":epoch_base": {"N": str(epoch)}}


def org_epoch_base(clients: Clients, table: str, org_id: str) -> int:
    """Where the organization's epochs start (set when it is created: a count of creations times
    10^12, governance/changes.py, so an organization created again under a deleted one's id has
    epochs above every one the old one could have reached); 0 for an organization created before
    it existed."""
    item = clients.dynamodb.get_item(
        TableName=table, Key=org_key(org_id), ConsistentRead=True, ProjectionExpression="epoch_base"
    ).get("Item")
    return int(item["epoch_base"]["N"]) if item and "epoch_base" in item else 0


def org_counters(clients: Clients, table: str, org_id: str) -> dict[str, ShardSet]:
    """One consistent Query of every counter item of the organization (a few hundred bytes each)."""
    return {
        kind: ShardSet({n: Shard(n, CounterState.from_item(item)) for n, item in found.items()})
        for kind, found in org_counter_items(clients, table, org_id).items()
    }


def org_counter_items(clients: Clients, table: str, org_id: str) -> dict[str, dict[int, dict[str, Any]]]:
    """The same Query's items as stored, by kind and shard (for what CounterState does not keep)."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    paginator = clients.dynamodb.get_paginator("query")
    for page in paginator.paginate(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": org_pk(org_id)}, ":prefix": {"S": COUNTER_PREFIX}},
        ConsistentRead=True,
    ):
        for item in page.get("Items", []):
            kind, n = parse_org_counter_sk(str(item["sk"]["S"]))
            found.setdefault(kind, {})[n] = dict(item)
    return found
