"""The throttling simulator's buckets follow the table's keys: an item per counter item, each
kind's resources over partitions of their own."""

from benchmarks.reference import RESOURCE as REFERENCE_RESOURCE
from benchmarks.throttle import CapacitySimulator
from hybrid_counter.keys import account_pk, counter_key, resource_key


def test_each_kind_has_its_own_counter_bucket_and_resource_partitions() -> None:
    simulator = CapacitySimulator(10.0, partitions=16)

    # Given two kinds' counter items and a resource of each, of the same id
    counters = {simulator.bucket_of(counter_key("a1", kind=kind)) for kind in ("servers", "volumes")}
    resources = {simulator.bucket_of(resource_key("a1", "r1", kind=kind)) for kind in ("servers", "volumes")}

    # Then four buckets: an item each, a partition each
    assert len(counters) == 2
    assert all(bucket.startswith("item:") for bucket in counters)
    assert len(resources) == 2
    assert all(bucket.startswith("partition:ACCOUNT#a1:") for bucket in resources)


def test_the_reference_designs_resources_spread_by_their_first_hex_digit() -> None:
    simulator = CapacitySimulator(10.0, partitions=16)

    # Given a reference resource whose uuid starts with "b"
    key = {"pk": {"S": account_pk("a1")}, "sk": {"S": f"{REFERENCE_RESOURCE}b0e1"}}

    # Then it is on partition 11 of the account
    assert simulator.bucket_of(key) == "partition:ACCOUNT#a1:11"
