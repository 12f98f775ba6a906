"""Which stream records become counting work, from the sample events sam local invoke uses."""

from __future__ import annotations

import copy

import pytest

from hybrid_counter.counting.ops import CountOp, UncountOp
from hybrid_counter.counting.records import PoisonRecord, ops_from_record
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
    assert ops == [CountOp("acct-demo", "res-1", "4f1c2b9e8d7a4c3b9a1e2d3c4b5a6978")]


def test_resource_insert_alone_counts_nothing():
    # Counting waits for the admission, so a create that is rolled back is never counted.
    assert ops_from_record(only_record("stream_insert_resource.json")) == []


def test_soft_delete_of_counted_resource_uncounts_it():
    ops = ops_from_record(only_record("stream_modify_soft_delete.json"))
    assert ops == [UncountOp("acct-demo", "res-1", "4f1c2b9e8d7a4c3b9a1e2d3c4b5a6978", counted=True)]


def test_soft_delete_of_uncounted_resource_hard_deletes_without_uncounting():
    record = copy.deepcopy(only_record("stream_modify_soft_delete.json"))
    record["dynamodb"]["NewImage"]["counter_processed"] = {"BOOL": False}
    (op,) = ops_from_record(record)
    assert isinstance(op, UncountOp)
    assert op.counted is False


def test_remove_counts_nothing():
    assert ops_from_record(only_record("stream_remove.json")) == []


def test_counter_change_without_new_admission_counts_nothing():
    # The stream path's own eventual-counter writes leave last_admission as it was.
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    record["dynamodb"]["OldImage"]["last_admission"] = record["dynamodb"]["NewImage"]["last_admission"]
    assert ops_from_record(record) == []


def test_readmission_of_same_id_with_new_incarnation_counts_again():
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    record["dynamodb"]["OldImage"]["last_admission"] = {"S": "res-1#oldincarnation"}
    assert len(ops_from_record(record)) == 1


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["dynamodb"].pop("Keys"),
        lambda r: r["dynamodb"].pop("NewImage"),
        lambda r: r.update(eventName="UPSERT"),
        lambda r: r["dynamodb"]["NewImage"].update(last_admission={"S": "no-separator"}),
        lambda r: r["dynamodb"]["Keys"].update(pk={"S": "TENANT#x"}),
        lambda r: r["dynamodb"]["Keys"].update(sk={"S": "SOMETHING"}),
    ],
    ids=["no-keys", "no-new-image", "bad-event-name", "bad-admission", "bad-pk", "bad-sk"],
)
def test_uninterpretable_records_are_poison(mutate):
    record = copy.deepcopy(only_record("stream_modify_admission.json"))
    mutate(record)
    with pytest.raises(PoisonRecord):
        ops_from_record(record)
