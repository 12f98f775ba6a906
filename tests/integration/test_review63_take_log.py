"""Review 63 (hostile): 9a72da9's ``Sweeper._take`` ("behaviour unchanged") logs a failed
organization's census under the account's message: before it, ``_take_org_census`` warned "an
organization's census left to the next sweep"; now both warn "a census left to the next sweep",
and neither names the owner or the range, so an operator cannot tell an organization's census
that keeps failing (its seats held) from an account's."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hybrid_counter.keys import range_of
from hybrid_counter.recount_requests import RecountRequests
from tests.integration.test_org_recount import SEATS, Org

pytestmark = pytest.mark.integration


def test_a_failed_organizations_census_is_logged_as_an_organizations(settings, clients, stream) -> None:
    org = Org(settings, clients, stream, limit=3)
    requests = RecountRequests(org.settings.table_name, org.clients, org.clock)
    requests.put_org(org.org_id, range_of("x"), "a test", kind=SEATS, account_id=org.members[0])
    sweeper = org.sweeper()
    recounter: Any = sweeper._org_recounter

    def failing(org_id: str, *args: Any, **kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "a test"}}, "Query")

    recounter.settle_range = failing
    warned: list[str] = []
    logger: Any = sweeper._obs.logger
    real_warning = logger.warning

    def warning(msg: object, *args: Any, **kwargs: Any) -> None:
        warned.append(str(msg))
        real_warning(msg, *args, **kwargs)

    logger.warning = warning
    try:
        sweeper.sweep()
    finally:
        del logger.warning
    assert warned, "no warning at all"
    assert any("organization" in w for w in warned), (
        f"the organization's failed census is logged as {warned} (before 9a72da9: "
        "'an organization's census left to the next sweep')"
    )
