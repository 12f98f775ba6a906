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

import warnings

import pytest

from localrun.functions.call_recorder import least_privilege_report
from localrun.stack.iam_policies import broad_grants, function_log_group, function_policies
from tests.e2e.conftest import Target
from tests.unit.test_template_security import NO_RESOURCE_TYPE_ACTIONS

pytestmark = [pytest.mark.e2e, pytest.mark.after_suite]


def test_every_recorded_aws_call_is_allowed_by_the_functions_policy(target: Target, local_runtime) -> None:
    assert target.calls_recorded_to is not None
    # Given traffic for every function: the API and the stream here (plus all the suite did),
    # and the sweeper's scheduled run
    account = "least-privilege"
    assert target.call("POST", f"/accounts/{account}/resources", {"name": "x"}).status_code == 201
    local_runtime.function("SweeperFunction").invoke(
        {"source": "aws.events", "detail-type": "Scheduled Event"}
    )
    target.settle()

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
