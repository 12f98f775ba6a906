"""A counter split over shard items with allowances (design.md §10): the same exact admission at
a multiple of one item's write rate.

One owner's counter for a kind (an organization's, ``ORG#<org>`` / ``COUNTER#<kind>#<s>``) is S
shard items. Each holds, besides its own ``best_effort`` and ``eventual`` (the units admitted on
it and counted on it, per range as any counter item), an ``allowance``: its share of the limit.
An admission of n units on shard s is one conditional write of that shard alone: both its
counters leave room for n under its allowance (``allowance = A AND best_effort <= A - n AND
eventual <= A - n``, A as read: condition expressions cannot add). Writes that change allowances
keep one invariant, which is what makes the whole exact:

    **claims <= basis**, where a shard's claim is ``max(used, allowance)`` (used: the larger of
    its two counters) and ``basis`` is the limit the allowances were laid out for.

The units held are at most the sum of the shards' used, so at most the basis. Each write keeps it:

- an admission raises a shard's used only up to its allowance (its claim does not move);
- a release lowers a shard's used (its claim can only go down);
- a **move** of k from a donor d to a shard r is two conditional writes: the donor's allowance
  down by k where its used stays within what is left (its claim goes down by exactly k), then
  the receiver's up by k (its claim up by at most k). A process that dies between them, or whose
  second write is lost, loses k: claims stay below the basis ("lost allowance"), never above;
- a **rebase** (a new limit, a new number of shards, or a reconcile that hands out what was lost
  or what releases on over-full shards freed) lays every allowance out again from one frozen
  picture, so that claims <= the new basis (below: ``Rebase``).

A shard whose room is short of n takes allowance from the shards with the most spare (moves),
then, when the shards' spare together is short too but the basis holds more than the claims
(lost allowance; or units released on a shard that was over its allowance), reconciles; only then
is the create refused, with the basis as the limit and the shards' used summed. Fragmented spare
is gathered by moves, so a refusal means the claims leave no room for n anywhere, as one item's
refusal means.

**A rebase** (``rebase``) is a record item (``REBASE#<kind>``: the new epoch, basis and its
source, the shards it covers, then the plan) and four steps that any process can finish, each
conditional and idempotent, so a crash leaves a record that the next admission, the next
rebase, or the sweeper (the record is in the PendingIndex) completes:

1. the record, created only if none is there (one rebase of a kind at a time) and, with an
   ``owner_check``, only while its owner takes changes (an organization being deleted does not);
2. every shard **frozen** (``rebasing = epoch``): moves and admissions are refused on a frozen
   shard (they complete the rebase, then go on); releases and counting go on, and they can only
   lower a shard's claim. A new shard is created only while the record is there, so nothing a
   late finisher does outlives its rebase or its owner;
3. one picture of the frozen shards, and from it the **plan**, written once on the record (the
   first plan written is the one every finisher applies): each shard's new allowance, with
   claims <= the new basis: what the basis holds beyond the claims goes to the shard that asked,
   a lower basis takes spare (allowance above used) first, and if the units held are over the new
   basis (a limit lowered below use, forced), every allowance is 0: no shard admits until
   releases bring the claims under the basis and a reconcile hands out the room;
4. each shard's new allowance, basis and epoch, conditional on its freeze, then the record removed.

A move's writes are conditional on the shard not being frozen and on the epoch they read: a move
whose debit applied before the freeze but whose credit had not landed can never land after it,
and the plan, made from what the shards held once all were frozen, does not count it.

An admission on an item that is not split (``allowance`` absent: an organization whose counter
was never split) is conditional on ``attribute_not_exists(allowance)`` and on no freeze, so the
first rebase turns a single counter item into shard 0 without an admission crossing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from hybrid_counter.aws import (
    CONDITION_FAILED,
    Attempted,
    Clients,
    Effect,
    attempt_write,
    error_code,
    retry_conflicts,
    transact_conditionally,
)
from hybrid_counter.counters.expressions import UpdateExpr
from hybrid_counter.counters.expressions import _range_delta as range_delta
from hybrid_counter.counters.state import (
    ALLOWANCE,
    BASIS,
    BASIS_SOURCE,
    BEST_EFFORT,
    EPOCH,
    EVENTUAL,
    HOLDS_USED,
    LAST_ADMISSION,
    LAST_ADMISSION_UNITS,
    LAST_RESIZE,
    REBASING,
    CounterState,
)
from hybrid_counter.errors import InProgress
from hybrid_counter.keys import iso_utc, range_of

if TYPE_CHECKING:
    from hybrid_counter.effects import Effects
    from hybrid_counter.observability import Observability

ShardKeyOf = Callable[[str, str, int], dict[str, Any]]  # (owner, kind, shard) -> key
RecordKeyOf = Callable[[str, str], dict[str, Any]]  # (owner, kind) -> the rebase record's key
ListKey = Callable[[str, str], tuple[str, str]]  # (owner, kind) -> (pk, sort key prefix) of its shards
ShardOf = Callable[[str], int]  # a shard item's sort key -> its number
# (owner, epoch) -> a ConditionCheck: the owner exists, takes changes, and is the incarnation
# whose epochs the epoch is of (an owner created again under its id starts above the old one's)
# owner, the rebase's epoch, and which creation of the owner it must be (None: any that takes
# changes) -> a transaction's check on the owner's item
OwnerCheck = Callable[[str, int, int | None], dict[str, Any]]
EpochFloor = Callable[[str], int]  # owner -> the epoch its incarnation's epochs start above

OVERRIDE = "override"
KEPT, KEPT_SOURCE = "kept_basis", "kept_source"  # a strict rebase's record: the basis it keeps if refused
PLAN_LIMIT, PLAN_SOURCE = "plan_basis", "plan_source"  # the basis the recorded plan lays out
ATTEMPTS = 8
SHARD_CHOICES = (1, 2, 4, 8, 16)  # each a whole number of the 16 ranges a shard


class OwnerGone(InProgress):
    """A rebase's owner is gone or being deleted (its ``owner_check`` refused): nothing was
    changed. An InProgress, so an operator's change answers 503 as before; an admission judged
    before the deletion judges its membership again (org_level.py)."""


@dataclass(frozen=True)
class Basis:
    """The limit allowances are laid out for, and where it came from: ``override``, or
    ``plan:<moves>:<version>`` (the owner's plan moves and that plan's version: a later view of
    the plan is a larger pair, so a process never lays allowances out for an older plan than
    the one they were laid out for)."""

    limit: int
    source: str

    @staticmethod
    def of_plan(limit: int, moves: int, version: int) -> Basis:
        return Basis(limit, f"plan:{moves}:{version}")

    @staticmethod
    def lowering(limit: int, until: float) -> Basis:
        """A limit laid out before its change is written (a lowering that is not forced): it
        stands until ``until`` (epoch seconds) unless the change is written first."""
        return Basis(limit, f"lowering:{until:.3f}")

    @property
    def lowering_until(self) -> float | None:
        if not self.source.startswith("lowering:"):
            return None
        return float(self.source.split(":", 1)[1])

    @property
    def plan_tag(self) -> tuple[int, int] | None:
        if not self.source.startswith("plan:"):
            return None
        _, moves, version = self.source.split(":")
        return int(moves), int(version)


@dataclass(frozen=True)
class Shard:
    number: int
    state: CounterState

    @property
    def exists(self) -> bool:
        return self.state.exists

    @property
    def split(self) -> bool:
        return self.state.allowance is not None

    @property
    def allowance(self) -> int:
        return self.state.allowance or 0

    @property
    def used(self) -> int:
        return self.state.used

    @property
    def room(self) -> int:
        """How many more units it admits (negative: over its allowance)."""
        return self.allowance - self.used

    @property
    def claim(self) -> int:
        return max(self.used, self.allowance)


@dataclass(frozen=True)
class ShardSet:
    shards: dict[int, Shard] = field(default_factory=dict)

    def get(self, number: int) -> Shard:
        return self.shards.get(number) or Shard(number, CounterState())

    @property
    def split(self) -> bool:
        return any(s.split for s in self.shards.values())

    @property
    def basis(self) -> Basis | None:
        for s in sorted(self.shards.values(), key=lambda s: -s.state.epoch):
            if s.split and s.state.basis is not None:
                return Basis(s.state.basis, s.state.basis_source or "")
        return None

    @property
    def epoch(self) -> int:
        return max((s.state.epoch for s in self.shards.values()), default=0)

    @property
    def frozen(self) -> bool:
        return any(s.state.rebasing is not None for s in self.shards.values())

    @property
    def used(self) -> int:
        return sum(s.used for s in self.shards.values())

    @property
    def best_effort(self) -> int:
        return sum(s.state.best_effort for s in self.shards.values())

    @property
    def eventual(self) -> int:
        return sum(s.state.eventual for s in self.shards.values())

    @property
    def claims(self) -> int:
        return sum(s.claim for s in self.shards.values())

    def total(self) -> CounterState:
        """The shards as one counter (usage, limit checks): summed counters, the basis as the limit."""
        first = self.get(0).state
        basis = self.basis
        return CounterState(
            best_effort=self.best_effort,
            eventual=self.eventual,
            limit=first.limit,
            exists=any(s.exists for s in self.shards.values()),
            allowance=None if basis is None else basis.limit,
            basis=None if basis is None else basis.limit,
            basis_source=None if basis is None else basis.source,
        )


def shard_of_resource(resource_id: str, shards: int) -> int:
    """The shard a resource's admission goes to when its owner has ``shards`` shards: its range
    (a hash of its id) spread over them, so a shard's resources are whole ranges."""
    if shards <= 1:
        return 0
    return int(range_of(resource_id), 16) % shards


