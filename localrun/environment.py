"""The process environment the handlers see.

The runtime puts the union of all functions' resolved `Environment.Variables` in its
own `os.environ` (tests and tools in this process read them), and every execution
environment inherits it; a variable that two functions set to different values is
therefore an error. On top come the variables Lambda and the
local endpoints provide: region, dummy credentials, the endpoint URLs boto3 reads
(`AWS_ENDPOINT_URL_<SERVICE>`) and Powertools' tracer switched off (no X-Ray daemon).
Powertools metrics stay on and print their EMF lines to stdout as on Lambda; set
`POWERTOOLS_METRICS_DISABLED=true` through `extra` to silence them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from localrun.aws_clients import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
from localrun.errors import TemplateError
from localrun.template import REGION

log = logging.getLogger("localrun.environment")


def runtime_variables(dynamodb_url: str, sqs_url: str) -> dict[str, str]:
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
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def merged_environment(
    per_function: Mapping[str, Mapping[str, str]],
    runtime: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """One environment for every function; conflicting values are an error.

    The runtime's own variables (endpoints, region, credentials) win over a function's.
    """
    merged: dict[str, str] = {}
    owner: dict[str, str] = {}
    for function, variables in per_function.items():
        for name, value in variables.items():
            if name in merged and merged[name] != value:
                raise TemplateError(
                    f"environment variable {name} is {merged[name]!r} in {owner[name]} but {value!r} in "
                    f"{function}; locally all functions see one set of variables, so they must agree"
                )
            merged[name] = value
            owner[name] = function
    for name, value in runtime.items():
        if name in merged and merged[name] != value:
            log.warning(
                "%s=%r of %s is replaced by the local runtime's %r", name, merged[name], owner[name], value
            )
    return {**merged, **runtime, **(extra or {})}


def apply_environment(variables: Mapping[str, str]) -> Callable[[], None]:
    """Set variables in os.environ; returns a function that restores the previous values."""
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)

    def restore() -> None:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return restore
