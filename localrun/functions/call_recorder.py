"""The AWS calls a local run made for each function, as IAM would authorize them.

`RuntimeOptions(record_calls_to=dir)` turns recording on: every execution environment records
its handler's calls (`call_recorder_hook`, loaded by the worker) and the event source
mappings' clients record the calls Lambda makes with the function's role (reading the stream,
polling the queue, sending on-failure records). `least_privilege_report()` turns each call
into the IAM requests it needs (a transaction needs the item action on each item's table; a
batch call the action of its entries; a stream read the stream's ARN; PutEvents the ARN of each
bus its entries name) and checks each against
the function's policies (`localrun.stack.iam_policies`).

Not counted: calls the local emulation makes that Lambda does not (the SQS mapping's
ChangeMessageVisibilityBatch, which stands in for waiting out the visibility timeout). Not
reported as unused: the permissions Lambda itself uses with the role to deliver logs and
traces (`PLATFORM_ACTIONS`), which a local run does not make.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from localrun.functions.call_recorder_hook import ENVIRONMENT_VARIABLE, CallLog
from localrun.stack.iam_policies import Statement, function_policies
from localrun.stack.template import ACCOUNT_ID, REGION

if TYPE_CHECKING:
    from localrun.stack.provision import LocalResources
    from localrun.stack.template import Template


class RunningStack(Protocol):
    """What the report reads of a running stack (a ``LocalRuntime`` is one): the template and the
    resources made from it. A protocol, so this module does not import the runtime above it."""

    @property
    def template(self) -> Template: ...

    @property
    def resources(self) -> LocalResources: ...


__all__ = ["ENVIRONMENT_VARIABLE", "IamRequest", "LeastPrivilegeReport", "attach", "least_privilege_report"]

# Calls of the local mappings that stand in for something Lambda does without an API call.
LOCAL_ONLY = frozenset({("mapping", "sqs", "ChangeMessageVisibilityBatch")})
# Lambda's log delivery and X-Ray upload, made with the function's role but not locally.
PLATFORM_ACTIONS = frozenset(
    {"logs:createlogstream", "logs:putlogevents", "xray:puttracesegments", "xray:puttelemetryrecords"}
)
_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_BATCH_ACTIONS = {
    ("sqs", "SendMessageBatch"): "SendMessage",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
}


def attach(client: Any, principal: str, directory: Path) -> Any:
    """Record the calls a mapping's client makes on behalf of function `principal`."""
    CallLog(str(directory), principal, "mapping").register(client.meta.events)
    return client


@dataclass(frozen=True)
class IamRequest:
    function: str  # logical id
    action: str  # "dynamodb:GetItem"
    resource: str  # ARN, or "*"
    origin: str  # "function" (its code) or "mapping" (Lambda, with the function's role)


@dataclass
class LeastPrivilegeReport:
    denied: dict[IamRequest, int] = field(default_factory=dict)  # request not allowed -> how often
    used: dict[str, set[tuple[str, str]]] = field(default_factory=lambda: defaultdict(set))
    unused: dict[str, list[str]] = field(default_factory=dict)  # own permissions never exercised
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # per function
    recorders_missing: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"recorded calls per function: {dict(self.calls)}"]
        lines += [
            f"DENIED {request.function} ({request.origin}): {request.action} on {request.resource} "
            f"({count} calls): no statement of its role allows it"
            for request, count in self.denied.items()
        ]
        for function, permissions in sorted(self.unused.items()):
            lines += [f"unused by {function}: {permission}" for permission in permissions]
        lines += [f"no recorder in an environment of {name}" for name in self.recorders_missing]
        return "\n".join(lines)


def least_privilege_report(runtime: RunningStack, directory: Path) -> LeastPrivilegeReport:
    resources = runtime.resources
    by_name = {identity.name: logical_id for logical_id, identity in resources.functions.items()}
    resolver = runtime.template.resolver.with_resources(resources.values())
    policies = {
        logical_id: function_policies(runtime.template, resolver, logical_id)
        for logical_id in resources.functions
    }
    report = LeastPrivilegeReport()
    for record in _records(directory):
        function = by_name.get(record["principal"])
        if function is None:  # another runtime's environment that inherited the variable
            continue
        if record.get("recorder") == "unavailable":
            report.recorders_missing.append(function)
        if "operation" not in record:
            continue
        if (record["origin"], record["service"], record["operation"]) in LOCAL_ONLY:
            continue
        report.calls[function] += 1
        for action, resource in iam_requests(record, runtime):
            request = IamRequest(function, action, resource, record["origin"])
            allowing = [
                statement for statement in policies.get(function, []) if statement.allows(action, resource)
            ]
            if not allowing:
                report.denied[request] = report.denied.get(request, 0) + 1
            if any(statement.own for statement in allowing):
                report.used[function].add((action.lower(), resource))
    for function, statements in policies.items():
        report.unused[function] = _unused(statements, report.used.get(function, set()))
    return report


def _records(directory: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(directory.glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def iam_requests(record: dict[str, Any], runtime: RunningStack) -> list[tuple[str, str]]:
    """The (action, resource ARN) pairs IAM evaluates for one recorded call."""
    service, operation, params = record["service"], record["operation"], record["params"]
    tables = {table.name: table.arn for table in runtime.resources.tables.values()}

    def table_arn(name: str) -> str:
        return tables.get(name, f"arn:aws:dynamodb:unknown:unknown:table/{name}")

    if operation in {"TransactWriteItems", "TransactGetItems"}:
        return [
            (f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table_arn(table))
            for kind, table in params["TransactItems"]
        ]
    if operation in {"BatchWriteItem", "BatchGetItem"}:
        return [(f"dynamodb:{operation}", table_arn(table)) for table in params["RequestItems"]]
    if "EventBusNames" in params:
        return [(f"{service}:{operation}", event_bus_arn(name, runtime)) for name in params["EventBusNames"]]
    action = f"{service}:{_BATCH_ACTIONS.get((service, operation), operation)}"
    return [(action, _resource(params, table_arn, runtime))]


def _resource(params: dict[str, Any], table_arn: Any, runtime: RunningStack) -> str:
    queues = runtime.resources.queues.values()
    if "TableName" in params:
        arn = str(table_arn(params["TableName"]))
        return f"{arn}/index/{params['IndexName']}" if "IndexName" in params else arn
    if "StreamArn" in params:
        return str(params["StreamArn"])
    if "QueueUrl" in params or "QueueName" in params:
        wanted = params.get("QueueUrl") or params.get("QueueName")
        found = [queue.arn for queue in queues if wanted in {queue.url, queue.name}]
        return found[0] if found else f"arn:aws:sqs:unknown:unknown:{wanted}"
    return "*"


def event_bus_arn(name_or_arn: str, runtime: RunningStack) -> str:
    """PutEvents is authorized on the bus's ARN (an entry's EventBusName may be either)."""
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    bus = runtime.resources.event_buses.get(name_or_arn)
    return bus.arn if bus is not None else f"arn:aws:events:{REGION}:{ACCOUNT_ID}:event-bus/{name_or_arn}"


def _unused(statements: list[Statement], used: set[tuple[str, str]]) -> list[str]:
    unused = []
    for statement in statements:
        if not statement.own:
            continue
        for action in statement.actions:
            if action.lower() in PLATFORM_ACTIONS:
                continue
            for resource in statement.resources:
                if (action.lower(), resource) not in used:
                    unused.append(f"{action} on {resource}")
    return unused
