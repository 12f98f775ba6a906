"""Every AWS call a function made during the suite is allowed by its policies in template.yaml.

The embedded runtime recorded each function's calls (its code's, and the calls Lambda's event
source mappings make with its role) while the rest of the suite ran; this test runs after them
(marker `after_suite`), makes sure every function has run, and checks each call against the
function's role as SAM would create it. Permissions never used are reported, not failed: a
path the suite does not drive may need them.
"""

from __future__ import annotations

import warnings

import pytest

from localrun.call_recorder import least_privilege_report
from tests.e2e.conftest import Target

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
