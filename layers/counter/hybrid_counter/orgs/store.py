"""Organizations in the table: their profile, their members, and membership changes.

- ``ORG#<org>`` / ``PROFILE``: the organization's plan (``plan_id``), ``members`` (how many),
  ``created_at``; its plan changes are recorded like an account's (governance/changes.py).
- ``ORG#<org>`` / ``MEMBER#<account>``: one item per member (its listing: no scan).
- ``ORG#<org>`` / ``COUNTER#<kind>#<shard>``: the organization's counter items (counters.py).
- On the account's profile (``ACCOUNT#<id>`` / ``PLAN``): ``org_id``, and ``kinds``, the kinds
  the account has ever used (registered by the first create of each, registry.py); on each of
  the account's counter items: ``org``, which every admission of the account is conditional on.

**Membership changes only while the account is empty**, and exactly: one transaction (an
operator's call, never on the API path) writes the account's profile, every one of its counter
items (the kinds it registered and the counter items it has), the organization's profile and its
member item, conditional on each counter item holding nothing, on the account being in no
organization (joining) or in this one (leaving), on its registered kinds being those read, and on
the organization existing. So a create racing it is either admitted first (its counter item holds
something: the change is refused, AccountNotEmpty) or judged again afterwards (its admission is
conditional on the membership it read: counters/expressions.py). A create of a kind the account
never used registers the kind on the profile first, which changes the kinds the transaction is
conditional on: either the transaction sees the kind (and writes its counter item) or it is
refused and read again. An account with resource items left (a create still pending, a delete
not finished) is not empty either: the transaction is only sent when it has none. An account of
more kinds than one transaction can hold (TransactWriteItems takes 100 actions) cannot move.

**An organization is deleted** only without members, in one transaction with its counter items
(each conditional on holding nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import RetryPolicy, error_code, retry_conflicts, transact_conditionally
from hybrid_counter.counters.state import HOLDS_USED, NO_ORG, ORG, ORG_EPOCH, ORG_KIND, CounterState
from hybrid_counter.errors import InProgress, MembershipConflict, NotFound, ValidationError
from hybrid_counter.keys import (
    ALERT_PREFIX,
    COUNTER_PREFIX,
    FORMER_PREFIX,
    FORMER_SECONDS,
    MEMBER_PREFIX,
    REBASE_PREFIX,
    REPAIR_PREFIX,
    RESOURCE_PREFIX,
    account_pk,
    counter_key,
    former_key,
    iso_utc,
    member_key,
    org_key,
    org_pk,
    org_usage_key,
    org_usage_keys,
    parse_counter_sk,
    profile_key,
    usage_keys_of,
)
from hybrid_counter.orgs.counters import org_is

if TYPE_CHECKING:
    from hybrid_counter.aws import Clients

# Actions of one membership transaction: the account's profile, the organization's profile and
# member item, and one per counter item.
MAX_KINDS = 100 - 3
TRANSACTION_ITEMS = 100
ZERO = {":zero": {"N": "0"}}
ATTEMPTS = 4


@dataclass(frozen=True)
class Org:
    org_id: str
    plan_id: str
    members: int = 0
    created_at: str = ""
    shards: int = 1  # its counter's shard items per kind (counters/split.py)
    creation: int = 0  # which creation of the id it is (its epoch_base; not shown)
    usage_keys: int = 1  # its members' OrgUsageIndex keys (keys.org_usage_keys; not shown)

    def to_json(self) -> dict[str, Any]:
        return {
            "org_id": self.org_id,
            "plan_id": self.plan_id,
            "members": self.members,
            "created_at": self.created_at,
            "shards": self.shards,
        }


class OrgStore:
    def __init__(self, table_name: str, clients: Clients, *, clock: Any) -> None:
        self._table = table_name
        self._clients = clients
        self._clock = clock
        self._retry = RetryPolicy()

    # ---- reading -----------------------------------------------------------------------------------
    def get(self, org_id: str) -> Org | None:
        item = self._get(org_key(org_id))
        return None if item is None else self.of_item(org_id, item)

    @staticmethod
    def of_item(org_id: str, item: dict[str, Any]) -> Org:
        return Org(
            org_id,
            str(item.get("plan_id", {}).get("S", "default")),
            int(item.get("members", {}).get("N", "0")),
            str(item.get("created_at", {}).get("S", "")),
            int(item.get("shards", {}).get("N", "1")),
            int(item.get("epoch_base", {}).get("N", "0")),
            usage_keys_of(item),
        )

    def former_members(self, org_id: str) -> list[str]:
        """Accounts that left it within FORMER_SECONDS (their records, until their TTL)."""
        return [
            str(item["sk"]["S"])[len(FORMER_PREFIX) :] for item in self._items(org_pk(org_id), FORMER_PREFIX)
        ]

    def members(
        self, org_id: str, *, page_size: int = 100, start: str | None = None
    ) -> tuple[list[str], str | None]:
        """Member account ids in id order, a page at a time (the next page's start, or None)."""
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :member)",
            "ExpressionAttributeValues": {":pk": {"S": org_pk(org_id)}, ":member": {"S": MEMBER_PREFIX}},
            "ConsistentRead": True,
            "Limit": page_size,
        }
        if start:
            query["ExclusiveStartKey"] = member_key(org_id, start)
        response = self._clients.dynamodb.query(**query)
        found = [str(item["sk"]["S"])[len(MEMBER_PREFIX) :] for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return found, (str(last["sk"]["S"])[len(MEMBER_PREFIX) :] if last else None)

    def org_of(self, account_id: str) -> str | None:
        """The organization the account belongs to, as its profile says (consistent)."""
        item = self._get(profile_key(account_id))
        return None if item is None else item.get("org_id", {}).get("S")

    # ---- membership --------------------------------------------------------------------------------
    def join(self, org_id: str, account_id: str) -> bool:
        """Make the account a member (empty accounts only). False if it already was one."""
        return self._move(org_id, account_id, joining=True)

    def leave(self, org_id: str, account_id: str) -> bool:
        """Take the account out of the organization (empty accounts only). False if it was not
        a member."""
        return self._move(org_id, account_id, joining=False)

    def _move(self, org_id: str, account_id: str, *, joining: bool) -> bool:
        for _ in range(ATTEMPTS):
            profile = self._get(profile_key(account_id)) or {}
            current = profile.get("org_id", {}).get("S")
            if (current == org_id) == joining:
                return False  # already a member (joining), or not one (leaving)
            if joining and current is not None:
                raise MembershipConflict(
                    "AccountInAnotherOrganization", f"account {account_id} belongs to organization {current}"
                )
            epoch, keys = 0, 1
            if joining:
                org = self._get(org_key(org_id))
                if org is None:
                    raise NotFound(f"organization {org_id} not found")
                epoch, keys = int(org.get("epoch_base", {}).get("N", "0")), usage_keys_of(org)
            registered = set(profile.get("kinds", {}).get("SS", []))
            counters = self._counter_kinds(account_id)
            self._check_empty(account_id, counters)
            # (not an item that holds only a plan move's marks and names no organization: it
            # holds nothing, and its absent ``org`` already says "the profile says"; counted, a
            # move to a plan of many kinds left an account unable to leave: review 80)
            moved = {
                kind
                for kind, item in counters.items()
                if ORG in item or CounterState.from_item(item).used_once
            }
            kinds = sorted(registered | moved)
            if len(kinds) > MAX_KINDS:
                raise ValidationError(
                    f"account {account_id} has {len(kinds)} kinds; at most {MAX_KINDS} can change organization"
                )
            actions = [self._profile_action(account_id, org_id, registered, joining=joining, epoch=epoch)]
            actions += [
                self._counter_action(account_id, org_id, kind, joining=joining, epoch=epoch, keys=keys)
                for kind in kinds
            ]
            actions += self._org_actions(org_id, account_id, joining=joining, epoch=epoch)
            try:
                self._transact(actions)
            except ClientError as error:
                if error_code(error) != "TransactionCanceledException":
                    raise
                self._refused(error, account_id, org_id, len(kinds))
                continue  # the profile changed (a kind registered, a concurrent change): read again
            return True
        raise InProgress(
            "the account kept changing while its organization was being changed; retry the request"
        )

    def _counter_kinds(self, account_id: str) -> dict[str, dict[str, Any]]:
        return {
            parse_counter_sk(str(item["sk"]["S"])): item
            for item in self._items(account_pk(account_id), COUNTER_PREFIX)
        }

    def _check_empty(self, account_id: str, counters: dict[str, dict[str, Any]]) -> None:
        """No resource item at all, and no counter holding anything (the transaction checks the
        counters again, atomically)."""
        held = [
            kind
            for kind, item in counters.items()
            if int(item.get("best_effort", {}).get("N", "0")) or int(item.get("eventual", {}).get("N", "0"))
        ]
        resources = self._clients.dynamodb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": account_pk(account_id)},
                ":prefix": {"S": RESOURCE_PREFIX},
            },
            ConsistentRead=True,
            Limit=1,
            ProjectionExpression="pk",
        ).get("Items", [])
        if held or resources:
            raise MembershipConflict(
                "AccountNotEmpty",
                f"account {account_id} holds resources; an account changes organization only while empty",
            )

    def _profile_action(
        self, account_id: str, org_id: str, registered: set[str], *, joining: bool, epoch: int
    ) -> dict[str, Any]:
        values: dict[str, Any] = {
            ":org": {"S": org_id},
            ":now": {"S": iso_utc(self._clock())},
            ":epoch": {"N": str(epoch)},
        }
        if registered:
            kinds_unchanged = "size(kinds) = :n"
            values[":n"] = {"N": str(len(registered))}
        else:
            kinds_unchanged = "attribute_not_exists(kinds)"
        if joining:
            update = f"SET org_id = :org, org_since = :now, {ORG_EPOCH} = :epoch"
            whose = "attribute_not_exists(org_id)"
        else:
            update, whose = f"REMOVE org_id, org_since, {ORG_EPOCH}", "org_id = :org"
            del values[":now"], values[":epoch"]
        return {
            "Update": {
                "TableName": self._table,
                "Key": profile_key(account_id),
                "UpdateExpression": update,
                "ConditionExpression": f"{whose} AND {kinds_unchanged}",
                "ExpressionAttributeValues": values,
            }
        }

    def _counter_action(
        self, account_id: str, org_id: str, kind: str, *, joining: bool, epoch: int, keys: int = 1
    ) -> dict[str, Any]:
        """The kind's counter item (created if the kind is registered and has none yet), holding
        nothing, moved into or out of the organization (this creation of it: ``epoch``; its
        OrgUsageIndex key one of the organization's ``keys``)."""
        values: dict[str, Any] = {":zero": {"N": "0"}}
        empty = (
            "(attribute_not_exists(best_effort) OR best_effort = :zero) "
            "AND (attribute_not_exists(eventual) OR eventual = :zero)"
        )
        values[":none"] = {"S": NO_ORG}
        if joining:
            # (empty: none of its holds is left anywhere; its mark would search them for nothing)
            update = f"SET org = :org, {ORG_KIND} = :org_kind, {ORG_EPOCH} = :epoch REMOVE {HOLDS_USED}"
            values.update(
                {
                    ":org": {"S": org_id},
                    ":org_kind": {"S": org_usage_key(org_id, kind, account_id, keys)},
                    ":epoch": {"N": str(epoch)},
                }
            )
            whose = "(attribute_not_exists(org) OR org = :none)"
        else:
            update = f"SET org = :none REMOVE {ORG_KIND}, {ORG_EPOCH}"
            values[":org"] = {"S": org_id}
            whose = "(attribute_not_exists(org) OR org = :org)"
        return {
            "Update": {
                "TableName": self._table,
                "Key": counter_key(account_id, kind=kind),
                "UpdateExpression": update,
                "ConditionExpression": f"{empty} AND {whose}",
                "ExpressionAttributeValues": values,
            }
        }

    def _org_actions(
        self, org_id: str, account_id: str, *, joining: bool, epoch: int
    ) -> list[dict[str, Any]]:
        values: dict[str, Any] = {":one": {"N": "1" if joining else "-1"}}
        condition = "attribute_exists(pk)"
        if joining:
            # refused once a deletion has begun (orgs are deleted only without members), and
            # unless it is the creation of the organization read (whose epoch the member records)
            this_one, epoch_values = org_is(epoch)
            condition += f" AND attribute_not_exists(deleting) AND {this_one}"
            values.update(epoch_values)
        org = {
            "Update": {
                "TableName": self._table,
                "Key": org_key(org_id),
                "UpdateExpression": "ADD members :one",
                "ConditionExpression": condition,
                "ExpressionAttributeValues": values,
            }
        }
        if joining:
            member = {
                "Put": {
                    "TableName": self._table,
                    "Item": {**member_key(org_id, account_id), "since": {"S": iso_utc(self._clock())}},
                }
            }
        else:
            member = {"Delete": {"TableName": self._table, "Key": member_key(org_id, account_id)}}
            # kept a day (TTL): the organization's recount takes the census of former members too,
            # whose create judged before the leave may still hold units there (its undo to come)
            now = self._clock()
            former = {
                "Put": {
                    "TableName": self._table,
                    "Item": {
                        **former_key(org_id, account_id),
                        "left_at": {"S": iso_utc(now)},
                        "expires_at": {"N": str(int(now) + FORMER_SECONDS)},
                    },
                }
            }
            return [org, member, former]
        return [org, member]

    def _refused(self, error: ClientError, account_id: str, org_id: str, kinds: int) -> None:
        """Why a membership transaction was refused: raise if it is final, return to read again."""
        reasons = [dict(r) for r in error.response.get("CancellationReasons", [])]
        codes = [r.get("Code", "None") for r in reasons]
        if any(code == "ConditionalCheckFailed" for code in codes[1 : 1 + kinds]):
            raise MembershipConflict(
                "AccountNotEmpty",
                f"account {account_id} holds resources; an account changes organization only while empty",
            )
        if len(codes) > 1 + kinds and codes[1 + kinds] == "ConditionalCheckFailed":
            org = self._get(org_key(org_id))
            if org is None or "deleting" in org:
                raise NotFound(f"organization {org_id} not found")
            # (else created again under its id since it was read: read again)

    def set_shards(self, org_id: str, shards: int) -> None:
        """How many shard items the organization's counters are split over from now on, and
        the OrgUsageIndex keys its members spread over, which only grow: a member keeps the key
        it was given until its next admission, so going back to fewer shards keeps every key
        read. Written conditional on both as read (one of each write at a time): an organization
        split before ``usage_keys`` was recorded counts its keys from the shards it had (review
        65: taken as 1, its lowering recorded too few keys and its members beyond them went
        unread)."""
        for _ in range(ATTEMPTS):
            item = self._get(org_key(org_id))
            if item is None:
                raise NotFound(f"organization {org_id} not found")
            keys = max(usage_keys_of(item), org_usage_keys(shards))
            values = {":s": {"N": str(shards)}, ":k": {"N": str(keys)}}
            conditions = ["attribute_exists(pk)"]
            for attribute in ("shards", "usage_keys"):
                if attribute in item:
                    values[f":{attribute}_seen"] = item[attribute]
                    conditions.append(f"{attribute} = :{attribute}_seen")
                else:
                    conditions.append(f"attribute_not_exists({attribute})")
            try:
                retry_conflicts(
                    partial(
                        self._clients.dynamodb.update_item,
                        TableName=self._table,
                        Key=org_key(org_id),
                        UpdateExpression="SET shards = :s, usage_keys = :k",
                        ConditionExpression=" AND ".join(conditions),
                        ExpressionAttributeValues=values,
                    ),
                    self._retry,
                )
                return
            except ClientError as error:
                if error_code(error) != "ConditionalCheckFailedException":
                    raise
        raise InProgress("the organization kept changing while its shards were being set; retry the request")

    # ---- deleting ----------------------------------------------------------------------------------
    def delete(self, org_id: str, *, settle: Callable[[dict[str, Any]], None] | None = None) -> None:
        """Delete the organization, its counter items, any rebase record and its threshold state
        (a split organization's ALERT# items): only without members (design.md §10.2).

        Marked ``deleting`` first (conditional on no members; joins, overrides, plan moves and
        rebase records are refused from then on), so only a former member's admission judged
        before its account left can still raise a counter (and its undo lowers it again): a
        deletion that finds one held answers 503 with the mark kept; the organization's item
        goes last, so a deletion that dies or gives up half way is finished by the next DELETE. ``settle``: called with each item about to go, once
        no override can be written any more (the mark), to complete the history of a limit
        change it names first (its request may have died before it: the sweeper completes one
        only while an item names it)."""
        marked = self._mark_deleting(org_id)
        # Every removal below is made only while the creation it marked is still there, marked:
        # a deletion stalled past another's 204 and the id's creation again would otherwise
        # remove the new creation's override, former members and rebase record (review 50).
        fence = _still_marked(self._table, org_id, marked)
        pk = org_pk(org_id)
        records = self._items(pk, REBASE_PREFIX)
        items = self._items(pk, COUNTER_PREFIX) + records
        if any(_holds(item) for item in items):
            if not self._still_the_one(org_id, marked):
                raise NotFound(f"organization {org_id} not found")  # another deletion's 204
            # The mark stays: it may be another deletion's too, under way or half done (records
            # or counters removed), and removing it would let the organization live on without
            # them. Without members nothing needs it gone; the next DELETE finishes.
            raise _settling(org_id)
        if settle is not None:
            for item in [*items, marked]:
                settle(item)
        # The rebase records first: from the mark on no record can be put, and without its
        # record no rebase creates a shard item (counters/split.py), so the shards read next
        # are all there will be, whatever a rebase under way (an operator's, dead or slow) does.
        for record in records:
            removal = {"Delete": {"TableName": self._table, "Key": {"pk": record["pk"], "sk": record["sk"]}}}
            if transact_conditionally(self._clients.dynamodb, [fence, removal], self._retry):
                raise NotFound(f"organization {org_id} not found")
        self._remove_counters(org_id, fence)
        self._remove_profile(org_id, fence)

    def _mark_deleting(self, org_id: str) -> dict[str, Any]:
        """The organization's item, marked ``deleting`` (NotFound; or 409 with members)."""
        try:
            marked = retry_conflicts(
                lambda: self._clients.dynamodb.update_item(
                    TableName=self._table,
                    Key=org_key(org_id),
                    UpdateExpression="SET deleting = :yes",
                    ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(members) OR members = :zero)",
                    ExpressionAttributeValues={":yes": {"BOOL": True}, ":zero": {"N": "0"}},
                    ReturnValues="ALL_NEW",
                ),
                self._retry,
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            if self._get(org_key(org_id)) is None:
                raise NotFound(f"organization {org_id} not found") from error
            raise _not_empty(org_id) from error
        return dict(marked.get("Attributes", {}))

    def _still_the_one(self, org_id: str, marked: dict[str, Any]) -> bool:
        """Whether the creation this deletion marked is still there, marked (as its fence)."""
        item = self._get(org_key(org_id))
        return item is not None and "deleting" in item and item.get("epoch_base") == marked.get("epoch_base")

    def _remove_counters(self, org_id: str, fence: dict[str, Any]) -> None:
        """Its counter items (each conditional on holding nothing), its threshold state, its former
        members and its census requests, in transactions of at most 100 items (16 shards of many
        kinds are more than one holds), each with ``fence``: the creation it marked still there (else 404: another deletion removed
        it). No atomicity is needed between them: a batch refused by an admission in flight
        leaves the mark, and the next DELETE removes what is left."""
        counted = (
            "(attribute_not_exists(best_effort) OR best_effort = :zero) "
            "AND (attribute_not_exists(eventual) OR eventual = :zero)"
        )
        only_if_empty = {"ConditionExpression": counted, "ExpressionAttributeValues": ZERO}
        actions: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": {"pk": item["pk"], "sk": item["sk"]},
                    **(only_if_empty if counter else {}),
                }
            }
            for prefix, counter in (
                (COUNTER_PREFIX, True),
                (ALERT_PREFIX, False),
                (FORMER_PREFIX, False),
                # census requests of its ranges (recount_requests.py): once its counters are gone
                # (only while they hold nothing, in the batches before) there is nothing to correct
                (REPAIR_PREFIX, False),
            )
            for item in self._items(org_pk(org_id), prefix)
        ]
        size = TRANSACTION_ITEMS - 1
        for at in range(0, len(actions), size):
            refused = transact_conditionally(
                self._clients.dynamodb, [fence, *actions[at : at + size]], self._retry
            )
            if refused is None:
                continue
            if refused[0] is not None:
                raise NotFound(f"organization {org_id} not found")
            # raised since it was read: by an admission judged before its account left
            # (org_level.py), undone once that account's admission is refused (mark kept)
            raise _settling(org_id)

    def _remove_profile(self, org_id: str, fence: dict[str, Any]) -> None:
        """The item this deletion marked, the creation ``fence`` names (one created again under
        the id since is another, even once its own deletion has marked it: review 52, a stalled
        deletion removed such a one's item and left its counters, override included, to the next
        creation: 6 seats of 3): refused once another deletion removed it, which is that
        deletion's 204, and this one's 404. A transaction, so that botocore's resend after a lost
        response (the same client token) is answered as the delete that applied, not refused as
        a second one."""
        check = fence["ConditionCheck"]
        refused = transact_conditionally(
            self._clients.dynamodb,
            [
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": org_key(org_id),
                        "ConditionExpression": (
                            f"{check['ConditionExpression']} AND (attribute_not_exists(members) OR members = :zero)"
                        ),
                        "ExpressionAttributeValues": {**ZERO, **check["ExpressionAttributeValues"]},
                    }
                }
            ],
            self._retry,
        )
        if refused is not None:
            raise NotFound(f"organization {org_id} not found")

    def _items(self, pk: str, prefix: str) -> list[dict[str, Any]]:
        """Every item of a partition whose sort key begins with ``prefix`` (consistent, paged)."""
        found: list[dict[str, Any]] = []
        paginator = self._clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        ):
            found += [dict(item) for item in page.get("Items", [])]
        return found

    def _transact(self, actions: list[dict[str, Any]]) -> None:
        retry_conflicts(
            lambda: self._clients.dynamodb.transact_write_items(TransactItems=actions),  # type: ignore[arg-type]
            self._retry,
        )

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        item = self._clients.dynamodb.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return None if item is None else dict(item)