@dataclass(frozen=True)
class Plan:
    """What a rebase lays out: each shard's allowance and the basis they are laid out for (the
    record's, or, for a strict rebase whose frozen shards hold more than it, the one kept)."""

    basis: Basis
    allowances: dict[int, int]


def lay_out(picture: ShardSet, numbers: list[int], basis: Basis, favour: int) -> dict[int, int]:
    """New allowances from a picture of frozen shards (rebase step 3): claims <= basis.limit.

    A shard that is not split yet (a single counter item becoming shard 0) has no allowance: its
    claim is what it holds. What the basis holds beyond the claims goes to ``favour``. A lower
    basis takes spare first; if what is held is over it, every allowance is 0."""
    current = {
        n: (picture.get(n).allowance if picture.get(n).split else picture.get(n).used) for n in numbers
    }
    used = {n: picture.get(n).used for n in numbers}
    claims = sum(max(used[n], current[n]) for n in numbers)
    if claims <= basis.limit:
        # each shard keeps its claim (an over-full one's allowance rises to its used, which
        # does not move the claims), and what the basis holds beyond them is the favoured one's room
        new = {n: max(used[n], current[n]) for n in numbers}
        new[favour] = new.get(favour, 0) + basis.limit - claims
        return new
    if sum(used.values()) > basis.limit:
        return dict.fromkeys(numbers, 0)
    need = claims - basis.limit
    new = dict(current)
    for n in sorted(numbers, key=lambda n: -(current[n] - used[n])):
        spare = max(0, new[n] - used[n])
        cut = min(spare, need)
        new[n] -= cut
        need -= cut
    assert need == 0  # the spare covers it: sum(used) <= basis
    return new


