"""Which stream records become stream-path work, from the sample events sam local invoke uses
(real records captured from DynamoDB Local: one create, one delete)."""

from __future__ import annotations

import copy

import pytest

from hybrid_counter.counting.ops import CountOp, FinishDeleteOp, HandedOffDeleteOp, HealOp, OrgResizedOp
from hybrid_counter.counting.records import PoisonRecord, ops_from_record, ops_from_records
from hybrid_counter.keys import resource_sk
from tests.conftest import load_event


def only_record(name: str) -> dict:
    records = load_event(name)["Records"]
    assert len(records) == 1
    return records[0]


def test_admission_on_counter_item_counts_that_resource():
    # Given the counter item's MODIFY that set last_admission
    record = only_record("stream_modify_admission.json")
    # When it is interpreted
    ops = ops_from_record(record)
    # Then exactly that resource incarnation is counted
    assert ops == [CountOp("acct-demo", "res-1", "4f1c2b9e8d7a4c3b")]


def test_resource_records_carry_no_work():
    # Counting waits for the admission, so a create that is rolled back is never counted; a
    # delete's claim and its removal change nothing the counters do not already know.
    for name in ("stream_insert_resource.json", "stream_modify_claim.json", "stream_remove.json"):
        assert ops_from_record(only_record(name)) == [], name


def test_release_asks_to_finish_that_delete():
    ops = ops_from_record(only_record("stream_modify_release.json"))
    assert ops == [FinishDeleteOp("acct-demo", "res-1", "4f1c2b9e8d7a4c3b")]


def test_a_release_followed_by_its_removal_in_the_batch_needs_nothing():
    # Given the delete's release and, later in the same batch, the delete removing the item itself
    release, removal = only_record("stream_modify_release.json"), only_record("stream_remove.json")
    # Then the stream path has nothing to finish; in the other order, or alone, it does
    assert ops_from_records([release, removal]) == []
    assert [op for _, op in ops_from_records([removal, release])] == ops_from_record(release)
    other = copy.deepcopy(removal)
    other["dynamodb"]["OldImage"]["incarnation"] = {"S": "an-earlier-one"}
    assert [op for _, op in ops_from_records([release, other])] == ops_from_record(release)


def test_a_counter_image_with_best_effort_below_eventual_asks_for_a_heal():
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    record["dynamodb"]["NewImage"]["eventual"] = {"N": "5"}
    assert HealOp("acct-demo") in ops_from_record(record)


def test_counter_change_without_new_admission_or_release_carries_no_work():
    # The stream path's own eventual-counter writes leave last_admission and last_release as they were.
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    record["dynamodb"]["OldImage"]["last_admission"] = record["dynamodb"]["NewImage"]["last_admission"]
    assert ops_from_record(record) == []


def test_readmission_of_same_id_with_new_incarnation_counts_again():
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    record["dynamodb"]["OldImage"]["last_admission"] = {"S": "res-1#oldincarnation"}
    assert len(ops_from_record(record)) == 1


def test_the_sweepers_control_items_are_not_accounts():
    record = copy.deepcopy(only_record("stream_remove.json"))
    record["dynamodb"]["Keys"] = {"pk": {"S": "CONTROL#sweeper"}, "sk": {"S": "audit"}}
    assert ops_from_record(record) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["dynamodb"].pop("Keys"),
        lambda r: r["dynamodb"].pop("NewImage"),
        lambda r: r.update(eventName="UPSERT"),
        lambda r: r["dynamodb"]["NewImage"].update(last_admission={"S": "no-separator"}),
        lambda r: r["dynamodb"]["Keys"].update(pk={"S": "TENANT#x"}),
        lambda r: r["dynamodb"]["Keys"].update(sk={"S": "SOMETHING"}),
        lambda r: r["dynamodb"]["Keys"].update(sk={"S": "RESOURCE#0#res-1"}),  # wrong range for the id
    ],
    ids=["no-keys", "no-new-image", "bad-event-name", "bad-admission", "bad-pk", "bad-sk", "bad-range"],
)
def test_uninterpretable_records_are_poison(mutate):
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    mutate(record)
    with pytest.raises(PoisonRecord):
        ops_from_record(record)


