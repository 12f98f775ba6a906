"""The benchmark's meter tells counter-item writes apart, for both designs."""

from benchmarks.meter import counter_writes
from benchmarks.reference import COUNTER as REFERENCE_COUNTER
from hybrid_counter.keys import counter_sk


def _key(sk: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": "ACCOUNT#a1"}, "sk": {"S": sk}}


def test_a_write_on_either_designs_counter_item_is_a_counter_write() -> None:
    # Given an update of our counter item and one of the reference's
    ours = {"Key": _key(counter_sk())}
    reference = {"Key": _key(REFERENCE_COUNTER)}

    # Then each is one counter-item write, and a resource write is none
    assert counter_writes("UpdateItem", ours) == 1
    assert counter_writes("UpdateItem", reference) == 1
    assert counter_writes("PutItem", {"Item": _key("RES#r1")}) == 0


def test_a_transaction_counts_its_counter_actions_only() -> None:
    # Given the reference's counting transaction: the counter update and the resource's flip
    transaction = {
        "TransactItems": [
            {"Update": {"Key": _key(REFERENCE_COUNTER)}},
            {"Update": {"Key": _key("REF#RES#r1")}},
        ]
    }

    # Then one of its two actions is a counter-item write
    assert counter_writes("TransactWriteItems", transaction) == 1
