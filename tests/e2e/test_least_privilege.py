"""Every AWS call a function made during the suite is allowed by its role in template.yaml.

The embedded runtime recorded each function's calls (its code's, and the calls Lambda's event
source mappings make with its role) while the rest of the suite ran; this test runs after them
(marker `after_suite`), makes sure every function has run, and checks each call against the
function's role as deployed. Permissions never used are reported, not failed: a path the
suite does not drive may need them. No role may grant beyond what it names: no AWS managed
policy (all on "*"), and a wildcard only where tests/unit/test_template_security.py documents
one (the X-Ray actions that have no resource type; the function's own log streams).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from hybrid_counter.effects import Effects
from hybrid_counter.keys import org_rebase_key, range_of
from hybrid_counter.recount_requests import RecountRequests, org_request_key
from hybrid_counter.resources import ResourceService
from hybrid_counter.settings import Settings
from localrun.functions.call_recorder import least_privilege_report
from localrun.runtime import LocalRuntime
from localrun.stack.aws_clients import domain_clients
from localrun.stack.iam_policies import broad_grants, function_log_group, function_policies
from tests.e2e.conftest import Target
from tests.e2e.test_organizations import SEATS, create, ok, organization
from tests.faults import ProcessDied
from tests.unit.test_template_security import NO_RESOURCE_TYPE_ACTIONS

pytestmark = [pytest.mark.e2e, pytest.mark.after_suite]


def test_every_recorded_aws_call_is_allowed_by_the_functions_policy(target: Target, local_runtime) -> None:
    assert target.calls_recorded_to is not None
    # Given traffic for every function: the API and the stream here (plus all the suite did),
    # and the sweeper's scheduled run
    account = "least-privilege"
    assert target.call("POST", f"/accounts/{account}/resources", {"name": "x"}).status_code == 201
    rebase = leave_work_for_the_sweeper(target, local_runtime, account)
    local_runtime.function("SweeperFunction").invoke(
        {"source": "aws.events", "detail-type": "Scheduled Event"}
    )
    target.settle()
    assert rebase() is None  # the sweeper did that work: it finished the dead rebase, took the census

    # When the recorded calls are checked against the template's policies
    report = least_privilege_report(local_runtime, target.calls_recorded_to)
    print("\n" + report.summary())
    for function, permissions in report.unused.items():
        for permission in permissions:
            warnings.warn(f"{function} never used {permission}", stacklevel=1)

    # Then every function was recorded and no call was outside its policy
    assert not report.recorders_missing
    assert set(report.calls) == set(local_runtime.resources.functions), report.calls
    assert report.denied == {}, report.summary()


def leave_work_for_the_sweeper(
    target: Target, local_runtime: LocalRuntime, account: str
) -> Callable[[], dict[str, Any] | None]:
    """What the sweeper's scheduled run finds on AWS, left an hour ago, so that its calls are
    checked too (its run on an idle table makes few): a census the account asked for, one of an
    organization's range a repair asked for, and a split organization's rebase to more shards whose process died once its record was put (the
    sweeper finishes it: reads the shards, creates the new ones). Returns a read of what is left
    of that work: the rebase's record or the census request, None once both are done."""
    clients = domain_clients(local_runtime.dynamodb_url)
    table, an_hour_ago = local_runtime.table_name, lambda: time.time() - 3600
    RecountRequests(table, clients, an_hour_ago).put(account, range_of("x"), "least privilege")
    member = f"least-privilege-member-{time.time_ns()}"
    org = organization(target, 10, member)
    ok(
        target.call(
            "PUT", f"/orgs/{org}", {"plan_id": ok(target.call("GET", f"/orgs/{org}"))["plan_id"], "shards": 2}
        )
    )
    ok(create(target, member, "a seat"), 201)
    # ... and a census of one of the organization's ranges a repair asked for (its census, across
    # the members, is the sweeper's)
    RecountRequests(table, clients, an_hour_ago).put_org(
        org, range_of("a seat"), "least privilege", kind=SEATS, account_id=member
    )

    def dies_after_its_record(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if http_response.status_code == 200:
            raise ProcessDied("TransactWriteItems")

    clients.dynamodb.meta.events.register("after-call.dynamodb.TransactWriteItems", dies_after_its_record)
    service = ResourceService(Settings(table_name=table), clients, effects=Effects(clock=an_hour_ago))
    with pytest.raises(ProcessDied):
        service.orgs.reshard(org, SEATS, 4)
    clients.dynamodb.meta.events.unregister("after-call.dynamodb.TransactWriteItems", dies_after_its_record)
    key = org_rebase_key(org, SEATS)
    assert clients.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    request = org_request_key(org, range_of("a seat"), SEATS)

    def left() -> dict[str, Any] | None:
        found = [
            clients.dynamodb.get_item(TableName=table, Key=k, ConsistentRead=True).get("Item")
            for k in (key, request)
        ]
        return next((item for item in found if item), None)

    return left


def test_no_role_grants_beyond_the_resources_it_names(local_runtime) -> None:
    # Given each function's role as the runtime resolved it against the local resources
    template = local_runtime.template
    resolver = template.resolver.with_resources(local_runtime.resources.values())
    # When each is checked for grants beyond the resources it names
    broad = {
        function: broad_grants(
            function_policies(template, resolver, function),
            star_actions=NO_RESOURCE_TYPE_ACTIONS,
            log_group=function_log_group(template, resolver, function),
        )
        for function in local_runtime.resources.functions
    }

    # Then none has a managed policy, or a wildcard but the documented ones
    assert set(broad) == {"ApiFunction", "StreamCounterFunction", "RetryQueueFunction", "SweeperFunction"}
    assert {function: found for function, found in broad.items() if found} == {}
