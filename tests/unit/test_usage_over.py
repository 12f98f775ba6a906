"""The near-limit listing's parts that need no table (governance/usage_over.py): the highest
threshold reached, the index attributes the threshold transaction writes or removes, the
partitions a listing reads, and the refusals that come before any read (thresholds not
configured, page sizes, tokens not made here). The reads themselves are tested against DynamoDB
Local (tests/integration/test_usage_over.py)."""

from __future__ import annotations

import base64

import pytest

from hybrid_counter.errors import ValidationError
from hybrid_counter.governance.usage_over import (
    OVER_SHARDS,
    OverRow,
    UsageOver,
    highest_reached,
    index_update,
)
from hybrid_counter.keys import org_counter_sk


class NoStore:
    """Clients whose DynamoDB must not be asked anything (a refusal comes first)."""

    @property
    def dynamodb(self) -> None:
        raise AssertionError("the store was asked")


def listing() -> UsageOver:
    return UsageOver("t", (80, 100), NoStore())  # type: ignore[arg-type]


def test_the_highest_reached_threshold_is_that_of_the_highest_bit():
    assert highest_reached(0, (80, 100)) is None
    assert highest_reached(0b01, (80, 100)) == 80
    assert highest_reached(0b11, (80, 100)) == 100
    assert highest_reached(0b10, (80, 100)) == 100


def test_reaching_writes_the_index_keys_and_clearing_removes_them_all():
    placed = index_update("ACCOUNT#a", "seats", 80, since="2026-11-26T00:00:00.000Z", used=8, limit=10)
    assert placed.removes == ()
    assert placed.values[":over_kind"] == {"S": "seats#80"}
    shard = int(placed.values[":over_all"]["S"].split("#")[1])
    assert placed.values[":over_all"]["S"].startswith("80#")
    assert 0 <= shard < OVER_SHARDS
    assert (placed.values[":over_used"], placed.values[":over_limit"]) == ({"N": "8"}, {"N": "10"})
    assert sorted(placed.sets) == sorted(f"{name[1:]} = {name}" for name in placed.values)
    cleared = index_update("ACCOUNT#a", "seats", None, since="x", used=0, limit=10)
    assert (cleared.sets, cleared.values) == ((), {})
    assert set(cleared.removes) == {"over_kind", "over_all", "over_since", "over_used", "over_limit"}


def test_a_listing_reads_the_partitions_of_each_threshold_at_or_over_its_own():
    assert listing().partitions(80, "seats") == ["seats#80", "seats#100"]
    assert listing().partitions(100, "seats") == ["seats#100"]
    assert listing().partitions(100, None) == [f"100#{n}" for n in range(OVER_SHARDS)]
    assert len(listing().partitions(80, None)) == 2 * OVER_SHARDS


@pytest.mark.parametrize("threshold", [90, 1, 79, 101])
def test_a_threshold_not_configured_is_refused_naming_those_that_are(threshold):
    with pytest.raises(ValidationError, match="80, 100"):
        listing().page(threshold=threshold)


@pytest.mark.parametrize("size", [0, 101])
def test_a_page_size_out_of_bounds_is_refused(size):
    with pytest.raises(ValidationError):
        listing().page(page_size=size)


def token(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


@pytest.mark.parametrize(
    "bad",
    [
        "not base64!",
        token('{"x": {}}'),
        token("2026-11-26T00:00:00.000Z"),  # a time without the item's digest
        token("2026-11-26T00:00:00Z#0123456789abcdef"),  # not the items' time format
        token("2026-11-26T00:00:00.000Z#0123456789ABCDEF"),
        token("2026-11-26T00:00:00.000Z#0123456789abcdef "),
    ],
)
def test_a_token_not_made_here_is_refused_before_any_read(bad):
    with pytest.raises(ValidationError):
        listing().page(threshold=100, kind="seats", next_token=bad)


def test_the_range_key_is_the_crossings_time_then_the_items_digest():
    placed = index_update("ACCOUNT#a", "seats", 80, since="2026-11-26T00:00:00.000Z", used=8, limit=10)
    other = index_update("ACCOUNT#b", "seats", 80, since="2026-11-26T00:00:00.000Z", used=8, limit=10)
    since, digest = placed.values[":over_since"]["S"].split("#")
    assert since == "2026-11-26T00:00:00.000Z"
    assert len(digest) == 16
    assert placed.values[":over_since"] != other.values[":over_since"]  # one total order


def test_a_row_names_an_account_or_an_organization():
    def item(pk: str, sk: str) -> dict:
        return {
            "pk": {"S": pk},
            "sk": {"S": sk},
            "over_kind": {"S": "seats#100"},
            "over_since": {"S": "2026-11-26T00:00:00.000Z#0123456789abcdef"},
            "over_used": {"N": "10"},
            "over_limit": {"N": "10"},
        }

    account = OverRow.of(item("ACCOUNT#acme", "COUNTER#seats")).to_json()
    assert account["since"] == "2026-11-26T00:00:00.000Z"
    assert (account["account_id"], account["scope"], account["kind"], account["threshold"]) == (
        "acme",
        "account",
        "seats",
        100,
    )
    org = OverRow.of(item("ORG#group", org_counter_sk("seats"))).to_json()
    assert (org["org_id"], org["scope"], "account_id" in org) == ("group", "organization", False)
