"""The sequential specification of the API, and a check that concurrent answers fit it.

A run's operations are linearizable if some order of them, consistent with real time (an
operation that finished before another started comes first), applied one at a time to this
model, gives every answer they got and the resources visible at the end. An operation that
failed without a definite answer (429, 503, or killed) may or may not have taken effect.

Requests that died before the run (a delete stuck with its claim, a create left pending) are
operations that never ended: they may take effect at any point, but only on the incarnation they
were made on (``delete0``, ``create0``): once the id has been created again by an operation of
the run (``fresh``), they can no longer touch it. Repairs (the audit, the recount, TTL) are not
API operations: whatever they do must be what one of the dead requests could have done, or the
undoing of what only a dead create did (its resource never became visible; it is rolled back).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

CREATED, EXISTS, REFUSED, DELETED, ABSENT, LIMIT_SET = 201, 200, 409, 204, 404, 2000
MAYBE = frozenset({429, 503, "crash"})
NEVER_ENDED = 10**9  # the end step of a request that died before the run
REPAIR = "repair"


@dataclass(frozen=True)
class Done:
    """An operation as it ended: what it was, its answer, and when it started and ended (steps)."""

    kind: str  # post | put | delete | limit
    arg: str | int | None
    answer: int | str
    started: int
    ended: int
    created_id: str | None = None  # the id a POST got
    # The create made its resource live without a known admission (outcome unknown and not
    # resolved, or a stale pending item adopted): P1's one exception, it may go past the limit.
    past_limit_allowed: bool = False


@dataclass(frozen=True)
class Model:
    live: frozenset[str]
    limit: int
    fresh: frozenset[str] = frozenset()  # ids created (again) by an operation of the run
    dead_created: frozenset[str] = frozenset()  # live ids only a dead create (create0) made

    def apply(self, op: Done) -> tuple[int | str, Model]:
        if op.kind == "limit":
            assert isinstance(op.arg, int)
            return LIMIT_SET, Model(self.live, op.arg, self.fresh, self.dead_created)
        if op.kind == REPAIR:
            return op.answer, self
        rid = str(op.arg if op.kind != "post" else op.created_id)
        if op.kind in ("create0", "delete0"):
            return self._dead(op, rid)
        if op.kind in ("post", "put"):
            return self._create(op, rid)
        if rid in self.live:
            return DELETED, self.without(rid)
        return ABSENT, self

    def without(self, rid: str) -> Model:
        return Model(self.live - {rid}, self.limit, self.fresh, self.dead_created - {rid})

    def _create(self, op: Done, rid: str) -> tuple[int | str, Model]:
        if op.kind == "put" and rid in self.live:
            return EXISTS, self
        if len(self.live) >= self.limit and not op.past_limit_allowed:
            return REFUSED, self
        return CREATED, Model(self.live | {rid}, self.limit, self.fresh | {rid}, self.dead_created)

    def _dead(self, op: Done, rid: str) -> tuple[int | str, Model]:
        """A request that died before the run, on the incarnation it was made on only."""
        if rid in self.fresh:
            return op.answer, self
        if op.kind == "create0" and rid not in self.live:
            return CREATED, Model(self.live | {rid}, self.limit, self.fresh, self.dead_created | {rid})
        if op.kind == "delete0" and rid in self.live:
            return DELETED, self.without(rid)
        return op.answer, self


def _orders(ops: list[Done]) -> Iterable[tuple[Done, ...]]:
    for order in itertools.permutations(ops):
        if all(not (b.ended < a.started) for i, a in enumerate(order) for b in order[i + 1 :]):
            yield order


def explain(initial: Model, ops: list[Done], final_live: frozenset[str]) -> tuple[Done, ...] | None:
    """An order that explains every answer and the final state, or None."""
    for order in _orders(ops):
        if _fits(initial, order, final_live):
            return order
    return None


def _fits(model: Model, order: tuple[Done, ...], final_live: frozenset[str]) -> bool:
    if not order:
        return model.live == final_live
    op, rest = order[0], order[1:]
    if op.answer in MAYBE:
        if op.kind == "post" and op.created_id is None:
            return _fits(model, rest, final_live)
        _, after = model.apply(op)
        return _fits(model, rest, final_live) or _fits(after, rest, final_live)
    if op.kind == REPAIR:
        # A repair may undo what only a dead create did (rolled back, its records lost): that
        # create held its slot, invisibly, until then (design.md P5).
        undone = (model.without(rid) for rid in sorted(model.dead_created & model.live))
        return any(_fits(candidate, rest, final_live) for candidate in (model, *undone))
    expected, after = model.apply(op)
    if op.kind == "limit":
        return _fits(after, rest, final_live)
    return expected == op.answer and _fits(after, rest, final_live)
