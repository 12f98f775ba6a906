"""Create the template's tables, queues, event buses and rules on the local endpoints ("deploy" the stack locally).

Physical names are `<stack name>-<logical id>` unless the template names the resource
itself (log groups only get a name: functions log to stdout locally). The result,
`LocalResources`, holds every emulated resource's `Ref` value and attributes, which is what
intrinsic functions resolve against. Provisioning an existing stack again reuses its tables,
queues and buses and updates its rules (like updating a deployed stack).

EventBridge (on moto): the template's buses; a bus a rule names that the template does not
create (a parameter naming an existing bus, as `EventBusName` does) is created as its local
stand-in; each rule with its pattern and SQS targets, so moto's PutEvents delivers to the
queues. Queue policies are recorded as each queue's `Policy` attribute; moto does not enforce them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from localrun.errors import TemplateError
from localrun.stack.intrinsics import ResourceValues
from localrun.stack.template import ACCOUNT_ID, REGION, EventRuleSpec, QueueSpec, TableSpec, Template

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

log = logging.getLogger("localrun.stack.provision")

_MAX_FUNCTION_NAME = 64


@dataclass(frozen=True)
class TableResource:
    logical_id: str
    name: str
    arn: str
    stream_arn: str | None


@dataclass(frozen=True)
class QueueResource:
    logical_id: str
    name: str
    url: str
    arn: str


@dataclass(frozen=True)
class EventBusResource:
    name: str
    arn: str
    logical_id: str | None  # None: not the template's; a bus one of its rules names, stood in for locally


@dataclass(frozen=True)
class EventRuleResource:
    logical_id: str
    name: str
    arn: str
    event_bus: str  # the name of its bus
    target_queues: tuple[str, ...]  # logical ids


@dataclass(frozen=True)
class FunctionIdentity:
    logical_id: str
    name: str
    arn: str


@dataclass(frozen=True)
class LocalResources:
    stack_name: str
    tables: dict[str, TableResource] = field(default_factory=dict)
    queues: dict[str, QueueResource] = field(default_factory=dict)
    functions: dict[str, FunctionIdentity] = field(default_factory=dict)
    http_api_ids: dict[str, str] = field(default_factory=dict)
    layer_arns: dict[str, str] = field(default_factory=dict)
    log_group_names: dict[str, str] = field(default_factory=dict)
    event_buses: dict[str, EventBusResource] = field(default_factory=dict)  # by name
    event_rules: dict[str, EventRuleResource] = field(default_factory=dict)

    def values(self) -> dict[str, ResourceValues]:
        """Ref/GetAtt values of every resource, for `Resolver.with_resources`."""
        values: dict[str, ResourceValues] = {}
        for table in self.tables.values():
            attributes = {"Arn": table.arn}
            if table.stream_arn is not None:
                attributes["StreamArn"] = table.stream_arn
            values[table.logical_id] = ResourceValues(table.name, attributes)
        for queue in self.queues.values():
            values[queue.logical_id] = ResourceValues(
                queue.url, {"Arn": queue.arn, "QueueName": queue.name, "QueueUrl": queue.url}
            )
        for function in self.functions.values():
            values[function.logical_id] = ResourceValues(function.name, {"Arn": function.arn})
        for logical_id, api_id in self.http_api_ids.items():
            values[logical_id] = ResourceValues(
                api_id, {"ApiEndpoint": f"https://{api_id}.execute-api.local"}
            )
        for logical_id, arn in self.layer_arns.items():
            values[logical_id] = ResourceValues(arn)
        for logical_id, name in self.log_group_names.items():
            # With the ":*" suffix, as CloudWatch Logs reports a group's ARN (DescribeLogGroups).
            values[logical_id] = ResourceValues(
                name, {"Arn": f"arn:aws:logs:{REGION}:{ACCOUNT_ID}:log-group:{name}:*"}
            )
        for bus in self.event_buses.values():
            if bus.logical_id is not None:
                values[bus.logical_id] = ResourceValues(bus.name, {"Arn": bus.arn, "Name": bus.name})
        for rule in self.event_rules.values():
            # A rule's Ref is CloudFormation's physical id, whose form depends on its bus: not emulated.
            values[rule.logical_id] = ResourceValues(None, {"Arn": rule.arn})
        return values


def physical_name(stack_name: str, logical_id: str) -> str:
    return f"{stack_name}-{logical_id}"


def function_identity(stack_name: str, logical_id: str, explicit_name: str | None) -> FunctionIdentity:
    name = explicit_name or physical_name(stack_name, logical_id)[:_MAX_FUNCTION_NAME]
    return FunctionIdentity(logical_id, name, f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}")


def http_api_id(stack_name: str, logical_id: str) -> str:
    """A stable 10-character id shaped like API Gateway's."""
    return hashlib.sha256(f"{stack_name}/{logical_id}".encode()).hexdigest()[:10]


