"""An operator takes messages from the operator queue to fixed accounts with hybrid-counter-ops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import boto3
import pytest

from hybrid_counter.keys import counter_key, org_counter_key
from tests.e2e.conftest import eventually

pytestmark = pytest.mark.e2e


def ops(runtime: Any, *args: str) -> Any:
    where = [
        "--table",
        runtime.table_name,
        "--operator-queue-url",
        runtime.queue_urls["OperatorQueue"],
        "--retry-queue-url",
        runtime.queue_urls["RetryQueue"],
    ]
    # A separate process, as an operator runs it (the runtime's own threads print to this stdout).
    done = subprocess.run(
        [sys.executable, "-m", "hybrid_counter.ops.cli", *where, *args],
        capture_output=True,
        text=True,
        timeout=120,
        # The local endpoints (DynamoDB, its stream, SQS), region and credentials, as an operator sets them.
        env={**os.environ, **runtime.client_environment()},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_outage_then_replay_from_the_operator_queue(target, local_runtime):
    runtime = local_runtime
    account = f"outage-{uuid.uuid4().hex[:8]}"

    # Given an outage: the stream function and the retry-queue function fail for this account
    def failing(event, context, call_next):
        if account in json.dumps(event) or "DDBStreamBatchInfo" in json.dumps(event):
            raise RuntimeError("injected outage")
        return call_next(event, context)

    unwrap_stream = runtime.wrap_function("StreamCounterFunction", failing)
    unwrap_retry = runtime.wrap_function("RetryQueueFunction", failing)
    try:
        for n in range(3):
            assert target.call("POST", f"/accounts/{account}/resources", {"name": f"r{n}"}).status_code == 201
        # The failed batches travel stream -> retry queue -> operator queue
        runtime.wait_until_idle(120)
        listed = ops(runtime, "queue", "list")
    finally:
        unwrap_stream()
        unwrap_retry()
    assert target.call("GET", f"/accounts/{account}/usage").json()["eventual"] == 0

    # When the operator looks at the messages, their records are read back from the stream
    # (other tests may have left messages of their own in the queue: take this account's)
    shown = {m["message_id"]: ops(runtime, "queue", "show", m["message_id"]) for m in listed}
    mine = [m for m in listed if account in json.dumps(shown[m["message_id"]]["records"])]
    assert mine
    assert all(m["condition"] == "RetryAttemptsExhausted" for m in mine)
    assert any(r.get("operations") for m in mine for r in shown[m["message_id"]]["records"])
    # And replays them once the outage is over
    replayed = ops(runtime, "queue", "replay", *[m["message_id"] for m in mine])
    assert all(r["replayed"] for r in replayed), replayed

    # Then the account is counted exactly and its messages are gone from the operator queue
    usage = target.call("GET", f"/accounts/{account}/usage").json()
    assert (usage["best_effort"], usage["eventual"]) == (3, 3)
    remaining = {m["message_id"] for m in ops(runtime, "queue", "list")}
    assert remaining.isdisjoint(m["message_id"] for m in mine)
    (report,) = ops(runtime, "recount", account)["kinds"]  # the one kind the account used
    assert report["eventual_drift"] == 0


def test_poison_message_is_resolved_by_a_recount_and_dropped(target, local_runtime):
    runtime = local_runtime
    account = f"poison-ops-{uuid.uuid4().hex[:8]}"
    for n in range(2):
        assert target.call("POST", f"/accounts/{account}/resources", {"name": f"r{n}"}).status_code == 201
    target.settle()
    # Given a corrupted counter item: a malformed admission marker (poison) and drifted counters
    dynamodb = boto3.client("dynamodb", endpoint_url=runtime.dynamodb_url)
    dynamodb.update_item(
        TableName=runtime.table_name,
        Key=counter_key(account),
        UpdateExpression="SET last_admission = :bad, eventual = :ev, best_effort = :be",
        ExpressionAttributeValues={":bad": {"S": "corrupt"}, ":ev": {"N": "5"}, ":be": {"N": "0"}},
    )

    def poison_listed():
        messages = ops(runtime, "queue", "list")
        mine = [m for m in messages if _mentions(runtime, m["message_id"], account)]
        assert mine
        return mine

    (message, *_) = eventually(poison_listed, timeout=90, interval=0.5)
    shown = ops(runtime, "queue", "show", message["message_id"])
    assert any("poison" in record for record in shown["records"])
    replay = ops(runtime, "queue", "replay", message["message_id"])
    assert replay[0]["replayed"] is False  # a poison record cannot be applied

    # When the operator recounts the account (dry run first, then the fix) and drops the message
    dry = ops(runtime, "recount", account)
    (report,) = dry["kinds"]
    assert (report["eventual_drift"], report["best_effort_deficit"], dry["dry_run"]) == (3, 2, True)
    (fixed,) = ops(runtime, "recount", account, "--fix", "--kind", "resources")["kinds"]
    assert (fixed["eventual"], fixed["best_effort"]) == (2, 2)
    assert ops(runtime, "queue", "delete", message["message_id"])["deleted"] is True

    # Then the account is exact and still works
    assert target.call("POST", f"/accounts/{account}/resources", {"name": "after"}).status_code == 201
    target.settle()
    usage = target.call("GET", f"/accounts/{account}/usage").json()
    assert (usage["best_effort"], usage["eventual"]) == (3, 3)


def _mentions(runtime: Any, message_id: str, account: str) -> bool:
    shown = ops(runtime, "queue", "show", message_id)
    return account in json.dumps(shown["records"])


def test_an_organization_is_recounted_from_its_members_resources(target, local_runtime):
    runtime = local_runtime
    # Given an organization of 5 seats whose two members hold 3 (counted), and its first shard's
    # best_effort raised by hand to 5 (a slot nobody holds)
    organization, seats = f"org-ops-{uuid.uuid4().hex[:8]}", "seats"
    plan, members = f"p-{organization}", [f"m{n}-{organization}" for n in range(2)]
    assert target.call("PUT", f"/plans/{plan}", {"limits": {seats: 5}}).status_code in (200, 201)
    assert target.call("PUT", f"/orgs/{organization}", {"plan_id": plan}).status_code == 201
    for account in members:
        assert target.call("PUT", f"/accounts/{account}/limits/{seats}", {"limit": 5}).status_code == 200
        assert target.call("PUT", f"/orgs/{organization}/accounts/{account}").status_code == 201
    for n, account in enumerate([*members, members[0]]):
        created = target.call("POST", f"/accounts/{account}/kinds/{seats}/resources", {"name": f"r{n}"})
        assert created.status_code == 201, created.text
    target.settle()
    dynamodb = boto3.client("dynamodb", endpoint_url=runtime.dynamodb_url)
    dynamodb.update_item(
        TableName=runtime.table_name,
        Key=org_counter_key(organization, kind=seats, shard=0),
        UpdateExpression="ADD best_effort :two",
        ExpressionAttributeValues={":two": {"N": "2"}},
    )
    refused = target.call("POST", f"/accounts/{members[1]}/kinds/{seats}/resources", {"name": "x"})
    assert refused.status_code == 409, refused.text
    # When the operator recounts it: a dry run, then the fix
    dry = ops(runtime, "org-recount", organization)
    (report,) = dry["kinds"]
    assert (report["best_effort"], report["eventual"], report["live_units"], dry["dry_run"]) == (
        5,
        3,
        3,
        True,
    )
    (fixed,) = ops(runtime, "org-recount", organization, "--fix", "--kind", seats)["kinds"]
    # Then its counters are its members' 3 seats again, and the refused create is admitted
    assert (fixed["best_effort"], fixed["eventual"], fixed["ranges_unsettled"]) == (3, 3, [])
    admitted = target.call("POST", f"/accounts/{members[1]}/kinds/{seats}/resources", {"name": "x"})
    assert admitted.status_code == 201, admitted.text
