"""The process environment each function's execution environments see, and nothing else.

As on Lambda, a function sees its own `Environment.Variables` (from the template, resolved
against the local resources) plus the variables Lambda defines for every function
(`AWS_LAMBDA_FUNCTION_NAME`, `LAMBDA_TASK_ROOT`, `_HANDLER`, region, credentials, ...),
never another function's variables and never this process's own environment.

On top come the stand-ins for what is not AWS here (`local_variables`): the endpoint URLs
boto3 reads (`AWS_ENDPOINT_URL_<SERVICE>`), dummy credentials, Powertools' tracer switched
off (no X-Ray daemon), and the developer's `~/.aws` files kept out of reach. Powertools
metrics stay on and print their EMF lines to stdout as on Lambda; set
`POWERTOOLS_METRICS_DISABLED=true` through `RuntimeOptions.extra_environment` to silence them.

Tests and tools in the runtime's own process get variables from the runtime instead:
`LocalRuntime.function_environment(logical_id)` (what that function sees) and
`LocalRuntime.client_environment()` (region, credentials and endpoints for boto3 and
command-line tools); the runtime never changes `os.environ`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from localrun.stack.aws_clients import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
from localrun.stack.template import REGION

log = logging.getLogger("localrun.functions.environment")

# What Lambda's python3.12 runtime sets that does not depend on the function.
_RUNTIME_CONSTANTS = {
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
    "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "LANG": "en_US.UTF-8",
    "TZ": ":UTC",
}
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def client_variables(dynamodb_url: str, sqs_url: str, events_url: str | None = None) -> dict[str, str]:
    """Region, dummy credentials and endpoint URLs: what a boto3 client needs to reach the local stack.

    `events_url`: EventBridge's endpoint; by default the moto server that serves SQS.
    """
    return {
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_url,
        # boto3 derives the name from the service id "DynamoDB Streams"; the second spelling is
        # for code that builds the name from the client name instead.
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": dynamodb_url,
        "AWS_ENDPOINT_URL_DYNAMODBSTREAMS": dynamodb_url,
        "AWS_ENDPOINT_URL_SQS": sqs_url,
        # boto3.client("events"): the variable is named after the service id, "EventBridge".
        "AWS_ENDPOINT_URL_EVENTBRIDGE": events_url or sqs_url,
    }


def local_variables(dynamodb_url: str, sqs_url: str, events_url: str | None = None) -> dict[str, str]:
    """What every function sees locally because this is not AWS."""
    return {
        **client_variables(dynamodb_url, sqs_url, events_url),
        "POWERTOOLS_TRACE_DISABLED": "true",
        # A developer's ~/.aws (profiles, endpoint settings) must not configure the functions.
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }


def lambda_variables(
    *,
    function_name: str,
    memory_size: int,
    handler: str,
    task_root: Path,
    interpreter: Path,
) -> dict[str, str]:
    """The variables Lambda defines for one function (region and credentials come with the local ones)."""
    return {
        **_RUNTIME_CONSTANTS,
        "AWS_LAMBDA_FUNCTION_NAME": function_name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory_size),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function_name}",
        "_HANDLER": handler,
        "LAMBDA_TASK_ROOT": str(task_root),
        "LAMBDA_RUNTIME_DIR": str(interpreter.parent),
        "PATH": f"{interpreter.parent}:{_SYSTEM_PATH}",
    }


def function_environment(
    own: Mapping[str, str],
    lambda_defined: Mapping[str, str],
    local: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """One function's environment: its own variables, then what Lambda and the local stack set.

    Lambda's reserved variables cannot be overridden by a function (a template that tries is
    rejected by AWS); locally they win with a warning rather than failing the start.
    """
    for name in own.keys() & (lambda_defined.keys() | local.keys()):
        log.warning("%s=%r from the template is replaced by the runtime's value", name, own[name])
    return {**own, **lambda_defined, **local, **(extra or {})}
