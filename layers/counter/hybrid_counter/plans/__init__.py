"""Plans and the limits they give: a plan is a name and a limit per kind; every account is on one
(``default`` unless assigned); an account's override for a kind wins over its plan."""

from hybrid_counter.plans.limits import Limits
from hybrid_counter.plans.store import DEFAULT_PLAN, Plan, PlanPage, PlanStore

__all__ = ["DEFAULT_PLAN", "Limits", "Plan", "PlanPage", "PlanStore"]
