"""Create the template's tables and queues on the local endpoints ("deploy" the stack locally).

Physical names are `<stack name>-<logical id>` unless the template names the resource
itself (log groups only get a name: functions log to stdout locally). The result,
`LocalResources`, holds every emulated resource's `Ref` value and attributes, which is what
intrinsic functions resolve against. Provisioning an existing stack again reuses its tables
and queues (like updating a deployed stack).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from localrun.errors import TemplateError
from localrun.intrinsics import ResourceValues
from localrun.template import ACCOUNT_ID, REGION, QueueSpec, TableSpec, Template

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

log = logging.getLogger("localrun.provision")

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
        return values


def physical_name(stack_name: str, logical_id: str) -> str:
    return f"{stack_name}-{logical_id}"


def function_identity(stack_name: str, logical_id: str, explicit_name: str | None) -> FunctionIdentity:
    name = explicit_name or physical_name(stack_name, logical_id)[:_MAX_FUNCTION_NAME]
    return FunctionIdentity(logical_id, name, f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}")


def http_api_id(stack_name: str, logical_id: str) -> str:
    """A stable 10-character id shaped like API Gateway's."""
    return hashlib.sha256(f"{stack_name}/{logical_id}".encode()).hexdigest()[:10]


def provision(template: Template, dynamodb: DynamoDBClient, sqs: SQSClient) -> LocalResources:
    """Create (or reuse) every table and queue of the template; describe all local resources."""
    stack = template.stack_name
    tables = {spec.logical_id: _ensure_table(spec, stack, dynamodb) for spec in template.tables.values()}
    queues: dict[str, QueueResource] = {}
    for spec in _queues_in_dependency_order(template):
        queues[spec.logical_id] = _ensure_queue(spec, stack, sqs, queues)
    functions = {
        spec.logical_id: function_identity(stack, spec.logical_id, spec.function_name)
        for spec in template.functions.values()
    }
    return LocalResources(
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