def provision(template: Template, dynamodb: DynamoDBClient, sqs: SQSClient, events: Any) -> LocalResources:
    """Create (or reuse) every table, queue, bus and rule of the template; describe all local resources.

    `events` is an EventBridge client (`localrun.stack.aws_clients.events_client`) for moto.
    """
    stack = template.stack_name
    tables = {spec.logical_id: _ensure_table(spec, stack, dynamodb) for spec in template.tables.values()}
    queues: dict[str, QueueResource] = {}
    for spec in _queues_in_dependency_order(template):
        queues[spec.logical_id] = _ensure_queue(spec, stack, sqs, queues)
    functions = {
        spec.logical_id: function_identity(stack, spec.logical_id, spec.function_name)
        for spec in template.functions.values()
    }
    resources = LocalResources(
        stack_name=stack,
        tables=tables,
        queues=queues,
        functions=functions,
        http_api_ids={logical_id: http_api_id(stack, logical_id) for logical_id in template.http_apis},
        layer_arns={
            logical_id: f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:layer:{physical_name(stack, logical_id)}:1"
            for logical_id in template.layers
        },
        log_group_names={
            spec.logical_id: spec.log_group_name or physical_name(stack, spec.logical_id)
            for spec in template.log_groups.values()
        },
    )
    return _provision_events(template, resources, sqs, events) if _uses_events(template) else resources


def _uses_events(template: Template) -> bool:
    return bool(template.event_buses or template.event_rules or template.queue_policies)


# -- tables -----------------------------------------------------------------------------------


def _table_request(spec: TableSpec, name: str) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": list(spec.attribute_definitions),
        "KeySchema": list(spec.key_schema),
        "BillingMode": spec.billing_mode,
    }
    if spec.billing_mode == "PROVISIONED":
        request["ProvisionedThroughput"] = spec.provisioned_throughput or {
            "ReadCapacityUnits": 5,
            "WriteCapacityUnits": 5,
        }
    if spec.global_secondary_indexes:
        indexes = []
        for index in spec.global_secondary_indexes:
            entry = {key: value for key, value in index.items() if key != "ContributorInsightsSpecification"}
            if spec.billing_mode == "PROVISIONED" and "ProvisionedThroughput" not in entry:
                entry["ProvisionedThroughput"] = request["ProvisionedThroughput"]
            if spec.billing_mode == "PAY_PER_REQUEST":
                entry.pop("ProvisionedThroughput", None)
            indexes.append(entry)
        request["GlobalSecondaryIndexes"] = indexes
    if spec.local_secondary_indexes:
        request["LocalSecondaryIndexes"] = list(spec.local_secondary_indexes)
    if spec.stream_view_type is not None:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream_view_type}
    return request


def _ensure_table(spec: TableSpec, stack: str, dynamodb: DynamoDBClient) -> TableResource:
    name = spec.table_name or physical_name(stack, spec.logical_id)
    if len(name) < 3:
        raise TemplateError(f"table name {name!r} is too short (DynamoDB needs at least 3 characters)")
    try:
        dynamodb.create_table(**_table_request(spec, name))
        log.info("created table %s", name)
    except dynamodb.exceptions.ResourceInUseException:
        log.info("reusing existing table %s", name)
    description = _wait_active(dynamodb, name)
    if spec.ttl_attribute is not None:
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") != "ENABLED":
            dynamodb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute}
            )
    stream_arn = description.get("LatestStreamArn") if spec.stream_view_type is not None else None
    if spec.stream_view_type is not None and not stream_arn:
        raise TemplateError(f"table {name} has no stream on DynamoDB Local although the template enables one")
    return TableResource(spec.logical_id, name, str(description["TableArn"]), stream_arn)


