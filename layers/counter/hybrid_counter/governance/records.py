"""A change of a limit, as recorded: its record item, the changed item's reference to it, history.

Every change of an override, a plan's limits, or an account's plan is made in two writes:

1. its **record item** (``CHANGE#<change id>`` / ``RECORD``): who, when, what, old and new, and
   which item it changes, with the PendingIndex keys;
2. the change itself, one conditional write of the changed item (the kind's counter item, the
   plan item, the account's plan item) that also names the change (``limit_change``, the change
   id, a few bytes), conditional on no other change being named there.

So the change happened if and only if the changed item names it (or history holds it, once
completed). Completing it (changes.py) copies the record into history (an item keyed by its
time and change id, written only if new: copying twice writes once), takes the name off the
changed item (conditional on its being that change), removes the record item, and publishes
its event. The API completes it at once; a process that died before is covered by the next
change of the same item (which completes the change it finds named first) and by the sweeper
(the record item is in the PendingIndex; one not named by its item is of a change that never
happened, and is removed). The record lives apart from the changed item because a counter item
must stay one write unit (under 1 KB) in every state, and a caller's identity (an IAM role
session's ARN) alone can be a few hundred bytes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from hybrid_counter.keys import CHANGE_PREFIX

What = Literal["override", "override_removed", "plan_limits", "account_plan", "org_plan"]
LIMIT_CHANGE = "limit_change"  # on the changed item: the change id, until the change is in history
RECORD_SK = "RECORD"


def record_key(change_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"{CHANGE_PREFIX}{change_id}"}, "sk": {"S": RECORD_SK}}


@dataclass(frozen=True)
class ChangeRecord:
    change_id: str
    at: str  # ISO 8601 UTC (keys.iso_utc)
    by: str  # the token's sub, or the IAM principal, or "operator-tool"
    what: What
    old: Any  # override: int or None; plan limits: {kind: limit}; account plan: plan id
    new: Any
    force: bool = False
    account_id: str | None = None
    kind: str | None = None
    plan_id: str | None = None
    org_id: str | None = None  # an organization's change (its override, its plan)

    def to_json(self) -> dict[str, Any]:
        found = asdict(self)
        if self.org_id is None:
            del found["org_id"]  # an account's or a plan's record reads as it always has
        return found

    def text(self) -> str:
        """The exact string stored on the changed item (conditions compare it whole)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def of(cls, text: str) -> ChangeRecord:
        return cls(**json.loads(text))

    @property
    def history_pk(self) -> str:
        if self.org_id is not None:
            return f"HISTORY#ORG#{self.org_id}"
        if self.what == "plan_limits":
            return f"HISTORY#PLAN#{self.plan_id}"
        return f"HISTORY#ACCOUNT#{self.account_id}"

    @property
    def history_sk(self) -> str:
        return f"{self.at}#{self.change_id}"  # newest first when read backwards

    @property
    def name(self) -> str:
        """How the changed item names the change: its place in history."""
        return self.history_sk
