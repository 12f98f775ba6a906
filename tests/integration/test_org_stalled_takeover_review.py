"""Review 37 (hostile, fixed: design.md §10.4): a takeover of a live hand-off (it releases at the organization itself,
``org_refused``) that stalls between its claim and that release, against the census of the
organization's range (the sweeper's settle_range, or org-recount --fix) taken meanwhile."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from hybrid_counter.counting.stream_batch import process_stream_batch
from hybrid_counter.errors import DomainError
from hybrid_counter.keys import RESOURCE_PREFIX, account_pk
from tests.faults import at_an_organization, injected, target_of
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def _claim(org: Org, account: str) -> dict[str, Any]:
    found = org.clients.dynamodb.query(
        TableName=org.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": account_pk(account)}, ":prefix": {"S": RESOURCE_PREFIX}},
        ConsistentRead=True,
    )["Items"]
    [item] = [i for i in found if i["state"]["S"] == "deleting"]
    return dict(item)


def test_a_stalled_takeover_of_a_hand_off_and_a_census_release_once(settings, clients, stream) -> None:
    org = Org(settings, clients, stream, limit=3)
    first, second = org.members
    org.service.create(second, "x", {}, kind=SEATS)
    y, _ = org.service.create(first, "y", {}, kind=SEATS)
    org.drain()
    assert org.org_counters() == (2, 2)
    # Given y's delete: released at its account, its organization's release throttled on every
    # attempt, so handed off to the stream path (org_handoff)
    with (
        injected(
            org.clients.dynamodb_single_attempt,
            "UpdateItem",
            error="ThrottlingException",
            times=100,
            where=at_an_organization,
        ),
        contextlib.suppress(DomainError),
    ):
        org.service.delete(first, y.resource_id, kind=SEATS)
    claim = _claim(org, first)
    assert claim.get("org_handoff") == claim.get("delete_request")
    # The stream path has seen the account's release (account_released), but the batch with the
    # hand-off's record fails and waits in the retry queue (late past the grace period)
    records = org.stream.records_of(account_pk(first))
    counters = [r for r in records if r["dynamodb"]["Keys"]["sk"]["S"].startswith("COUNTER#")]
    assert process_stream_batch(counters, org.counter).failed_sequence_numbers == []
    claim = _claim(org, first)
    assert claim.get("account_released", {}).get("BOOL") is True
    org.clock.now += org.settings.pending_grace_seconds + 1
    # When the sweeper's repair takes the claim over (the hand-off it voids never applied, so it
    # releases at the organization itself) and stalls before that release, past the grace
    # period, while an organization's recount --fix takes the census of the range
    fired: dict[str, Any] = {"n": 0}

    def before_org_release(request, **_):
        if target_of(request) not in ("GetItem", "Query") or fired["n"]:
            return
        if not at_an_organization(json.loads(request.body or b"{}")):
            return
        fired["n"] = 1
        org.clock.now += org.settings.pending_grace_seconds + 1
        fired["report"] = org.recounter().recount(org.org_id, kind=SEATS, fix=True)
        return

    single = org.clients.dynamodb  # (its reads at the organization, before its release there)
    single.meta.events.register_first("before-send.*.*", before_org_release)
    try:
        org.service.repairs.finish_stale_delete(first, y.resource_id, claim)
    except DomainError:
        pass
    finally:
        single.meta.events.unregister("before-send.*.*", before_org_release)
    assert fired["n"] == 1
    for r in records:  # the late batch, delivered at last
        if r not in counters:
            process_stream_batch([r], org.counter)
    org.drain()
    # Then y was released once at its organization: it holds x's seat
    assert (org.org_counters(), org.live_units()) == ((1, 1), 1), fired["report"].actions
