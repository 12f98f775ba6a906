"""The sequential specification of the API, and a check that concurrent answers fit it.

A run's operations are linearizable if some order of them, consistent with real time (an
operation that finished before another started comes first), applied one at a time to this
model, gives every answer they got and the resources visible at the end (each with its units).
An operation that failed without a definite answer (429, 503, or killed) may or may not have
taken effect.

The model keeps, per kind of resource, the live resources with their units and the account's
override; and the account's plan and every plan's limits. A create of n units of a kind is
admitted iff the units held of that kind plus n fit under its limit: the override if set, else
the plan's limit for the kind, else 0 (design.md §5.5). A resize (PATCH) to t units of a
resource of u: 404 if absent; 200 if t == u (a retried PATCH is a no-op) or t < u; a growth
answers 200 iff the held units plus t - u fit, else 409. Limits are judged where the operation
is placed in the order, so a create racing a limit or plan change may be judged by the old or
the new limit (the explorer runs every operation concurrently).

Organizations (orgs.py): a model kind ``<who>/<kind>`` is that kind of the member account
``who`` (A or B), whose own limit is its override; an account that is a member of the
organization is also judged by the organization's limit for the kind (its override, as the
explorer sets it), against the units all members hold of it. A create is admitted iff it fits
both; a refusal names the level that refused (``409/account`` or ``409/organization``), which
must be a level it does not fit (where both are full, either). A membership change (join,
leave) answers ``changed`` or ``unchanged`` (already so), and is refused (``not-empty``) while
the account holds anything; the domain also refuses it while the account has an item no caller
can see (a create still running, or one whose undoing is left to the sweeper), which the
explorer saw during the change (``busy``): then ``not-empty`` is one of its answers too.
The organization may be deleted (only without members; a join then answers 404) and created
again under its id (``recreate``, ORG_ADMIN_OPS): each creation is an organization of its own,
with its own limit and the members that joined it, holding their units only (a member joins only
while empty, so the live resources of the current creation's members are all it holds).

Requests that died before the run (a delete stuck with its claim, a create left pending) are
operations that never ended: they may take effect at any point, but only on the incarnation they
were made on (``delete0``, ``create0``): once the id has been created again by an operation of
the run (``fresh``), they can no longer touch it. Repairs (the audit, the recount, TTL) are not
API operations: whatever they do must be what one of the dead requests could have done, or the
undoing of what only a dead create did (its resource never became visible; it is rolled back).

Holds (design.md §12): a hold is a live resource with a deadline (``held``). The deadline is in
the future for the processes that create and confirm it, and in the past for the ones that
expire it (the sweeper, a create refused for room), so that, whatever their order, a confirm and
an expiry meet on the one item. A confirm makes a held resource permanent (200; again: 200); an
expiry releases every held resource (for a reclaim: refused at its account, the account's of its
kind; refused at its organization, every member's of the kind) and remembers it (``expired``):
a confirm after that answers HoldExpired, never 200, and a confirm of an id that was never a
hold that expired answers 404. The resources still held at the end must be exactly the model's
(a confirm that answered 200 left a permanent resource, never one still held).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from hybrid_counter.keys import DEFAULT_KIND

CREATED, EXISTS, REFUSED, DELETED, ABSENT, LIMIT_SET, RESIZED = 201, 200, 409, 204, 404, 2000, 200
CONFLICT = "conflict"  # IdempotencyConflict: a PUT of an existing id with another body (units)
HOLD_EXPIRED = "expired"  # 409 HoldExpired: a confirm of a hold whose deadline passed (holds.py)
# Operations on holds: a confirm (by a process whose clock is before the hold's deadline), an
# expiry (the sweeper's, by a process whose clock is past it: answers how many it expired) and a
# create refused for room that expires the account's expired holds of its kind and is judged
# again (a "reclaim": a POST by a process whose clock is past the deadline).
HOLD_OPS = frozenset({"confirm", "expire", "reclaim"})
MAYBE = frozenset({429, 503, "crash"})
NEVER_ENDED = 10**9  # the end step of a request that died before the run
REPAIR = "repair"
# Operations that change limits: answered LIMIT_SET. The explorer sends them forced (a change
# below current use is refused unless forced, which decides nothing about admission: tested in
# tests/integration/test_governance.py), so the model never refuses one.
LIMIT_OPS = frozenset({"limit", "unlimit", "plan", "assign", "org_limit"})
MEMBERSHIP_OPS = frozenset({"join", "leave"})
# An organization's own operations: its deletion (DELETE /orgs: 204, not-empty while it has
# members, 404 once gone), its split (set_org_shards: changed, 404 once gone), which no create is
# judged by; and its creation again under its id once deleted (``recreate``: PUT /orgs/{id} on a
# plan of ``arg`` units of the default kind, forced: 201 and a new creation, without members or
# overrides, while it is gone; 200 and a move to that plan while it is there, which changes the
# limit of the kinds without an override; 503 while a deletion is unfinished, as any 503).
RECREATE = "recreate"
ORG_ADMIN_OPS = frozenset({"org_delete", "org_shards", RECREATE})
CHANGED, UNCHANGED, NOT_EMPTY = "changed", "unchanged", "not-empty"  # a membership change's answers
SCOPES = ("account", "organization")  # the levels a create's refusal names (orgs.py)

Key = tuple[str, str]  # (kind, resource id)
Held = tuple[str, str, int]  # (kind, resource id, units)
Limits = tuple[tuple[str, int], ...]  # (kind, limit), sorted


@dataclass(frozen=True)
class Done:
    """An operation as it ended: what it was, its answer, and when it started and ended (steps)."""

    kind: str  # post | put | delete | patch | limit | unlimit | plan | assign | create0 | delete0 | repair | confirm | expire | reclaim
    arg: object
    answer: int | str
    started: int
    ended: int
    created_id: str | None = None  # the id a POST got
    # The create made its resource live without a known admission (outcome unknown and not
    # resolved, or a stale pending item adopted): P1's one exception, it may go past the limit.
    past_limit_allowed: bool = False
    of: str = DEFAULT_KIND  # the kind of resource it acts on (its counter item)
    units: int = 1  # a create's units, a resize's target
    # Organizations: the create went live without a known admission at the organization's level
    # (P1's exception there); a membership change saw its account hold an invisible item.
    past_org_limit_allowed: bool = False
    busy: bool = False
    hold: bool = False  # a create that asks for a hold (hold_seconds)


@dataclass(frozen=True)
class Model:
    live: frozenset[Held]
    overrides: Limits = ()  # the account's override per kind (on the kind's counter item)
    plan: str = "a"  # the plan the account is on
    plans: tuple[tuple[str, Limits], ...] = ()  # every plan's limits, by plan name
    fresh: frozenset[Key] = frozenset()  # resources created (again) by an operation of the run
    dead_created: frozenset[Key] = frozenset()  # live resources only a dead create (create0) made
    org_limits: Limits = ()  # the organization's limit per kind (its kinds are "<who>/<kind>")
    members: frozenset[str] = frozenset()  # the accounts (who) in the organization
    held: frozenset[Key] = frozenset()  # live resources that are holds not confirmed yet
    expired: frozenset[Key] = frozenset()  # ids whose hold expired (a confirm answers HoldExpired)
    org_gone: bool = False  # the organization was deleted (DELETE /orgs answered 204)
    org_overridden: frozenset[str] = frozenset()  # the kinds the organization has an override of

    # ---- what the model holds ---------------------------------------------------------------------
    def units_of(self, key: Key) -> int | None:
        return next((units for kind, rid, units in self.live if (kind, rid) == key), None)

    def used(self, kind: str) -> int:
        return sum(units for k, _, units in self.live if k == kind)

    def limit_of(self, kind: str) -> int:
        """The override if set, else the account's plan's limit for the kind, else 0."""
        override = dict(self.overrides).get(kind)
        if override is not None:
            return override
        return dict(dict(self.plans).get(self.plan, ())).get(kind, 0)

    def fits_org(self, kind: str, more: int) -> bool:
        """``more`` units of ``kind`` (``<who>/<kind>``) fit the organization's limit, or the
        account is in none."""
        who, member, of = kind.partition("/")
        if not member or who not in self.members:
            return True
        held = sum(
            units
            for k, _, units in self.live
            if k.partition("/")[2] == of and k.partition("/")[0] in self.members
        )
        return held + more <= dict(self.org_limits).get(of, 0)

    def keys(self) -> frozenset[Key]:
        return frozenset((kind, rid) for kind, rid, _ in self.live)

    def without(self, key: Key) -> Model:
        live = frozenset(held for held in self.live if held[:2] != key)
        return replace(self, live=live, dead_created=self.dead_created - {key}, held=self.held - {key})

    def expiring(self, kind: str | None = None) -> Model:
        """Every held resource (of ``kind``) released by an expiry, and remembered as expired."""
        gone = frozenset(key for key in self.held if kind is None or key[0] == kind)
        model = self
        for key in sorted(gone):
            model = model.without(key)
        return replace(model, expired=model.expired | gone)

    def holding(self, key: Key, units: int) -> Model:
        live = frozenset(held for held in self.live if held[:2] != key) | {(*key, units)}
        return replace(self, live=live)

    # ---- applying one operation -------------------------------------------------------------------
    def apply(self, op: Done) -> tuple[int | str, Model]:
        if op.kind in LIMIT_OPS:
            return LIMIT_SET, self._limits(op)
        if op.kind == REPAIR:
            return op.answer, self
        if op.kind in MEMBERSHIP_OPS:
            return self._membership(op)
        if op.kind in ORG_ADMIN_OPS:
            return self._org_admin(op)
        if op.kind == "expire":
            return len(self.held), self.expiring()
        key = (op.of, str(op.arg if op.kind not in ("post", "reclaim") else op.created_id))
        flows = {
            "create0": self._dead,
            "delete0": self._dead,
            "post": self._create,
            "put": self._create,
            "reclaim": self._create,
            "patch": self._resize,
            "confirm": self._confirm,
        }
        return flows.get(op.kind, self._delete)(op, key)

    def _delete(self, _: Done, key: Key) -> tuple[int | str, Model]:
        if self.units_of(key) is not None:
            return DELETED, self.without(key)
        return ABSENT, self

    def _limits(self, op: Done) -> Model:
        if op.kind == "limit":
            assert isinstance(op.arg, int)
            return replace(self, overrides=_set(self.overrides, op.of, op.arg))
        if op.kind == "unlimit":
            return replace(self, overrides=tuple(p for p in self.overrides if p[0] != op.of))
        if op.kind == "assign":
            return replace(self, plan=str(op.arg))
        if op.kind == "org_limit":
            assert isinstance(op.arg, int)
            return replace(
                self,
                org_limits=_set(self.org_limits, op.of, op.arg),
                org_overridden=self.org_overridden | {op.of},
            )
        arg: Any = op.arg
        plan, limits = arg
        return replace(self, plans=_set(self.plans, str(plan), tuple(sorted(limits))))

    def _fits(self, kind: str, more: int) -> bool:
        return self.used(kind) + more <= self.limit_of(kind)

    def _create(self, op: Done, key: Key) -> tuple[int | str, Model]:
        units = self.units_of(key)
        if op.kind == "put" and units is not None:
            return (EXISTS if units == op.units else CONFLICT), self
        full = [
            scope
            for scope, fits in (
                ("account", self._fits(op.of, op.units) or op.past_limit_allowed),
                ("organization", self.fits_org(op.of, op.units) or op.past_org_limit_allowed),
            )
            if not fits
        ]
        if full and op.kind == "reclaim":
            reclaimed = self._reclaimed(op)
            if reclaimed is not self:
                return reclaimed._create(replace(op, kind="post"), key)
        if full and "/" not in op.of:
            return REFUSED, self
        if full:  # a member's: the refusal names a level that is full
            named = [f"{REFUSED}/{scope}" for scope in full]
            return (op.answer if op.answer in named else named[0]), self
        made = replace(self.holding(key, op.units), fresh=self.fresh | {key})
        if op.hold:
            made = replace(made, held=made.held | {key})
        if op.answer == "crash" and "/" in op.of:
            # A member's create whose process died: it may hold a slot nobody sees until a repair
            # (the sweeper) undoes it, as a dead create's (orgs.py)
            made = replace(made, dead_created=made.dead_created | {key})
        return CREATED, made

    def reclaimed_candidates(self, op: Done) -> tuple[Model, ...]:
        """What a reclaim that gave no definite answer may have expired before it gave up: its
        account's holds of the kind, or (refused at its organization) every member's, or both."""
        own = self.expiring(op.of)
        return (own, self._members_expiring(op.of), own._members_expiring(op.of))

    def _members_expiring(self, of: str) -> Model:
        """Every member's held resources of ``of``'s kind released by an expiry (the organization's
        reclaim); self for an account in no organization."""
        who, _, base = of.partition("/")
        if not base or who not in self.members:
            return self
        model = self
        for kind in sorted({k[0] for k in self.held if k[0].partition("/")[2] == base}):
            if kind.partition("/")[0] in self.members:
                model = model.expiring(kind)
        return model

    def _reclaimed(self, op: Done) -> Model:
        """A create refused for room, as service._reclaiming reclaims: refused at its account,
        the account's expired holds of the kind; then (or at once, its account with room) refused
        at its organization, every member's of the kind. Self if none was there to release."""
        model = self
        if not model._fits(op.of, op.units) and any(k[0] == op.of for k in model.held):
            model = model.expiring(op.of)
        if model._fits(op.of, op.units) and not model.fits_org(op.of, op.units):
            model = model._members_expiring(op.of)
        return model

    def _resize(self, op: Done, key: Key) -> tuple[int | str, Model]:
        units = self.units_of(key)
        if units is None:
            return ABSENT, self
        if op.units > units and not self._fits(op.of, op.units - units):
            return REFUSED, self
        return RESIZED, self.holding(key, op.units)

    def _confirm(self, _: Done, key: Key) -> tuple[int | str, Model]:
        """A hold made permanent (200, again 200: a confirmed resource too); HoldExpired once it
        expired; 404 if there is no such resource."""
        if self.units_of(key) is not None:
            return EXISTS, replace(self, held=self.held - {key})
        return (HOLD_EXPIRED if key in self.expired else ABSENT), self

    def _membership(self, op: Done) -> tuple[int | str, Model]:
        """The account joins or leaves the organization, only while it holds nothing."""
        who = str(op.arg)
        if op.kind == "join" and self.org_gone:
            return ABSENT, self  # (a leave: it was no member, as no organization deleted has one)
        if (who in self.members) == (op.kind == "join"):
            return UNCHANGED, self
        if any(kind.partition("/")[0] == who for kind, _, _ in self.live) or (
            op.busy and op.answer == NOT_EMPTY
        ):
            return NOT_EMPTY, self
        members = self.members | {who} if op.kind == "join" else self.members - {who}
        return CHANGED, replace(self, members=members)

    def _org_admin(self, op: Done) -> tuple[int | str, Model]:
        """The organization deleted (only without members) or split; 404 once it is gone. Or
        created again (recreate): while it is gone, a new creation (201) on the plan of ``arg``
        units of the default kind, without members or overrides (its counters start from
        nothing); while it is there, a move to that plan (200): the kinds without an override
        take its limit."""
        if op.kind == RECREATE:
            assert isinstance(op.arg, int)
            plan = {DEFAULT_KIND: op.arg}
            if self.org_gone:
                fresh = tuple(sorted(plan.items()))
                return CREATED, replace(self, org_gone=False, org_limits=fresh, org_overridden=frozenset())
            kinds = {kind for kind, _ in self.org_limits} | set(plan)
            limits = dict(self.org_limits)
            moved = {k: limits[k] if k in self.org_overridden else plan.get(k, 0) for k in kinds}
            return EXISTS, replace(self, org_limits=tuple(sorted(moved.items())))
        if self.org_gone:
            return ABSENT, self
        if op.kind == "org_shards":
            return LIMIT_SET, self
        if self.members:
            return NOT_EMPTY, self
        return DELETED, replace(self, org_gone=True)

    def _dead(self, op: Done, key: Key) -> tuple[int | str, Model]:
        """A request that died before the run, on the incarnation it was made on only."""
        if key in self.fresh:
            return op.answer, self
        if op.kind == "create0" and self.units_of(key) is None:
            made = self.holding(key, op.units)
            return CREATED, replace(made, dead_created=self.dead_created | {key})
        if op.kind == "delete0" and self.units_of(key) is not None:
            return DELETED, self.without(key)
        return op.answer, self