class SplitCounter:
    """Admissions, moves and rebases of a split counter (reads and writes; which owner and kind
    and how many shards is the caller's: orgs use it for their counter items)."""

    def __init__(
        self,
        table_name: str,
        clients: Clients,
        obs: Observability,
        effects: Effects,
        *,
        shard_key: ShardKeyOf,
        record_key: RecordKeyOf,
        list_key: ListKey,
        shard_of_sk: ShardOf,
        pending_key: Callable[[str, str], str],
        owner_check: OwnerCheck | None = None,
        epoch_floor: EpochFloor | None = None,
        creation_mark: str | None = None,
    ) -> None:
        self._table = table_name
        self._clients = clients
        self._obs = obs
        self._fx = effects
        self._shard_key = shard_key
        self._record_key = record_key
        self._list_key = list_key
        self._shard_of_sk = shard_of_sk
        self._pending_key = pending_key
        self._owner_check = owner_check
        self._epoch_floor = epoch_floor
        # the attribute by which a shard says which creation of its owner opened it (its
        # epoch_floor then): a finisher of an earlier creation's rebase never freezes it
        self._creation_mark = creation_mark

    # ---- reading -----------------------------------------------------------------------------------
    def read(self, owner: str, kind: str) -> ShardSet:
        """Every shard item of the kind: one consistent Query (16 shards are a few read units)."""
        pk, prefix = self._list_key(owner, kind)
        found: dict[int, Shard] = {}
        paginator = self._clients.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                n = self._shard_of_sk(str(item["sk"]["S"]))
                found[n] = Shard(n, CounterState.from_item(item))
        return ShardSet(found)

    def record(self, owner: str, kind: str) -> dict[str, Any] | None:
        return self._clients.dynamodb.get_item(
            TableName=self._table, Key=self._record_key(owner, kind), ConsistentRead=True
        ).get("Item")

    # ---- the admission -----------------------------------------------------------------------------
    def admit_once(
        self,
        owner: str,
        kind: str,
        shard: Shard,
        *,
        resource_id: str,
        token: str,
        units: int,
        hold: bool = False,
    ) -> Attempted:
        """One conditional write: ``units`` more on the shard, within its allowance as read (a
        hold's marks the shard ``holds_used``, as an admission on one item does)."""
        expr = UpdateExpr().add(BEST_EFFORT, units)
        range_delta(expr, range_of(resource_id), units, 0)
        expr.set_string(LAST_ADMISSION, token).set(LAST_ADMISSION_UNITS, expr.number(units))
        if hold:
            expr.set(HOLDS_USED, expr.value({"BOOL": True}))
        _within(expr, shard.allowance, units)
        _at_epoch(expr, shard.state.epoch)  # laid out by the rebase read (so its owner's creation)
        args = expr.update_key(self._table, self._shard_key(owner, kind, shard.number))
        args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return self._once(args)

    def grow_once(
        self, owner: str, kind: str, shard: Shard, *, resource_id: str, token: str, units: int, counted: bool
    ) -> Attempted:
        """One conditional write: a resize's ``units`` more for a resource the shard admitted
        (``eventual`` too if it counted it), within its allowance as read; ``last_resize`` names it."""
        expr = UpdateExpr().add(BEST_EFFORT, units).add(EVENTUAL, units if counted else 0)
        range_delta(expr, range_of(resource_id), units, units if counted else 0)
        expr.set_string(LAST_RESIZE, token)
        _within(expr, shard.allowance, units)
        _at_epoch(expr, shard.state.epoch)
        args = expr.update_key(self._table, self._shard_key(owner, kind, shard.number))
        args["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return self._once(args)

    # ---- moves -------------------------------------------------------------------------------------
    def gather(self, owner: str, kind: str, picture: ShardSet, to: int, need: int) -> bool:
        """Move allowance to shard ``to`` from the shards with the most spare until it has room
        for ``need`` more (False: a write was refused or failed; read again)."""
        receiver = picture.get(to)
        missing = need - max(0, receiver.room)
        donors = sorted(
            (s for s in picture.shards.values() if s.number != to and s.room > 0), key=lambda s: -s.room
        )
        for donor in donors:
            if missing <= 0:
                break
            # at least what is missing, up to half the donor's spare: fewer moves next time
            k = min(donor.room, max(missing, (donor.room + 1) // 2))
            if not self._move(owner, kind, donor, receiver, k):
                return False
            missing -= k
        return missing <= 0

    def _move(self, owner: str, kind: str, donor: Shard, receiver: Shard, k: int) -> bool:
        debit = UpdateExpr()
        debit.set(ALLOWANCE, debit.number(donor.allowance - k))
        _within(debit, donor.allowance, k)  # its used stays within what is left
        _at_epoch(debit, donor.state.epoch)
        attempt = self._once(debit.update_key(self._table, self._shard_key(owner, kind, donor.number)))
        if not attempt.applied:
            if attempt.effect is Effect.UNKNOWN:
                self._obs.count("AllowanceLost")  # at most k, until a reconcile
            return False
        credit = UpdateExpr().add(ALLOWANCE, k)
        allowance = credit.name(ALLOWANCE)
        credit.when(f"attribute_exists({allowance})")
        credit.when(f"attribute_not_exists({credit.name(REBASING)})")
        _at_epoch(credit, receiver.state.epoch)  # no rebase since it was read
        landed = self._once(credit.update_key(self._table, self._shard_key(owner, kind, receiver.number)))
        if landed.applied:
            self._obs.count("AllowanceMoved")
            return True
        # Not landed (refused: a rebase froze it or moved on; or failed): k is lost until a
        # reconcile, never created. An unknown outcome may have landed: read again either way.
        self._obs.count("AllowanceLost")
        return False

    # ---- rebases -----------------------------------------------------------------------------------
    def rebase(
        self,
        owner: str,
        kind: str,
        basis: Basis,
        *,
        shards: int,
        favour: int = 0,
        needed: Callable[[ShardSet], bool] | None = None,
        strict: Basis | None = None,
        creation: int | None = None,
    ) -> None:
        """Lay allowances out for ``basis`` over at least ``shards`` shards: a rebase already
        under way is finished first (the caller reads again); this one is started only if
        ``needed`` still says so of a picture read after finding no record (another process may
        have laid the same out meanwhile). ``strict``: the basis to keep if the frozen shards
        hold more than ``basis`` (a lowering that is not forced; ``basis`` is then laid out as
        asked, without an override on shard 0 replacing it). ``creation``: the creation of the
        owner the caller judged by (its ``owner_check`` then refuses another: OwnerGone)."""
        for _ in range(ATTEMPTS):
            record = self.record(owner, kind)
            if record is not None:
                self.finish(owner, kind, record)
                return  # the caller reads again: what it asked for may be done, or not needed
            picture = self.read(owner, kind)
            if needed is not None and not needed(picture):
                return
            numbers = sorted(set(range(shards)) | set(picture.shards))
            if strict is not None and picture.basis != strict:
                # Laid out otherwise since the caller read the basis it would keep (another
                # lowering, a later view of the plan): keeping the caller's could lay out an older
                # plan over a newer one, or undo a lowering (review 53: 10 live of 7). It reads again.
                return
            if strict is None and basis.lowering_until is not None and picture.basis != basis:
                # A lowering is laid out again (a reconcile, a shard not laid out yet) only while
                # it is what is laid out: one read before a plan or an override was laid out over
                # it would undo them (review 55: 6 live of a plan's 5; 409s under a raise to 12).
                return
            target = basis if strict is not None else self._target(picture, basis)
            floor = 0 if self._epoch_floor is None else self._epoch_floor(owner)
            epoch = max(picture.epoch, floor) + 1
            now = self._fx.clock()
            item = {
                **self._record_key(owner, kind),
                EPOCH: {"N": str(epoch)},
                BASIS: {"N": str(target.limit)},
                BASIS_SOURCE: {"S": target.source},
                "shards": {"NS": [str(n) for n in numbers]},
                "favour": {"N": str(favour)},
                "pending_shard": {"S": self._pending_key(owner, kind)},
                "pending_since": {"S": iso_utc(now)},
            }
            if strict is not None:
                item[KEPT] = {"N": str(strict.limit)}
                item[KEPT_SOURCE] = {"S": strict.source}
            if not self._put_record(owner, item, creation):
                continue  # another rebase started: finish it
            self._obs.count("Rebased")
            self.finish(owner, kind, item, known=set(picture.shards))
            return
        raise _busy()

    def _put_record(self, owner: str, item: dict[str, Any], creation: int | None = None) -> bool:
        """Step 1, only while no rebase of the kind is under way (False: one is) and, with
        ``owner_check``, only while its owner takes changes: an owner being deleted removes its
        records before its shards, and a shard is created only while its rebase's record is there
        (``_freeze``), so nothing is laid out again after the owner's deletion. An owner created
        again under its id has an ``epoch_floor`` above every epoch of the old one, and the check
        refuses an epoch below it: a rebase computed on the old one never lands on the new one,
        and a late finisher of the old one meets no record, mark or shard of its epoch there."""
        put = {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        if self._owner_check is None:
            return self._conditional(self._clients.dynamodb.put_item, **put)
        epoch = int(item[EPOCH]["N"])
        refused = transact_conditionally(
            self._clients.dynamodb, [{"Put": put}, self._owner_check(owner, epoch, creation)], self._fx.retry
        )
        if refused is None:
            return True
        if refused[1] is not None:
            raise OwnerGone("the counter's owner is being deleted or is gone; nothing was changed")
        return False

    def _target(self, picture: ShardSet, asked: Basis) -> Basis:
        """An override on shard 0 wins (governance keeps it there), but not over a lower limit a
        lowering laid out first, within its window (lower_first: a reconcile then is laid out
        for the lowering; review 53: the standing override laid out again in the window, the
        lowering refused by admissions made in it); else what was asked, unless it is a view of
        the plan older than the one laid out since the caller read."""
        override = picture.get(0).state.limit
        if override is not None:
            until = asked.lowering_until
            if until is not None and until > self._fx.clock() and asked.limit < override:
                return asked
            return Basis(override, OVERRIDE)
        return _not_older(picture, asked)

    def finish(self, owner: str, kind: str, record: dict[str, Any], known: set[int] | None = None) -> None:
        """Complete a rebase from its record (steps 2 to 4; each step conditional and idempotent).

        A record can outlive its rebase's epoch: its put was read at epoch e - 1 and another
        process's whole rebase of epoch e fitted between that read and the put (or the put's
        response was lost and botocore's resend came after that rebase). Such a record has no
        plan and finds its epoch applied: it is removed, with any freeze mark its finishers left
        on shards the applied plan did not cover. ``known``: the shards the caller's picture had
        (the rebase that put the record read it just before), so the freeze need not read them
        again; stale, it only sends a shard's mark the other way, each way conditional."""
        epoch = int(record[EPOCH]["N"])
        numbers = sorted(int(n) for n in record["shards"]["NS"])
        plan = _plan_of(record)
        if plan is None:
            picture = self._freeze(owner, kind, numbers, epoch, known)
            if picture.epoch >= epoch:
                # laid out already: by this record's plan (apply what is left of it), or by
                # another rebase of the epoch (this record is left over: remove it)
                current = self._record_at(owner, kind, epoch)
                plan = None if current is None else _plan_of(current)
                if plan is None:
                    if current is not None:
                        self._drop_record(owner, kind, epoch, unplanned=True)
                    self._thaw(owner, kind, picture, epoch)
                    return
            else:
                numbers = sorted(set(numbers) | set(picture.shards))
                plan = self._record_plan(owner, kind, epoch, _plan_for(record, picture, numbers))
                if plan is None:
                    return  # finished by another process meanwhile
        for n, allowance in sorted(plan.allowances.items()):
            self._apply(owner, kind, n, epoch=epoch, basis=plan.basis, allowance=allowance)
        self._drop_record(owner, kind, epoch, unplanned=False)

    def _drop_record(self, owner: str, kind: str, epoch: int, *, unplanned: bool) -> None:
        condition = "#e = :e" + (" AND attribute_not_exists(#plan)" if unplanned else "")
        names = {"#e": EPOCH, **({"#plan": "plan"} if unplanned else {})}
        self._conditional(
            self._clients.dynamodb.delete_item,
            TableName=self._table,
            Key=self._record_key(owner, kind),
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":e": {"N": str(epoch)}},
        )

    def _thaw(self, owner: str, kind: str, picture: ShardSet, epoch: int) -> None:
        """Remove the freeze marks of an epoch that is laid out from the shards it did not lay
        out (marks a late finisher made, on shards it created): nothing will ever apply them.
        Conditional on the mark and on the shard not being laid out at the epoch, so a later
        rebase's marks are never touched."""
        for shard in picture.shards.values():
            if shard.state.rebasing != epoch or shard.state.epoch >= epoch:
                continue
            expr = UpdateExpr().remove(REBASING)
            e, r, at = expr.name(EPOCH), expr.name(REBASING), expr.number(epoch)
            expr.when(f"{r} = {at}")
            expr.when(f"attribute_not_exists({e}) OR {e} < {at}")
            self._conditional(
                self._clients.dynamodb.update_item,
                **expr.update_key(self._table, self._shard_key(owner, kind, shard.number)),
            )

    def _freeze(
        self, owner: str, kind: str, numbers: list[int], epoch: int, known: set[int] | None = None
    ) -> ShardSet:
        """Mark every shard (creating the new ones); then the picture, once all are marked, or
        as soon as one is laid out at the epoch or later (the rebase is applied, or under way
        from its plan), or once the record of the epoch is gone (finished by another process,
        or removed by the owner's deletion: ``finish`` then writes nothing more)."""
        if known is None:
            known = set(self.read(owner, kind).shards)
        for _ in range(ATTEMPTS):
            recorded = all(self._mark(owner, kind, n, epoch, exists=n in known) for n in numbers)
            picture = self.read(owner, kind)
            if picture.epoch >= epoch or not recorded:
                return picture
            if all(s.state.rebasing == epoch for s in picture.shards.values()) and set(numbers) <= set(
                picture.shards
            ):
                return picture
            known = set(picture.shards)
            numbers = sorted(set(numbers) | known)
        raise _busy()

    def _mark(self, owner: str, kind: str, n: int, epoch: int, *, exists: bool) -> bool:
        """One shard's freeze mark: an existing shard's while it exists; a new shard is created
        only in a transaction with a check that the epoch's record is still there, so a finisher
        that outlived its rebase (or its owner) never leaves an item behind. False: that record
        is gone."""
        expr = UpdateExpr()
        expr.set(REBASING, expr.number(epoch))
        e, r = expr.name(EPOCH), expr.name(REBASING)
        at = expr.number(epoch)
        # not applied yet, and not frozen by a later rebase (an earlier one's stale mark on an
        # item is overwritten)
        expr.when(f"attribute_not_exists({e}) OR {e} < {at}")
        expr.when(f"attribute_not_exists({r}) OR {r} <= {at}")
        if exists:
            expr.when("attribute_exists(pk)")
            if self._creation_mark is not None:
                # not opened by a later creation of the owner (a single item, no epoch of its own:
                # a stalled finisher of a deleted one's rebase froze it for good; review 39)
                m = expr.name(self._creation_mark)
                expr.when(f"attribute_not_exists({m}) OR {m} < {at}")
            self._conditional(
                self._clients.dynamodb.update_item,
                **expr.update_key(self._table, self._shard_key(owner, kind, n)),
            )
            return True
        check = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self._record_key(owner, kind),
                "ConditionExpression": "#e = :e",
                "ExpressionAttributeNames": {"#e": EPOCH},
                "ExpressionAttributeValues": {":e": {"N": str(epoch)}},
            }
        }
        update = expr.update_key(self._table, self._shard_key(owner, kind, n))
        refused = transact_conditionally(self._clients.dynamodb, [{"Update": update}, check], self._fx.retry)
        return refused is None or refused[1] is None

    def _record_plan(self, owner: str, kind: str, epoch: int, plan: Plan) -> Plan | None:
        """Write the plan on the record unless one is there; the one there is the plan."""
        values: dict[str, Any] = {
            ":e": {"N": str(epoch)},
            ":plan": {"M": {str(n): {"N": str(a)} for n, a in plan.allowances.items()}},
            ":limit": {"N": str(plan.basis.limit)},
            ":source": {"S": plan.basis.source},
        }
        if self._conditional(
            self._clients.dynamodb.update_item,
            TableName=self._table,
            Key=self._record_key(owner, kind),
            UpdateExpression="SET #plan = :plan, #limit = :limit, #source = :source",
            ConditionExpression="#e = :e AND attribute_not_exists(#plan)",
            ExpressionAttributeNames={
                "#plan": "plan",
                "#e": EPOCH,
                "#limit": PLAN_LIMIT,
                "#source": PLAN_SOURCE,
            },
            ExpressionAttributeValues=values,
        ):
            return plan
        record = self._record_at(owner, kind, epoch)
        return None if record is None else _plan_of(record)  # None: gone, the rebase finished

    def _apply(self, owner: str, kind: str, n: int, *, epoch: int, basis: Basis, allowance: int) -> None:
        expr = UpdateExpr()
        expr.set(ALLOWANCE, expr.number(allowance)).set(BASIS, expr.number(basis.limit))
        expr.set_string(BASIS_SOURCE, basis.source).set(EPOCH, expr.number(epoch)).remove(REBASING)
        expr.when(f"{expr.name(REBASING)} = {expr.number(epoch)}")
        self._conditional(
            self._clients.dynamodb.update_item,
            **expr.update_key(self._table, self._shard_key(owner, kind, n)),
        )

    def _conditional(self, call: Callable[..., Any], **request: Any) -> bool:
        """One write, retried on conflicts and throttling (every rebase step is idempotent):
        False when its condition refused it (another process got there first), which is an
        answer, not an error."""
        try:
            retry_conflicts(partial(call, **request), self._fx.retry)
        except ClientError as error:
            if error_code(error) != CONDITION_FAILED:
                raise
            return False
        return True

    def _record_at(self, owner: str, kind: str, epoch: int) -> dict[str, Any] | None:
        """The kind's rebase record if it is still the one of ``epoch``."""
        record = self.record(owner, kind)
        return None if record is None or int(record[EPOCH]["N"]) != epoch else record

    def _once(self, args: dict[str, Any]) -> Attempted:
        return attempt_write(
            lambda: self._clients.dynamodb_single_attempt.update_item(**args), self._fx.retry
        )


def _within(expr: UpdateExpr, allowance: int, units: int) -> None:
    """The shard's allowance is the one read, it is not frozen, and both its counters leave room
    for ``units`` under it."""
    a, be, ev = expr.name(ALLOWANCE), expr.name(BEST_EFFORT), expr.name(EVENTUAL)
    room = expr.number(allowance - units)
    expr.when(f"{a} = {expr.number(allowance)}")
    expr.when(f"attribute_not_exists({expr.name(REBASING)})")
    expr.when(f"attribute_not_exists({be}) OR {be} <= {room}")
    expr.when(f"attribute_not_exists({ev}) OR {ev} <= {room}")


def _at_epoch(expr: UpdateExpr, epoch: int) -> None:
    e = expr.name(EPOCH)
    expr.when(f"{e} = {expr.number(epoch)}" if epoch else f"attribute_not_exists({e})")


def _plan_for(record: dict[str, Any], picture: ShardSet, numbers: list[int]) -> Plan:
    """Step 3: the plan from the frozen picture. A strict record (a lowering that is not forced)
    lays its basis out only if the frozen shards hold no more than it; else the basis it keeps."""
    basis = Basis(int(record[BASIS]["N"]), str(record[BASIS_SOURCE]["S"]))
    favour = int(record.get("favour", {}).get("N", "0"))
    if KEPT in record and picture.used > basis.limit:
        basis = Basis(int(record[KEPT]["N"]), str(record[KEPT_SOURCE]["S"]))
    return Plan(basis, lay_out(picture, numbers, basis, favour))


def _plan_of(record: dict[str, Any]) -> Plan | None:
    plan = record.get("plan", {}).get("M")
    if plan is None:
        return None
    limit = record.get(PLAN_LIMIT, record[BASIS])
    source = record.get(PLAN_SOURCE, record[BASIS_SOURCE])
    return Plan(Basis(int(limit["N"]), str(source["S"])), {int(n): int(a["N"]) for n, a in plan.items()})


def _not_older(picture: ShardSet, asked: Basis) -> Basis:
    """``asked``, or the basis laid out if that is a later view of the plan: a caller's basis
    comes from a picture read before ``rebase`` read this one, and another process with a
    newer plan may have laid that out between the two. Laying the older view out over it let
    every process still caching that view admit against the older limit (review 48: 10 live
    of 6, by a reconcile and by a create laying out a new shard)."""
    laid = picture.basis
    if (
        asked.plan_tag is not None
        and laid is not None
        and laid.plan_tag is not None
        and laid.plan_tag > asked.plan_tag
    ):
        return laid
    return asked


def _busy() -> Exception:
    return InProgress("the organization's counter is being rebalanced; retry the request")
