"""Every file in events/, the function it is for, and what that function must answer.

Used by the end-to-end suite (through the embedded runtime, source or built) and by
`make sam-local` (through `sam local invoke`); in this order, against one table, each
event's answer is known.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.conftest import EVENTS


def _http_status(*allowed: int) -> Callable[[Any], None]:
    def check(response: Any) -> None:
        assert isinstance(response, dict), response
        assert response.get("statusCode") in allowed, response
        if response["statusCode"] != 204:
            json.loads(response["body"])  # a JSON body, as the API promises

    return check


def _console_file(content_type: str) -> Callable[[Any], None]:
    """The console's page or a file of it (api/console_routes.py): not JSON, with its CSP."""

    def check(response: Any) -> None:
        assert isinstance(response, dict), response
        assert response.get("statusCode") == 200, response
        headers = {name.lower(): value for name, value in response["headers"].items()}
        assert headers["content-type"].startswith(content_type), headers
        assert "default-src 'self'" in headers["content-security-policy"], headers
        assert response["body"], response

    return check


def _would_admit(expected: bool) -> Callable[[Any], None]:
    def check(response: Any) -> None:
        _http_status(200)(response)
        assert json.loads(response["body"])["would_admit"] is expected, response

    return check


def _no_batch_failures(response: Any) -> None:
    assert response == {"batchItemFailures": []}, response


def _sweep_summary(response: Any) -> None:
    assert isinstance(response, dict), response
    sweep = response.get("sweep")
    assert isinstance(sweep, dict), response
    assert {"pending_found", "counted", "cleared_from_index", "pages", "finished"} <= set(sweep), response
    assert sweep["finished"] is True, response  # nothing here takes the whole run


SAMPLE_STREAM_ARN = (
    "arn:aws:dynamodb:us-east-1:123456789012:table/hybrid-counter-ResourcesTable-1ABCDEF"
    "/stream/2026-11-21T21:00:00.000"
)


@dataclass(frozen=True)
class SampleEvent:
    file: str
    function: str  # logical id in template.yaml
    check: Callable[[Any], None]

    def load(self, stream_arn: str | None = None) -> dict[str, Any]:
        """The event; with ``stream_arn``, naming that stream instead of the sample stack's.

        A failure record that names another stack's stream would send the retry function to a
        stream its role may not read (AWS denies it; the least-privilege test flags it).
        """
        text = (EVENTS / self.file).read_text()
        if stream_arn is not None:
            text = text.replace(SAMPLE_STREAM_ARN, stream_arn)
        data: dict[str, Any] = json.loads(text)
        return data


SAMPLE_EVENTS = [
    SampleEvent("api_put_limit.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_create_resource.json", "ApiFunction", _http_status(201)),
    SampleEvent("api_put_resource.json", "ApiFunction", _http_status(200, 201)),
    SampleEvent("api_get_resource.json", "ApiFunction", _http_status(200)),
    # res-1 is no hold: its confirm answers it as it is (200); a hold is confirmed the same way
    SampleEvent("api_confirm_resource.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_create_hold.json", "ApiFunction", _http_status(201)),
    SampleEvent("api_list_resources.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_get_usage.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_get_limits.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_delete_resource.json", "ApiFunction", _http_status(204)),
    SampleEvent("api_put_plan.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_get_plan.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_list_plans.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_put_account_plan.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_put_kind_limit.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_delete_kind_limit.json", "ApiFunction", _http_status(204)),
    SampleEvent("api_get_account_history.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_get_plan_history.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_list_usage_over.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_list_events.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_create_kind_resource.json", "ApiFunction", _http_status(201)),
    SampleEvent("api_put_kind_resource.json", "ApiFunction", _http_status(200, 201)),
    SampleEvent("api_patch_kind_resource.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_dry_run_kind_resource.json", "ApiFunction", _would_admit(False)),
    SampleEvent("api_get_kind_resource.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_confirm_kind_resource.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_list_kind_resources.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_delete_kind_resource.json", "ApiFunction", _http_status(204)),
    # An organization on plan pro (above), an override set and removed, a member that joins
    # and leaves (acct-org-demo: an account with no resources), read by an operator and by its
    # administrator (its org claim alone), then deleted; 201 or 200 for the PUTs, so a
    # second run against the same table gets the same answers.
    SampleEvent("api_put_org.json", "ApiFunction", _http_status(200, 201)),
    SampleEvent("api_put_org_limit.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_delete_org_limit.json", "ApiFunction", _http_status(204)),
    SampleEvent("api_put_org_member.json", "ApiFunction", _http_status(200, 201)),
    SampleEvent("api_get_org.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_get_org_usage.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_get_org_history.json", "ApiFunction", _http_status(200)),
    SampleEvent("api_delete_org_member.json", "ApiFunction", _http_status(204)),
    SampleEvent("api_delete_org.json", "ApiFunction", _http_status(204)),
    # The operator console: its page (as the identity provider redirects back to it) and a script
    SampleEvent("api_get_console.json", "ApiFunction", _console_file("text/html")),
    SampleEvent("api_get_console_asset.json", "ApiFunction", _console_file("text/javascript")),
    SampleEvent("stream_insert_resource.json", "StreamCounterFunction", _no_batch_failures),
    SampleEvent("stream_modify_admission.json", "StreamCounterFunction", _no_batch_failures),
    SampleEvent("stream_modify_claim.json", "StreamCounterFunction", _no_batch_failures),
    SampleEvent("stream_modify_release.json", "StreamCounterFunction", _no_batch_failures),
    SampleEvent("stream_remove.json", "StreamCounterFunction", _no_batch_failures),
    SampleEvent("retry_queue_on_failure_record.json", "RetryQueueFunction", _no_batch_failures),
    SampleEvent("sweeper_schedule.json", "SweeperFunction", _sweep_summary),
]


def missing_events() -> set[str]:
    """Files in events/ that no sample covers (there must be none)."""
    return {path.name for path in EVENTS.glob("*.json")} - {sample.file for sample in SAMPLE_EVENTS}