def _record(event: str, pk: str, sk: str, old: dict, new: dict) -> dict:
    """A stream record as Lambda delivers it (NEW_AND_OLD_IMAGES), for the member-resize cases."""

    def typed(value: object) -> dict:
        if isinstance(value, bool):
            return {"BOOL": value}
        return {"N": str(value)} if isinstance(value, int) else {"S": str(value)}

    def image(values: dict) -> dict:
        return {name: typed(value) for name, value in values.items()}

    keys = {"pk": {"S": pk}, "sk": {"S": sk}}
    return {
        "eventID": "1",
        "eventName": event,
        "dynamodb": {
            "Keys": keys,
            "OldImage": {**keys, **image(old)},
            "NewImage": {**keys, **image(new)},
            "SequenceNumber": "100",
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


@pytest.mark.parametrize("undo", [False, True], ids=["moved", "undone"])
def test_a_member_resizes_write_on_its_organizations_shard_notes_it_on_that_claim(undo: bool) -> None:
    # Given an organization's shard 3 record whose last_resize names acct-a's resize req1 of r1
    token = "acct-a/r1#inc1#req1" + (".undo" if undo else "")
    record = _record(
        "MODIFY", "ORG#acme", "COUNTER#seats#3", {"best_effort": 2}, {"best_effort": 5, "last_resize": token}
    )
    # Then that resize's claim is marked (a shrink's finished) by an OrgResizedOp
    assert ops_from_record(record) == [OrgResizedOp("acct-a", "r1", "inc1", "req1", "seats", undo)]


def test_a_malformed_member_resize_token_is_poison() -> None:
    record = _record("MODIFY", "ORG#acme", "COUNTER#seats#0", {}, {"last_resize": "no-account-here#x"})
    with pytest.raises(PoisonRecord):
        ops_from_record(record)


@pytest.mark.parametrize("counted", [False, True])
def test_the_write_ending_a_members_resize_counts_it_at_its_organization_if_nothing_did(
    counted: bool,
) -> None:
    # Given the resource's MODIFY that ends a resize (resize_request removed), live, a member of
    # acme on shard 2, counted there or not
    sk = resource_sk("r1", kind="seats")
    old = {
        "state": "live",
        "incarnation": "inc1",
        "units": 2,
        "org": "acme",
        "org_shard": 2,
        "org_counted": counted,
        "counter_processed": True,
        "resize_request": "req1",
    }
    new = {key: value for key, value in old.items() if key != "resize_request"}
    ops = ops_from_record(_record("MODIFY", "ACCOUNT#acct-a", sk, old, {**new, "units": 5}))
    # Then it is counted there with the units it holds now, unless it was counted already
    expected = [CountOp("acct-a", "r1", "inc1", "seats", 5, "acme", shard=2)]
    assert ops == ([] if counted else expected)


@pytest.mark.parametrize("counted", [False, True])
def test_the_write_ending_a_resize_counts_it_at_its_account_if_nothing_did(counted: bool) -> None:
    # Given the resource's MODIFY that ends a resize (resize_request removed), live, in no
    # organization, counted at its account or not (a count that met the resize left it)
    sk = resource_sk("r1", kind="seats")
    old = {
        "state": "live",
        "incarnation": "inc1",
        "units": 2,
        "counter_processed": counted,
        "resize_request": "r",
    }
    new = {key: value for key, value in old.items() if key != "resize_request"}
    ops = ops_from_record(_record("MODIFY", "ACCOUNT#acct-a", sk, old, {**new, "units": 5}))
    # Then it is counted there with the units it holds now, unless it was counted already
    assert ops == ([] if counted else [CountOp("acct-a", "r1", "inc1", "seats", 5)])


@pytest.mark.parametrize("pk", ["ACCOUNT#acct-a", "ORG#acme"])
def test_a_published_events_take_off_and_its_ttl_removal_carry_no_work(pk: str) -> None:
    # Given a threshold event's item: taken off the outbox into the event log, then expired by TTL
    sk = "EVENT#seats#000000000003#80"
    logged = {
        "events_day": "2026-11-26#2",
        "events_at": "2026-11-26T01:02:03.512Z#e",
        "expires_at": 1795900000,
    }
    take_off = _record("MODIFY", pk, sk, {"event": "{}", "pending_shard": "x"}, logged)
    expired = _record("REMOVE", pk, sk, logged, {})
    del expired["dynamodb"]["NewImage"]
    expired["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    # Then neither asks the stream path for anything
    assert ops_from_record(take_off) == []
    assert ops_from_record(expired) == []


_CLAIM = {
    "state": "deleting",
    "incarnation": "inc1",
    "units": 3,
    "org": "acme",
    "org_shard": 2,
    "delete_request": "req1",
    "org_counted": True,
}


@pytest.mark.parametrize(
    ("old", "new", "finishes"),
    [
        # the hand-off of a delete whose organization's release was refused
        (_CLAIM, {**_CLAIM, "org_handoff": "req1"}, True),
        # the stream path's note of its account's release, on a claim not handed off
        (_CLAIM, {**_CLAIM, "account_released": True}, False),
        # the note after the hand-off: already asked for
        (
            {**_CLAIM, "org_handoff": "req1"},
            {**_CLAIM, "org_handoff": "req1", "account_released": True},
            False,
        ),
        # a takeover of a handed-off claim (another request owns it now): not this record's work
        (
            {**_CLAIM, "org_handoff": "req1"},
            {**_CLAIM, "org_handoff": "req1", "delete_request": "req2"},
            False,
        ),
        # a write that leaves a finishable claim as it was (already asked for)
        (
            {**_CLAIM, "org_handoff": "req1"},
            {**_CLAIM, "org_handoff": "req1", "deleting_since": "later"},
            False,
        ),
        # a claim of a resource in no organization (never handed off)
        (
            {k: v for k, v in _CLAIM.items() if k != "org"},
            {**{k: v for k, v in _CLAIM.items() if k != "org"}, "org_handoff": "req1"},
            False,
        ),
    ],
    ids=["handed-off", "noted", "noted-after", "taken-over", "unchanged", "no-org"],
)
def test_a_handed_off_members_delete_is_finished_once_by_the_stream_path(
    old: dict, new: dict, finishes: bool
) -> None:
    # Given a member's claimed resource's MODIFY record
    record = _record("MODIFY", "ACCOUNT#acct-a", resource_sk("r1", kind="seats"), old, new)
    # Then the stream path finishes the delete (the organization's release of its units on its
    # shard, counted there, and the removal) exactly when the record hands it off
    expected = [HandedOffDeleteOp("acct-a", "r1", "inc1", "req1", "acme", "seats", 3, True, 2)]
    assert ops_from_record(record) == (expected if finishes else [])
