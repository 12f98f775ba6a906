"""Organizations: a limit on the total of several accounts (design.md §10).

An organization has member accounts (an account belongs to at most one) and limits per kind from
a plan, with overrides of its own; a create is admitted only if it fits both its account's limit
and its organization's. Each level is admitted with its own conditional single-item write.
"""

from hybrid_counter.orgs.store import Org, OrgStore

__all__ = ["Org", "OrgStore"]
