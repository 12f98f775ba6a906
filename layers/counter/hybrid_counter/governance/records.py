"""A change of a limit, as recorded: in the changed item's own conditional write, then in history.

Every change of an override, a plan's limits, or an account's plan writes its record
(``limit_change``, a JSON string) in the same conditional write as the change itself, on the
item it changes, with the PendingIndex keys: the record exists if and only if the change
happened. Completing it (changes.py) copies it into the history (an item keyed by its change id,
so copying twice is copying once), publishes it, and removes it from the changed item
(conditional on its being that record). The API completes it at once; a process that died
before is covered by the next change of the same item (which completes the record it finds
first) and by the sweeper (PendingIndex).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

What = Literal["override", "override_removed", "plan_limits", "account_plan"]
LIMIT_CHANGE = "limit_change"  # the attribute that holds a change's record until it is in history


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The exact string stored on the changed item (conditions compare it whole)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def of(cls, text: str) -> ChangeRecord:
        return cls(**json.loads(text))

    @property
    def history_pk(self) -> str:
        return (
            f"HISTORY#PLAN#{self.plan_id}"
            if self.what == "plan_limits"
            else f"HISTORY#ACCOUNT#{self.account_id}"
        )

    @property
    def history_sk(self) -> str:
        return f"{self.at}#{self.change_id}"  # newest first when read backwards