def _set[V](pairs: tuple[tuple[str, V], ...], name: str, value: V) -> tuple[tuple[str, V], ...]:
    return tuple(sorted({**dict(pairs), name: value}.items()))


def _orders(ops: list[Done]) -> Iterable[tuple[Done, ...]]:
    for order in itertools.permutations(ops):
        if all(not (b.ended < a.started) for i, a in enumerate(order) for b in order[i + 1 :]):
            yield order


def explain(
    initial: Model,
    ops: list[Done],
    final_live: frozenset[Held],
    final_held: frozenset[Key] | None = None,
) -> tuple[Done, ...] | None:
    """An order that explains every answer and the final state, or None. ``final_held``: the
    resources still held (holds not confirmed) at the end, checked too when given."""
    for order in _orders(ops):
        if _fits(initial, order, final_live, final_held):
            return order
    return None


def _fits(
    model: Model,
    order: tuple[Done, ...],
    final_live: frozenset[Held],
    final_held: frozenset[Key] | None = None,
) -> bool:
    if not order:
        return model.live == final_live and (final_held is None or model.held == final_held)
    op, rest = order[0], order[1:]
    if op.answer in MAYBE:
        if op.kind in ("post", "reclaim") and op.created_id is None:
            # (no id of its own answered: nothing it created can be live; a reclaim may still
            # have expired the holds, before it gave up)
            expiring = model.reclaimed_candidates(op) if op.kind == "reclaim" else ()
            return any(_fits(candidate, rest, final_live, final_held) for candidate in (model, *expiring))
        _, after = model.apply(op)
        # a reclaim may also have expired the holds and not been admitted
        expired = model.reclaimed_candidates(op) if op.kind == "reclaim" else ()
        return any(_fits(candidate, rest, final_live, final_held) for candidate in (model, after, *expired))
    if op.kind == REPAIR:
        # A repair may undo what only a dead create did (rolled back, its records lost): that
        # create held its slot, invisibly, until then (design.md P5).
        undone = (model.without(key) for key in sorted(model.dead_created & model.keys()))
        return any(_fits(candidate, rest, final_live, final_held) for candidate in (model, *undone))
    expected, after = model.apply(op)
    if op.kind in LIMIT_OPS:
        return _fits(after, rest, final_live, final_held)
    return expected == op.answer and _fits(after, rest, final_live, final_held)
