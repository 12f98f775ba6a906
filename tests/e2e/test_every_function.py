"""Every function of the template runs in its own execution environment and answers its sample events.

Against the source tree (HC_E2E_TARGET=local) and, in `make test`, against the `sam build`
output on a clean python3.12 (HC_E2E_TARGET=built): a function whose code or dependencies
did not make it into the build fails here.
"""

from __future__ import annotations

import pytest

from localrun import LocalRuntime
from tests.sample_events import SAMPLE_EVENTS, missing_events

pytestmark = pytest.mark.e2e


def test_every_sample_event_is_answered_by_its_function(local_runtime: LocalRuntime) -> None:
    assert missing_events() == set()
    for sample in SAMPLE_EVENTS:
        if sample.function != "ApiFunction":
            local_runtime.wait_until_idle(60)  # the API's own stream records first
        response = local_runtime.function(sample.function).invoke(sample.load(local_runtime.stream_arn))
        sample.check(response)


def test_each_function_sees_its_own_environment(local_runtime: LocalRuntime) -> None:
    for logical_id, spec in local_runtime.template.functions.items():
        environment = local_runtime.function_environment(logical_id)
        assert environment["AWS_LAMBDA_FUNCTION_NAME"] == local_runtime.function(logical_id).name
        assert environment["_HANDLER"] == spec.handler
        assert environment["LAMBDA_TASK_ROOT"] == str(spec.code_uri)
        assert environment["TABLE_NAME"] == local_runtime.table_name
        assert "VIRTUAL_ENV" not in environment
        assert "HOME" not in environment