def _wait_active(dynamodb: DynamoDBClient, name: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        table = dynamodb.describe_table(TableName=name)["Table"]
        indexes_active = all(
            index.get("IndexStatus", "ACTIVE") == "ACTIVE"
            for index in table.get("GlobalSecondaryIndexes", [])
        )
        if table.get("TableStatus") == "ACTIVE" and indexes_active:
            return table
        if time.monotonic() > deadline:
            raise TemplateError(f"table {name} did not become ACTIVE")
        time.sleep(0.1)


# -- queues -----------------------------------------------------------------------------------


def _queues_in_dependency_order(template: Template) -> list[QueueSpec]:
    """Dead-letter queues before the queues that redrive into them."""
    ordered: list[QueueSpec] = []
    visiting: set[str] = set()

    def visit(spec: QueueSpec) -> None:
        if spec in ordered:
            return
        if spec.logical_id in visiting:
            raise TemplateError(f"queue {spec.logical_id} is part of a redrive cycle")
        visiting.add(spec.logical_id)
        if spec.dead_letter_queue is not None:
            visit(template.queues[spec.dead_letter_queue])
        visiting.discard(spec.logical_id)
        ordered.append(spec)

    for spec in template.queues.values():
        visit(spec)
    return ordered


def _ensure_queue(
    spec: QueueSpec, stack: str, sqs: SQSClient, created: dict[str, QueueResource]
) -> QueueResource:
    name = spec.queue_name or physical_name(stack, spec.logical_id)
    if spec.fifo and not name.endswith(".fifo"):
        name += ".fifo"
    attributes = dict(spec.attributes)
    if spec.dead_letter_queue is not None:
        attributes["RedrivePolicy"] = json.dumps(
            {
                "deadLetterTargetArn": created[spec.dead_letter_queue].arn,
                "maxReceiveCount": spec.max_receive_count,
            }
        )
    url = sqs.create_queue(QueueName=name, Attributes=cast("dict[QueueAttributeNameType, str]", attributes))[
        "QueueUrl"
    ]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    log.info("queue %s ready", name)
    return QueueResource(spec.logical_id, name, url, arn)


# -- EventBridge ------------------------------------------------------------------------------


def _provision_events(
    template: Template, resources: LocalResources, sqs: SQSClient, events: Any
) -> LocalResources:
    """Buses, then rules (their bus may be one of the buses), then queue policies (they may name a rule)."""
    buses: dict[str, EventBusResource] = {}
    for bus_spec in template.event_buses.values():
        bus = _ensure_event_bus(events, bus_spec.name, bus_spec.logical_id)
        buses[bus.name] = bus
    resources = replace(resources, event_buses=dict(buses))
    resolver = template.resolver.with_resources(resources.values())
    rules: dict[str, EventRuleResource] = {}
    for rule_spec in template.event_rules.values():
        bus_name = _bus_name(
            resolver.resolve(rule_spec.event_bus, f"Resources.{rule_spec.logical_id}.EventBusName")
        )
        if bus_name not in buses:
            buses[bus_name] = _ensure_event_bus(events, bus_name, None)
        rules[rule_spec.logical_id] = _ensure_rule(rule_spec, template, resources, bus_name, events)
    resources = replace(resources, event_buses=buses, event_rules=rules)
    resolver = template.resolver.with_resources(resources.values())
    for policy in template.queue_policies.values():
        document = resolver.resolve(policy.policy_document, f"Resources.{policy.logical_id}.PolicyDocument")
        for queue_id in policy.queues:
            sqs.set_queue_attributes(
                QueueUrl=resources.queues[queue_id].url, Attributes={"Policy": json.dumps(document)}
            )
            log.info("queue policy %s recorded on %s (not enforced locally)", policy.logical_id, queue_id)
    return resources


def _bus_name(value: Any) -> str:
    """A rule's EventBusName (a name or an ARN; none = the default bus) as a bus name."""
    if value is None:
        return "default"
    text = str(value)
    return text.split(":event-bus/", 1)[1] if text.startswith("arn:") and ":event-bus/" in text else text


def _ensure_event_bus(events: Any, name: str, logical_id: str | None) -> EventBusResource:
    try:
        arn = str(events.create_event_bus(Name=name)["EventBusArn"])
        if logical_id is None:
            log.warning(
                "event bus %s is named by the template but not created by it (on AWS it must exist): "
                "created locally as its stand-in",
                name,
            )
        else:
            log.info("created event bus %s", name)
    except events.exceptions.ResourceAlreadyExistsException:
        arn = str(events.describe_event_bus(Name=name)["Arn"])
        log.info("reusing existing event bus %s", name)
    return EventBusResource(name, arn, logical_id)


def _ensure_rule(
    spec: EventRuleSpec, template: Template, resources: LocalResources, bus_name: str, events: Any
) -> EventRuleResource:
    where = f"Resources.{spec.logical_id}"
    resolver = template.resolver.with_resources(resources.values())
    name = spec.rule_name or physical_name(template.stack_name, spec.logical_id)[:64]
    pattern = resolver.resolve(spec.event_pattern, f"{where}.EventPattern")
    request: dict[str, Any] = {
        "Name": name,
        "EventBusName": bus_name,
        "EventPattern": pattern if isinstance(pattern, str) else json.dumps(pattern),
        "State": "ENABLED",
    }
    if spec.description is not None:
        request["Description"] = spec.description
    arn = str(events.put_rule(**request)["RuleArn"])
    if spec.targets:
        answer = events.put_targets(
            Rule=name,
            EventBusName=bus_name,
            Targets=[
                {"Id": target.target_id, "Arn": resources.queues[target.queue].arn} for target in spec.targets
            ],
        )
        if answer.get("FailedEntryCount"):
            raise TemplateError(f"{where}: moto refused targets: {answer.get('FailedEntries')}")
    log.info("rule %s on event bus %s ready", name, bus_name)
    return EventRuleResource(
        spec.logical_id, name, arn, bus_name, tuple(target.queue for target in spec.targets)
    )