def _holds(item: dict[str, Any]) -> bool:
    return bool(int(item.get("best_effort", {}).get("N", "0")) or int(item.get("eventual", {}).get("N", "0")))


def _still_marked(table: str, org_id: str, marked: dict[str, Any]) -> dict[str, Any]:
    """A transaction's check that the organization's item is the creation ``marked`` names
    (its ``epoch_base``, drawn per creation), still marked ``deleting``."""
    base = marked.get("epoch_base")
    values: dict[str, Any] = {":yes": {"BOOL": True}}
    if base is None:  # (an organization created before creations were numbered)
        which = "attribute_not_exists(epoch_base)"
    else:
        which, values[":base"] = "epoch_base = :base", base
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": org_key(org_id),
            "ConditionExpression": f"deleting = :yes AND {which}",
            "ExpressionAttributeValues": values,
        }
    }


def _settling(org_id: str) -> InProgress:
    """No members (its mark's condition), yet a counter holds units: of requests still in flight
    (a former member's create being undone, a member's delete not yet released there, one left
    to the sweeper), which release them. Not 409: nothing the operator can remove. It stays
    marked (no join or change is taken) until a DELETE finishes."""
    return InProgress(
        f"organization {org_id} is being deleted, but its counters still hold units of requests in "
        "flight; retry the request shortly to finish the deletion"
    )


def _not_empty(org_id: str) -> MembershipConflict:
    return MembershipConflict("OrganizationNotEmpty", f"organization {org_id} has members; remove them first")
