"""Each function's IAM permissions as SAM deploys them, and whether a request is allowed.

A function with `Role: !GetAtt <role>.Arn` (an `AWS::IAM::Role` of the template) has exactly
that role's permissions: its inline `Policies`, its `ManagedPolicyArns`, and any
`AWS::IAM::Policy` / `AWS::IAM::ManagedPolicy` of the template that names it in `Roles`. SAM
adds nothing to a role it did not generate. Without `Role`, `function_policies()` reads the
function's `Policies` (inline statements, resolved against the local resources, and AWS
managed policies by name or ARN) and adds what the SAM transform adds to the role it
generates (both checked against the real transform by tests/unit/test_template_security.py):

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
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from localrun.errors import TemplateError
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.intrinsics import Resolver, intrinsic_name
from localrun.stack.template import Template

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
    role = props.get("Role", globals_function.get("Role"))
    if role is not None:
        return _role_policies(document, role_logical_id(document, role, f"{where}.Role"), resolver)
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


def role_logical_id(document: dict[str, Any], role: Any, where: str) -> str:
    """The template's AWS::IAM::Role that `Role: !GetAtt <id>.Arn` names (other forms are not modelled)."""
    target = role.get("Fn::GetAtt") if intrinsic_name(role) == "Fn::GetAtt" else None
    if isinstance(target, str):
        target = target.split(".", 1)
    if isinstance(target, list) and len(target) == 2 and target[1] == "Arn":
        kind = ((document.get("Resources") or {}).get(str(target[0])) or {}).get("Type")
        if kind == "AWS::IAM::Role":
            return str(target[0])
    raise TemplateError(
        f"{where}: only !GetAtt <AWS::IAM::Role of this template>.Arn is modelled, not {role!r}"
    )


def _role_policies(document: dict[str, Any], role_id: str, resolver: Resolver) -> list[Statement]:
    resources: dict[str, Any] = document["Resources"]
    props: dict[str, Any] = resources[role_id].get("Properties") or {}
    where = f"Resources.{role_id}"
    statements: list[Statement] = []
    for index, arn in enumerate(props.get("ManagedPolicyArns") or []):
        statements += _policy(
            resolver.resolve_str(arn, f"{where}.ManagedPolicyArns[{index}]"), resolver, where
        )
    for index, policy in enumerate(props.get("Policies") or []):
        statements += _policy(
            policy.get("PolicyDocument"), resolver, f"{where}.Policies[{index}].PolicyDocument"
        )
    for other_id, other in resources.items():  # separate policies attached to the role
        if other.get("Type") in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}:
            other_props = other.get("Properties") or {}
            if {"Ref": role_id} in (other_props.get("Roles") or []):
                statements += _policy(
                    other_props.get("PolicyDocument"), resolver, f"Resources.{other_id}.PolicyDocument"
                )
    return statements


def _managed(name: str, source: str) -> list[Statement]:
    return [Statement(MANAGED_POLICIES[name], ("*",), f"managed:{name} ({source})")]


def _policy(policy: Any, resolver: Resolver, where: str) -> list[Statement]:
    if isinstance(policy, str):
        name = policy.rsplit("/", 1)[-1]
        if name not in MANAGED_POLICIES:
            raise TemplateError(
                f"{where}: managed policy {policy} is not known to localrun/stack/iam_policies.py"
            )
        return _managed(name, "template")
    if not isinstance(policy, dict) or "Statement" not in policy:
        raise TemplateError(f"{where}: only inline policy documents and managed policies are modelled")
    raw = policy["Statement"]
    found = []
    for index, statement in enumerate(raw if isinstance(raw, list) else [raw]):
        here = f"{where}.Statement[{index}]"
        if statement.get("Effect") != "Allow" or {"Condition", "NotAction", "NotResource"} & set(statement):
            raise TemplateError(f"{here}: only Allow statements without conditions are modelled")
        actions = resolver.resolve(statement.get("Action"), f"{here}.Action")
        resources = resolver.resolve(statement.get("Resource"), f"{here}.Resource")
        found.append(Statement(_strings(actions), _strings(resources), "template"))
    return found


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in (value if isinstance(value, list) else [value]))


def function_log_group(template: Template, resolver: Resolver, logical_id: str) -> str | None:
    """The name of the log group the function's `LoggingConfig` names (its or Globals'), if any."""
    document = load_yaml(template.path)
    props: dict[str, Any] = document["Resources"][logical_id].get("Properties") or {}
    globals_function = (document.get("Globals") or {}).get("Function") or {}
    config = props.get("LoggingConfig", globals_function.get("LoggingConfig")) or {}
    group = config.get("LogGroup")
    where = f"Resources.{logical_id}.LoggingConfig.LogGroup"
    return None if group is None else resolver.resolve_str(group, where)


def broad_grants(
    statements: Iterable[Statement], *, star_actions: frozenset[str], log_group: str | None
) -> list[str]:
    """What a role grants beyond the resources it names: each statement that is not the
    template's own (an AWS managed policy, all on "*", or one SAM adds to a role it generates),
    and each own statement with a wildcard in an action or a resource, except two:

    - `Resource: "*"` in a statement whose actions are all in `star_actions` (actions with no
      resource type, which IAM evaluates against "*" only);
    - the streams of the function's own log group, `...:log-group:<log_group>:log-stream:*`,
      for logs:CreateLogStream and logs:PutLogEvents (Lambda names the streams).
    """
    streams = re.compile(
        r"arn:[\w-]+:logs:[\w-]+:\d{12}:log-group:" + re.escape(log_group or "") + r":log-stream:\*"
    )
    log_actions = {"logs:createlogstream", "logs:putlogevents"}
    star = {action.lower() for action in star_actions}
    found = []
    for statement in statements:
        actions = {action.lower() for action in statement.actions}
        if not statement.own:
            found.append(f"{statement.source}: {statement.actions} on {statement.resources}")
            continue
        for resource in statement.resources:
            documented = (resource == "*" and actions <= star) or (
                log_group is not None and actions <= log_actions and streams.fullmatch(resource) is not None
            )
            if not documented and ("*" in resource or "?" in resource):
                found.append(f"{statement.actions} on {resource}")
        found += [
            f"wildcard action {action}" for action in statement.actions if "*" in action or "?" in action
        ]
    return found
