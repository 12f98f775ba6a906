"""The keys a split organization spreads its OrgUsageIndex and OrgHoldIndex entries over
(keys.py): the first is the key written before they were spread, every other is within the
organization's keys, and they spread."""

from __future__ import annotations

import uuid

from hybrid_counter.keys import (
    all_org_hold_keys,
    all_org_usage_keys,
    org_hold_key,
    org_usage_key,
    org_usage_keys,
)


def test_an_organization_never_split_has_the_one_key_it_always_had() -> None:
    assert org_usage_keys(1) == 1
    assert org_hold_key("acme", uuid.uuid4().hex[:16]) == "acme"
    assert org_usage_key("acme", "seats", "a1") == "acme#seats"
    assert all_org_hold_keys("acme", 1) == ["acme"]
    assert all_org_usage_keys("acme", "seats", 1) == ["acme#seats"]


def test_a_split_organizations_holds_spread_over_its_keys_the_first_being_the_old_one() -> None:
    keys = org_usage_keys(16)
    every = all_org_hold_keys("acme", keys)
    assert keys == len(set(every)) == 64
    assert every[0] == "acme"
    put = [org_hold_key("acme", f"{n * 2654435761:016x}", keys) for n in range(2_000)]
    assert set(put) <= set(every)
    assert len(set(put)) == 64
