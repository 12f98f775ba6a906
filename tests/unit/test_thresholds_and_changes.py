"""The pure parts of governance: the hysteresis state machine, who a caller is, how a refused
limit change answers, and the stack's settings for thresholds and history."""

from __future__ import annotations

import base64
import json
import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_counter.api.access import caller_of
from hybrid_counter.api.errors import domain_error_response
from hybrid_counter.errors import LimitBelowUsage, ValidationError
from hybrid_counter.governance.history import HISTORY_SORT_KEY
from hybrid_counter.governance.paging import decode_place
from hybrid_counter.governance.records import ChangeRecord
from hybrid_counter.governance.thresholds import Thresholds
from hybrid_counter.settings import Settings

AT_80_100 = Thresholds((80, 100), hysteresis=5)


def levels(thresholds: Thresholds, uses: list[int], limit: int) -> list[int]:
    state, seen = 0, []
    for used in uses:
        state = thresholds.reached(state, used, limit)
        seen.append(state)
    return seen


def test_reached_at_the_threshold_and_cleared_only_below_it_minus_the_hysteresis():
    # limit 10: 80 % is 8, cleared below 75 % (7.5), 100 % is 10, cleared below 95 % (9.5)
    assert levels(AT_80_100, [7, 8, 9, 10, 9, 8, 7], 10) == [0, 1, 1, 3, 1, 1, 0]


def test_use_that_hovers_in_the_band_changes_nothing():
    # limit 100: once at 80, anything from 75 up stays reached
    assert levels(AT_80_100, [80, 76, 79, 75, 80, 77], 100) == [1] * 6


def test_a_kind_the_plan_does_not_include_is_over_it_with_any_use():
    assert levels(AT_80_100, [0, 1, 0], 0) == [0, 3, 0]


@given(st.lists(st.integers(0, 200), max_size=40), st.integers(1, 120))
def test_a_crossing_back_always_follows_one_forth_and_the_state_is_a_function_of_the_band(uses, limit):
    # Whatever the path, a threshold is reached only at or above it, and kept only above its band
    state = 0
    for used in uses:
        state = AT_80_100.reached(state, used, limit)
        for index, percent in enumerate(AT_80_100.percents):
            reached = bool(state & (1 << index))
            if used * 100 >= percent * limit:
                assert reached
            if used * 100 < (percent - AT_80_100.hysteresis) * limit:
                assert not reached


def test_the_caller_is_the_tokens_sub_or_the_iam_principal():
    jwt = {"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "ops-alice"}, "scopes": ["x"]}}}}
    client = {"requestContext": {"authorizer": {"jwt": {"claims": {"client_id": "console"}}}}}
    iam = {"requestContext": {"authorizer": {"iam": {"userArn": "arn:aws:iam::1:role/ops"}}}}
    assert [caller_of(jwt), caller_of(client), caller_of(iam)] == [
        "ops-alice",
        "console",
        "arn:aws:iam::1:role/ops",
    ]


def test_a_limit_below_use_answers_409_with_the_limit_and_the_use():
    one = json.loads(domain_error_response(LimitBelowUsage([("projects", 5, 8)])).body or "")["error"]
    assert (one["code"], one["kind"], one["limit"], one["used"]) == ("LimitBelowUsage", "projects", 5, 8)
    several = json.loads(domain_error_response(LimitBelowUsage([("a", 1, 2), ("b", 0, 3)])).body or "")[
        "error"
    ]
    assert several["kinds"] == [{"kind": "a", "limit": 1, "used": 2}, {"kind": "b", "limit": 0, "used": 3}]
    assert "force" in several["message"]


def test_a_change_record_reads_back_as_written_and_is_stored_newest_first():
    record = ChangeRecord(
        "c0ffee", "2026-11-23T10:00:00.000Z", "ops", "override", 10, 5, True, "acme", "seats"
    )
    assert ChangeRecord.of(record.text()) == record
    assert record.history_pk == "HISTORY#ACCOUNT#acme"
    assert record.history_sk.startswith("2026-11-23T10:00:00.000Z#")


@pytest.mark.parametrize("token", [":", "", "====", "a", "!!", "Og==", "IyM="])
def test_a_history_token_that_no_page_could_have_given_is_a_validation_error(token):
    # ":" once decoded to an empty sort key, which DynamoDB refused: a 503 instead of a 400.
    with pytest.raises(ValidationError):
        decode_place(token, HISTORY_SORT_KEY)


def test_a_history_token_of_a_record_reads_back_its_sort_key():
    record = ChangeRecord(
        secrets.token_hex(8), "2026-11-23T10:00:00.000Z", "ops", "override", 10, 5, True, "acme", "seats"
    )
    token = base64.urlsafe_b64encode(record.history_sk.encode()).decode()
    assert decode_place(token, HISTORY_SORT_KEY) == record.history_sk


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"USAGE_THRESHOLDS": "100,80"}, "increasing"),
        ({"USAGE_THRESHOLDS": "eighty"}, "integers"),
        ({"THRESHOLD_HYSTERESIS_PERCENT": "60"}, "between 0 and 50"),
        ({"HISTORY_RETENTION_DAYS": "-1"}, ">= 0"),
    ],
)
def test_bad_governance_settings_fail_at_start_saying_why(env, problem):
    with pytest.raises(RuntimeError, match=problem):
        Settings.from_env({"TABLE_NAME": "t", **env})


def test_governance_settings_default_to_80_and_100_with_5_percent_and_no_bus():
    settings = Settings.from_env({"TABLE_NAME": "t"})
    assert (settings.usage_thresholds, settings.threshold_hysteresis_percent) == ((80, 100), 5)
    assert (settings.event_bus_name, settings.history_retention_days) == (None, 0)
