"""The explorer's long random organizations' schedules (seed 1, without the stall), #913, pinned:
a member's create whose organization's admission answered nothing (refused there: full) and could
not be confirmed, admitted at its account, its process dead as it made the item live. The
account's count made it live; the record of that write asks for its count at its organization
(P1's exception there, counting/records.py). The end delivered each stream once, so that record,
made by the delivery itself, was never delivered, and the end saw x live and never counted at its
organization: the harness's, not the code's (the stream goes on delivering). The end now drains
to a fixed point (orgs.py ``_drain``), and this schedule holds."""

from __future__ import annotations

import pytest

from tests.explorer.orgs import OrgOp, OrgScenario
from tests.explorer.pytest_glue import explorer_world, retries_without_backoff
from tests.explorer.search import replay, report

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(stack, stream):
    with retries_without_backoff():
        yield explorer_world(stack, stream)


SCENARIO = OrgScenario(
    name="random org #913",
    limit=None,
    ops=(
        OrgOp(kind="put", arg="y", units=1, of="resources", after=None, hold=False, who="B"),
        OrgOp(kind="put", arg="x", units=1, of="resources", after=None, hold=False, who="A"),
    ),
    account_limits=(("A", "resources", 9), ("B", "resources", 9)),
    org_plan=(("resources", 1),),
    members=("A", "B"),
)
T = "ProvisionedThroughputExceededException"
CHOICES = [
    *[("op", 0, None)] * 4,
    *[("op", 1, None)] * 3,
    ("op", 1, "unsent"),
    ("op", 1, T),
    ("op", 1, None),
    ("op", 1, "TransactionCanceledException"),
    ("op", 1, None),
    *[("op", 0, None)] * 4,
    ("op", 1, "lost"),
    *[("op", 1, None)] * 3,
    *[("op", 1, T)] * 5,
    ("op", 1, None),
    ("op", 1, "crash"),
]


def test_a_count_that_makes_a_member_live_unsure_of_its_organization_is_counted_there_in_the_end(world):
    result = replay(world, SCENARIO, CHOICES)
    assert not result.violations, report(SCENARIO, result)
