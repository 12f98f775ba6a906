"""Each function's IAM permissions as SAM deploys them, and whether a request is allowed.

`function_policies()` reads a function's `Policies` from the template (inline statements,
resolved against the local resources, and AWS managed policies by name or ARN) and adds what
the SAM transform adds to the role it generates (checked against the real transform by
tests/unit/test_sam_implicit_policies.py):

- always `AWSLambdaBasicExecutionRole`;
- `Tracing: Active` (the function's or Globals'): `AWSXrayWriteOnlyAccess`;
- a `DynamoDB` event: `AWSLambdaDynamoDBExecutionRole`; an `SQS` event:
  `AWSLambdaSQSQueueExecutionRole`;
- an event's `DestinationConfig.OnFailure` with `Type: SQS`: `sqs:SendMessage` on it.

The managed policies' contents are AWS's published documents (actions on `*`). SAM policy
templates (`DynamoDBCrudPolicy: ...`) are not expanded: a template using one is refused,
so nothing is allowed by guesswork. Only Allow statements without conditions are modelled,
which is all this template writes; `is_allowed()` matches actions case-insensitively and
both with IAM's `*` and `?` wildcards.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from localrun.cfn_yaml import load_yaml
from localrun.errors import TemplateError
from localrun.intrinsics import Resolver
from localrun.template import Template

_LOGS = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents")
MANAGED_POLICIES: Mapping[str, tuple[str, ...]] = {
    "AWSLambdaBasicExecutionRole": _LOGS,
    "AWSXrayWriteOnlyAccess": (
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:GetSamplingStatisticSummaries",
    ),
    "AWSLambdaDynamoDBExecutionRole": (
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
        *_LOGS,
    ),
    "AWSLambdaSQSQueueExecutionRole": (
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        *_LOGS,
    ),
}
EVENT_MANAGED_POLICY = {
    "DynamoDB": "AWSLambdaDynamoDBExecutionRole",
    "SQS": "AWSLambdaSQSQueueExecutionRole",
}


@dataclass(frozen=True)
class Statement:
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    source: str  # "template" (the project's own), "managed:<name>" or "sam:<what>"

    @property
    def own(self) -> bool:
        return self.source == "template"

    def allows(self, action: str, resource: str) -> bool:
        return any(_matches(pattern, action, case=False) for pattern in self.actions) and any(
            _matches(pattern, resource, case=True) for pattern in self.resources
        )


def _matches(pattern: str, value: str, *, case: bool) -> bool:
    if not case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def is_allowed(statements: Iterable[Statement], action: str, resource: str) -> Statement | None:
    return next((statement for statement in statements if statement.allows(action, resource)), None)


def function_policies(template: Template, resolver: Resolver, logical_id: str) -> list[Statement]:
    """Every Allow statement of the function's role; `resolver` knows the local resources."""
    document = load_yaml(template.path)
    resource = document["Resources"][logical_id]
    props: dict[str, Any] = resource.get("Properties") or {}
    globals_function = (document.get("Globals") or {}).get("Function") or {}
    where = f"Resources.{logical_id}"
    statements = [*_managed("AWSLambdaBasicExecutionRole", "sam:basic execution")]
    tracing = resolver.resolve(props.get("Tracing", globals_function.get("Tracing")), f"{where}.Tracing")
    if tracing == "Active":
        statements += _managed("AWSXrayWriteOnlyAccess", "sam:Tracing Active")
    for name, event in (props.get("Events") or {}).items():
        managed = EVENT_MANAGED_POLICY.get(event.get("Type"))
        if managed is not None:
            statements += _managed(managed, f"sam:{name} event")
        on_failure = ((event.get("Properties") or {}).get("DestinationConfig") or {}).get("OnFailure") or {}
        if on_failure.get("Type") == "SQS":
            queue = resolver.resolve_str(
                on_failure["Destination"], f"{where}.Events.{name}.DestinationConfig"
            )
            statements.append(Statement(("sqs:SendMessage",), (queue,), f"sam:{name} on-failure destination"))
    for index, policy in enumerate(props.get("Policies") or []):
        statements += _policy(policy, resolver, f"{where}.Policies[{index}]")
    return statements


def _managed(name: str, source: str) -> list[Statement]:
    return [Statement(MANAGED_POLICIES[name], ("*",), f"managed:{name} ({source})")]


def _policy(policy: Any, resolver: Resolver, where: str) -> list[Statement]:
    if isinstance(policy, str):
        name = policy.rsplit("/", 1)[-1]
        if name not in MANAGED_POLICIES:
            raise TemplateError(f"{where}: managed policy {policy} is not known to localrun/iam_policies.py")
        return _managed(name, "template")
    if not isinstance(policy, dict) or "Statement" not in policy:
        raise TemplateError(f"{where}: only inline policy documents and managed policies are modelled")
    raw = policy["Statement"]
    found = []
    for index, statement in enumerate(raw if isinstance(raw, list) else [raw]):
        here = f"{where}.Statement[{index}]"
        if statement.get("Effect") != "Allow" or "Condition" in statement or "NotAction" in statement:
            raise TemplateError(f"{here}: only Allow statements without conditions are modelled")
        actions = resolver.resolve(statement.get("Action"), f"{here}.Action")
        resources = resolver.resolve(statement.get("Resource"), f"{here}.Resource")
        found.append(Statement(_strings(actions), _strings(resources), "template"))
    return found


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in (value if isinstance(value, list) else [value]))


def wildcards(statements: Iterable[Statement]) -> list[str]:
    """The project's own statements' wildcard actions or resources (there should be none)."""
    return [
        f"{statement.actions} on {statement.resources}"
        for statement in statements
        if statement.own
        and any("*" in item or "?" in item for item in (*statement.actions, *statement.resources))
    ]
