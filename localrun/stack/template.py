"""A typed description of template.yaml: what the local runtime has to create and run.

`load_template()` reads the SAM template, applies parameter overrides, merges
`Globals.Function` into every `AWS::Serverless::Function` (maps merged key by key,
lists appended, scalars overridden, as SAM does) and describes:

* parameters and their effective values,
* DynamoDB tables (keys, indexes, stream), SQS queues (redrive policy) and log groups
  (their names are what the functions' `LoggingConfig` and role policies refer to),
* EventBridge buses and rules (event pattern, SQS queue targets) and SQS queue policies,
* functions (code location, handler, timeout, memory, environment) and their events:
  HttpApi routes, DynamoDB stream mappings, SQS mappings and schedules.

Values that depend on the local resources (table names, queue URLs, ARNs) stay as
intrinsic expressions here; `FunctionSpec.resolved_environment()` evaluates them once
the resources exist. Event sources are described by the logical ids they point at.
Anything the local runtime cannot emulate faithfully raises `TemplateError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localrun.errors import TemplateError
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.intrinsics import Resolver, intrinsic_name

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TEMPLATE = PROJECT_ROOT / "template.yaml"

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"

FUNCTION_TYPE = "AWS::Serverless::Function"
TABLE_TYPE = "AWS::DynamoDB::Table"
QUEUE_TYPE = "AWS::SQS::Queue"
HTTP_API_TYPE = "AWS::Serverless::HttpApi"
LAYER_TYPE = "AWS::Serverless::LayerVersion"
LOG_GROUP_TYPE = "AWS::Logs::LogGroup"
EVENT_BUS_TYPE = "AWS::Events::EventBus"
EVENT_RULE_TYPE = "AWS::Events::Rule"
QUEUE_POLICY_TYPE = "AWS::SQS::QueuePolicy"

# Resources that have no behaviour a local run needs (monitoring and its notifications,
# permissions: the roles and policies are read by localrun.stack.iam_policies for the least-privilege check).
IGNORED_RESOURCE_TYPES = frozenset(
    {
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::CompositeAlarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::Logs::MetricFilter",
        "AWS::IAM::Role",
        "AWS::IAM::Policy",
        "AWS::IAM::ManagedPolicy",
        "AWS::Lambda::Permission",
        "AWS::SNS::Topic",
        "AWS::SNS::Subscription",
        "AWS::SNS::TopicPolicy",
        # The alarm topic's key: nothing local publishes alarms or encrypts with it.
        "AWS::KMS::Key",
    }
)

_FUNCTION_IGNORED = frozenset(
    {
        "Description",
        "Policies",
        "Role",
        "Architectures",
        "Tracing",
        "Tags",
        "ReservedConcurrentExecutions",
        "ProvisionedConcurrencyConfig",
        "AutoPublishAlias",
        "DeploymentPreference",
        "LoggingConfig",
        "RuntimeManagementConfig",
        "KmsKeyArn",
        "PermissionsBoundary",
        "VpcConfig",
        "EphemeralStorage",
        "DeadLetterQueue",
        "EventInvokeConfig",
        "SnapStart",
        "PropagateTags",
    }
)
_FUNCTION_USED = frozenset(
    {
        "CodeUri",
        "Handler",
        "Runtime",
        "Timeout",
        "MemorySize",
        "Environment",
        "Layers",
        "Events",
        "FunctionName",
    }
)
_TABLE_IGNORED = frozenset(
    {
        "PointInTimeRecoverySpecification",
        "SSESpecification",
        "Tags",
        "DeletionProtectionEnabled",
        "ContributorInsightsSpecification",
        "TableClass",
        "ResourcePolicy",
        "WarmThroughput",
        "OnDemandThroughput",
    }
)
_TABLE_USED = frozenset(
    {
        "TableName",
        "AttributeDefinitions",
        "KeySchema",
        "GlobalSecondaryIndexes",
        "LocalSecondaryIndexes",
        "StreamSpecification",
        "BillingMode",
        "ProvisionedThroughput",
        "TimeToLiveSpecification",
    }
)
_QUEUE_IGNORED = frozenset(
    {"SqsManagedSseEnabled", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "Tags", "RedriveAllowPolicy"}
)
_QUEUE_USED = frozenset(
    {
        "QueueName",
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "DelaySeconds",
        "MaximumMessageSize",
        "ReceiveMessageWaitTimeSeconds",
        "RedrivePolicy",
        "FifoQueue",
        "ContentBasedDeduplication",
    }
)
_LOG_GROUP_IGNORED = frozenset(
    {"RetentionInDays", "KmsKeyId", "Tags", "DataProtectionPolicy", "LogGroupClass", "FieldIndexPolicies"}
)
_LOG_GROUP_USED = frozenset({"LogGroupName"})
_EVENT_BUS_USED = frozenset({"Name"})
_EVENT_BUS_IGNORED = frozenset({"Description", "Tags", "KmsKeyIdentifier", "DeadLetterConfig", "LogConfig"})
# No ScheduleExpression (schedules are functions' Schedule events here) and no RoleArn (targets in
# other accounts): both fail loudly.
_EVENT_RULE_USED = frozenset({"Name", "Description", "EventBusName", "EventPattern", "State", "Targets"})
_EVENT_RULE_IGNORED = frozenset({"Tags"})
# Delivery to a queue of this template is immediate locally: retries and a dead-letter queue for
# failed deliveries have nothing to act on. Input transformation and the rest are not emulated.
_EVENT_TARGET_USED = frozenset({"Id", "Arn"})
_EVENT_TARGET_IGNORED = frozenset({"RetryPolicy", "DeadLetterConfig"})
_HTTP_API_IGNORED = frozenset({"Tags", "Description", "FailOnWarnings", "AccessLogSettings"})
_HTTP_API_USED = frozenset({"StageName", "Auth", "DefaultRouteSettings", "RouteSettings"})
INTEGRATION_TIMEOUT_MS = 30_000  # HTTP APIs: the default and the maximum, 50 ms at least

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_RATE_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


# ---------------------------------------------------------------------------------------------
# The description
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    default: str | None
    allowed_values: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None
    allowed_pattern: str | None = None


@dataclass(frozen=True)
class TableSpec:
    logical_id: str
    table_name: str | None  # an explicit TableName; None = derived from the stack name
    attribute_definitions: tuple[dict[str, str], ...]
    key_schema: tuple[dict[str, str], ...]
    global_secondary_indexes: tuple[dict[str, Any], ...]
    local_secondary_indexes: tuple[dict[str, Any], ...]
    stream_view_type: str | None
    billing_mode: str
    provisioned_throughput: dict[str, int] | None
    ttl_attribute: str | None


@dataclass(frozen=True)
class QueueSpec:
    logical_id: str
    queue_name: str | None
    attributes: dict[str, str]  # SQS CreateQueue attributes, RedrivePolicy excluded
    dead_letter_queue: str | None  # logical id of the redrive target
    max_receive_count: int | None
    fifo: bool


@dataclass(frozen=True)
class LogGroupSpec:
    """A log group: locally only its name matters (functions log to stdout)."""

    logical_id: str
    log_group_name: str | None  # an explicit LogGroupName; None = derived from the stack name


@dataclass(frozen=True)
class Throttle:
    """A route's throttling target; None = not set here (the next level, finally the account, applies)."""

    burst_limit: int | None = None
    rate_limit: float | None = None

    def over(self, fallback: Throttle | None) -> Throttle:
        if fallback is None:
            return self
        return Throttle(
            self.burst_limit if self.burst_limit is not None else fallback.burst_limit,
            self.rate_limit if self.rate_limit is not None else fallback.rate_limit,
        )


@dataclass(frozen=True)
class HttpApiSpec:
    logical_id: str
    stage_name: str  # "$default" serves routes at the root
    auth: dict[str, Any] | None = None  # Auth, resolved; localrun.gateway.auth interprets it
    default_route_settings: Throttle | None = None
    route_settings: dict[str, Throttle] = field(default_factory=dict)  # by route key "GET /path"


@dataclass(frozen=True)
class HttpApiEvent:
    name: str
    method: str  # upper case, or "ANY"
    path: str | None  # "/accounts/{account_id}/limit"; None = the $default route
    api: str | None  # logical id of the AWS::Serverless::HttpApi (None = the implicit API)
    auth: dict[str, Any] | None = None  # the route's Auth (Authorizer, AuthorizationScopes), resolved
    timeout_ms: int = INTEGRATION_TIMEOUT_MS  # the integration's TimeoutInMillis
    route_settings: Throttle | None = None

    @property
    def route_key(self) -> str:
        return "$default" if self.path is None else f"{self.method} {self.path}"


@dataclass(frozen=True)
class DynamoDBStreamEvent:
    name: str
    table: str  # logical id of the table whose stream is read
    starting_position: str  # TRIM_HORIZON | LATEST
    batch_size: int
    maximum_batching_window_seconds: float
    maximum_retry_attempts: int  # -1 = until the record expires
    bisect_batch_on_function_error: bool
    parallelization_factor: int
    function_response_types: tuple[str, ...]
    on_failure_queue: str | None  # logical id of the OnFailure SQS destination
    enabled: bool

    @property
    def report_batch_item_failures(self) -> bool:
        return "ReportBatchItemFailures" in self.function_response_types


@dataclass(frozen=True)
class SqsEvent:
    name: str
    queue: str  # logical id
    batch_size: int
    maximum_batching_window_seconds: float
    function_response_types: tuple[str, ...]
    enabled: bool

    @property
    def report_batch_item_failures(self) -> bool:
        return "ReportBatchItemFailures" in self.function_response_types


@dataclass(frozen=True)
class ScheduleEvent:
    name: str
    expression: str
    interval_seconds: float
    enabled: bool
    input: str | None  # a constant JSON event instead of the Scheduled Event


EventSpec = HttpApiEvent | DynamoDBStreamEvent | SqsEvent | ScheduleEvent


@dataclass(frozen=True)
class EventBusSpec:
    logical_id: str
    name: str  # Name is required for AWS::Events::EventBus


@dataclass(frozen=True)
class EventTarget:
    target_id: str
    queue: str  # logical id of the SQS queue (the only kind of target emulated)


@dataclass(frozen=True)
class EventRuleSpec:
    """A rule on a bus. Its bus and pattern stay expressions until the buses exist (the bus may be
    one of the template's, or one named by a parameter)."""

    logical_id: str
    rule_name: str | None  # an explicit Name; None = derived from the stack name
    event_bus: Any  # EventBusName as written; None = the account's default bus
    event_pattern: Any  # EventPattern as written (a mapping, or its JSON text)
    description: str | None
    targets: tuple[EventTarget, ...]


@dataclass(frozen=True)
class QueuePolicySpec:
    """Recorded on the queues locally (their Policy attribute), not enforced: moto does not evaluate it."""

    logical_id: str
    queues: tuple[str, ...]  # logical ids, from `Queues: [!Ref <queue>]`
    policy_document: Any  # as written; resolved once the rules it may name exist


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    function_name: str | None  # an explicit FunctionName; None = derived from the stack name
    code_uri: Path
    handler: str  # "module.function"
    runtime: str
    timeout: int
    memory_size: int
    environment: dict[str, Any]  # variable -> value or intrinsic expression
    layers: tuple[Any, ...]
    events: tuple[EventSpec, ...]

    @property
    def handler_module(self) -> str:
        return self.handler.rsplit(".", 1)[0]

    @property
    def handler_function(self) -> str:
        return self.handler.rsplit(".", 1)[1]

    @property
    def handler_path(self) -> Path:
        return self.code_uri / (self.handler_module.replace(".", "/") + ".py")

    def events_of[T](self, kind: type[T]) -> list[T]:
        return [event for event in self.events if isinstance(event, kind)]

    def resolved_environment(self, resolver: Resolver) -> dict[str, str]:
        where = f"Resources.{self.logical_id}.Environment.Variables"
        return {
            name: resolver.resolve_str(value, f"{where}.{name}")
            for name, value in self.environment.items()
            if resolver.resolve(value, f"{where}.{name}") is not None
        }


@dataclass(frozen=True)
class Template:
    path: Path
    stack_name: str
    parameters: dict[str, Parameter]
    parameter_values: dict[str, str]
    tables: dict[str, TableSpec]
    queues: dict[str, QueueSpec]
    http_apis: dict[str, HttpApiSpec]
    functions: dict[str, FunctionSpec]
    layers: tuple[str, ...]
    resolver: Resolver = field(repr=False)
    log_groups: dict[str, LogGroupSpec] = field(default_factory=dict)
    event_buses: dict[str, EventBusSpec] = field(default_factory=dict)
    event_rules: dict[str, EventRuleSpec] = field(default_factory=dict)
    queue_policies: dict[str, QueuePolicySpec] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.path.parent


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def load_template(
    path: Path | None = None,
    *,
    stack_name: str = "hybrid-counter-local",
    parameter_overrides: Mapping[str, str] | None = None,
) -> Template:
    """Read and describe a SAM template (default: the project's template.yaml)."""
    template_path = (path or DEFAULT_TEMPLATE).resolve()
    if not template_path.is_file():
        raise TemplateError(f"template not found: {template_path}")
    document = load_yaml(template_path)
    transform = document.get("Transform")
    transforms = transform if isinstance(transform, list) else [transform]
    if "AWS::Serverless-2016-10-31" not in transforms:
        raise TemplateError(f"{template_path}: expected Transform AWS::Serverless-2016-10-31")

    parameters = _parameters(document.get("Parameters") or {})
    values = _parameter_values(parameters, parameter_overrides or {})
    resources_raw: dict[str, Any] = document.get("Resources") or {}
    resolver = Resolver(
        parameters=values,
        pseudo_parameters={
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{stack_name}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        },
        conditions=document.get("Conditions") or {},
        mappings=document.get("Mappings") or {},
        known_resource_ids=frozenset(resources_raw),
    )
    globals_function = ((document.get("Globals") or {}).get("Function")) or {}
    if not isinstance(globals_function, dict):
        raise TemplateError("Globals.Function must be a mapping")

    described: dict[str, dict[str, Any]] = {kind: {} for kind in _DESCRIBERS}
    functions: dict[str, FunctionSpec] = {}
    layers: list[str] = []
    for logical_id, resource in resources_raw.items():
        kind = _resource_type(logical_id, resource, resolver)
        if kind is None:  # its Condition is false
            continue
        props: dict[str, Any] = resource.get("Properties") or {}
        where = f"Resources.{logical_id}"
        if kind in _DESCRIBERS:
            described[kind][logical_id] = _DESCRIBERS[kind](logical_id, props, resolver, where)
        elif kind == FUNCTION_TYPE:
            merged = _merge_globals(globals_function, props)
            functions[logical_id] = _function(logical_id, merged, resolver, template_path.parent, where)
        elif kind == LAYER_TYPE:
            layers.append(logical_id)
        elif kind not in IGNORED_RESOURCE_TYPES:
            raise TemplateError(f"{where}: resource type {kind} is not supported by the local runtime")

    template = Template(
        path=template_path,
        stack_name=stack_name,
        parameters=parameters,
        parameter_values=values,
        tables=described[TABLE_TYPE],
        queues=described[QUEUE_TYPE],
        http_apis=described[HTTP_API_TYPE],
        functions=functions,
        layers=tuple(layers),
        resolver=resolver,
        log_groups=described[LOG_GROUP_TYPE],
        event_buses=described[EVENT_BUS_TYPE],
        event_rules=described[EVENT_RULE_TYPE],
        queue_policies=described[QUEUE_POLICY_TYPE],
    )
    _check_references(template)
    return template


def _resource_type(logical_id: str, resource: Any, resolver: Resolver) -> str | None:
    """The resource's Type, or None when its Condition leaves it out of the stack."""
    if not isinstance(resource, dict) or "Type" not in resource:
        raise TemplateError(f"Resources.{logical_id}: a resource needs a Type")
    condition = resource.get("Condition")
    if condition is not None and not resolver.condition(str(condition), f"Resources.{logical_id}"):
        return None
    return str(resource["Type"])


def _parameters(raw: Mapping[str, Any]) -> dict[str, Parameter]:
    parameters: dict[str, Parameter] = {}
    for name, spec in raw.items():
        default = spec.get("Default")
        allowed = spec.get("AllowedValues")
        parameters[name] = Parameter(
            name=name,
            type=str(spec.get("Type", "String")),
            default=None if default is None else _scalar_str(default),
            allowed_values=None if allowed is None else tuple(_scalar_str(item) for item in allowed),
            min_value=None if spec.get("MinValue") is None else float(spec["MinValue"]),
            max_value=None if spec.get("MaxValue") is None else float(spec["MaxValue"]),
            allowed_pattern=spec.get("AllowedPattern"),
        )
    return parameters


def _parameter_values(parameters: Mapping[str, Parameter], overrides: Mapping[str, str]) -> dict[str, str]:
    unknown = sorted(set(overrides) - set(parameters))
    if unknown:
        raise TemplateError(
            f"unknown parameter(s) {', '.join(unknown)}; the template has {', '.join(parameters)}"
        )
    values: dict[str, str] = {}
    for name, parameter in parameters.items():
        value = overrides.get(name, parameter.default)
        if value is None:
            raise TemplateError(f"parameter {name} has no default; pass it as an override")
        value = str(value)
        if parameter.allowed_values is not None and value not in parameter.allowed_values:
            raise TemplateError(f"parameter {name}={value!r} is not one of {list(parameter.allowed_values)}")
        if parameter.type == "Number":
            try:
                number = float(value)
            except ValueError as error:
                raise TemplateError(f"parameter {name}={value!r} is not a number") from error
            if parameter.min_value is not None and number < parameter.min_value:
                raise TemplateError(f"parameter {name}={value} is below its MinValue {parameter.min_value:g}")
            if parameter.max_value is not None and number > parameter.max_value:
                raise TemplateError(f"parameter {name}={value} is above its MaxValue {parameter.max_value:g}")
        if parameter.allowed_pattern is not None and not re.fullmatch(parameter.allowed_pattern, value):
            raise TemplateError(f"parameter {name}={value!r} does not match {parameter.allowed_pattern}")
        values[name] = value
    return values


def _merge_globals(globals_function: Mapping[str, Any], props: Mapping[str, Any]) -> dict[str, Any]:
    """SAM's Globals rule: maps merge (the function wins per key), lists append, scalars override."""

    def merge(base: Any, own: Any) -> Any:
        if intrinsic_name(base) or intrinsic_name(own):
            return own
        if isinstance(base, dict) and isinstance(own, dict):
            out = dict(base)
            for key, value in own.items():
                out[key] = merge(base[key], value) if key in base else value
            return out
        if isinstance(base, list) and isinstance(own, list):
            return [*base, *own]
        return own

    merged: dict[str, Any] = dict(globals_function)
    for key, value in props.items():
        merged[key] = merge(globals_function[key], value) if key in globals_function else value
    return merged


def _check_keys(where: str, props: Mapping[str, Any], used: frozenset[str], ignored: frozenset[str]) -> None:
    unknown = sorted(set(props) - used - ignored)
    if unknown:
        raise TemplateError(
            f"{where}: the local runtime does not support {', '.join(unknown)} "
            "(teach localrun/stack/template.py about it, or leave it out)"
        )


# -- tables and queues ------------------------------------------------------------------------


def _table(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> TableSpec:
    _check_keys(where, props, _TABLE_USED, _TABLE_IGNORED)
    values = resolver.resolve(props, where)
    stream = values.get("StreamSpecification")
    ttl = values.get("TimeToLiveSpecification") or {}
    if not values.get("KeySchema"):
        raise TemplateError(f"{where}: KeySchema is required")
    return TableSpec(
        logical_id=logical_id,
        table_name=values.get("TableName"),
        attribute_definitions=tuple(_str_dict(item) for item in values.get("AttributeDefinitions", [])),
        key_schema=tuple(_str_dict(item) for item in values["KeySchema"]),
        global_secondary_indexes=tuple(values.get("GlobalSecondaryIndexes", [])),
        local_secondary_indexes=tuple(values.get("LocalSecondaryIndexes", [])),
        stream_view_type=None if not stream else str(stream["StreamViewType"]),
        billing_mode=str(values.get("BillingMode", "PROVISIONED")),
        provisioned_throughput=values.get("ProvisionedThroughput"),
        ttl_attribute=ttl.get("AttributeName") if _is_true(ttl.get("Enabled", False)) else None,
    )


def _queue(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> QueueSpec:
    _check_keys(where, props, _QUEUE_USED, _QUEUE_IGNORED)
    plain = {key: value for key, value in props.items() if key != "RedrivePolicy"}
    values = resolver.resolve(plain, where)
    attributes = {
        key: _scalar_str(values[key])
        for key in (
            "VisibilityTimeout",
            "MessageRetentionPeriod",
            "DelaySeconds",
            "MaximumMessageSize",
            "ReceiveMessageWaitTimeSeconds",
            "FifoQueue",
            "ContentBasedDeduplication",
        )
        if key in values
    }
    dead_letter_queue = None
    max_receive_count = None
    redrive = props.get("RedrivePolicy")
    if redrive is not None:
        if not isinstance(redrive, dict):
            raise TemplateError(f"{where}.RedrivePolicy must be a mapping")
        dead_letter_queue = _arn_target(
            redrive.get("deadLetterTargetArn"), QUEUE_TYPE, f"{where}.RedrivePolicy"
        )
        max_receive_count = int(resolver.resolve(redrive.get("maxReceiveCount"), f"{where}.RedrivePolicy"))
    return QueueSpec(
        logical_id=logical_id,
        queue_name=values.get("QueueName"),
        attributes=attributes,
        dead_letter_queue=dead_letter_queue,
        max_receive_count=max_receive_count,
        fifo=_is_true(values.get("FifoQueue", False)),
    )


def _http_api(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> HttpApiSpec:
    _check_keys(where, props, _HTTP_API_USED, _HTTP_API_IGNORED)
    stage = resolver.resolve(props.get("StageName", "$default"), where)
    per_route = resolver.resolve(props.get("RouteSettings") or {}, f"{where}.RouteSettings")
    if not isinstance(per_route, dict):
        raise TemplateError(f"{where}.RouteSettings must map route keys to settings")
    auth = resolver.resolve(props.get("Auth"), f"{where}.Auth")
    return HttpApiSpec(
        logical_id=logical_id,
        stage_name=str(stage),
        auth=auth or None,
        default_route_settings=_throttle(
            props.get("DefaultRouteSettings"), resolver, f"{where}.DefaultRouteSettings"
        ),
        route_settings={
            str(key): throttle
            for key, value in per_route.items()
            if (throttle := _throttle(value, resolver, f"{where}.RouteSettings.{key}")) is not None
        },
    )


def _throttle(value: Any, resolver: Resolver, where: str) -> Throttle | None:
    """ThrottlingBurstLimit/ThrottlingRateLimit of a RouteSettings object (logging and metrics keys are ignored)."""
    settings = resolver.resolve(value, where) if value is not None else None
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise TemplateError(f"{where} must be a RouteSettings object")
    burst, rate = settings.get("ThrottlingBurstLimit"), settings.get("ThrottlingRateLimit")
    if burst is None and rate is None:
        return None
    throttle = Throttle(None if burst is None else int(burst), None if rate is None else float(rate))
    if (throttle.burst_limit or 0) < 0 or (throttle.rate_limit or 0) < 0:
        raise TemplateError(f"{where}: throttling limits cannot be negative")
    return throttle


def _log_group(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> LogGroupSpec:
    _check_keys(where, props, _LOG_GROUP_USED, _LOG_GROUP_IGNORED)
    name = resolver.resolve(props.get("LogGroupName"), f"{where}.LogGroupName")
    return LogGroupSpec(logical_id, None if name is None else str(name))


# -- EventBridge buses and rules, queue policies -----------------------------------------------


def _event_bus(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> EventBusSpec:
    _check_keys(where, props, _EVENT_BUS_USED, _EVENT_BUS_IGNORED)
    if "Name" not in props:
        raise TemplateError(f"{where}: an event bus needs a Name")
    return EventBusSpec(logical_id, resolver.resolve_str(props["Name"], f"{where}.Name"))


def _event_rule(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> EventRuleSpec:
    _check_keys(where, props, _EVENT_RULE_USED, _EVENT_RULE_IGNORED)
    if props.get("EventPattern") is None:
        raise TemplateError(f"{where}: only rules with an EventPattern run locally")
    state = resolver.resolve(props.get("State", "ENABLED"), f"{where}.State")
    if state != "ENABLED":
        # moto's PutEvents delivers to a rule's targets whatever its state: a disabled rule
        # would deliver locally and not on AWS.
        raise TemplateError(f"{where}: State {state!r} is not emulated locally (only ENABLED)")
    targets = []
    for index, target in enumerate(props.get("Targets") or []):
        here = f"{where}.Targets[{index}]"
        if not isinstance(target, dict):
            raise TemplateError(f"{here} must be a mapping")
        _check_keys(here, target, _EVENT_TARGET_USED, _EVENT_TARGET_IGNORED)
        targets.append(
            EventTarget(
                target_id=resolver.resolve_str(target.get("Id"), f"{here}.Id"),
                queue=_arn_target(target.get("Arn"), QUEUE_TYPE, f"{here}.Arn"),
            )
        )
    name = resolver.resolve(props.get("Name"), f"{where}.Name")
    description = resolver.resolve(props.get("Description"), f"{where}.Description")
    return EventRuleSpec(
        logical_id=logical_id,
        rule_name=None if name is None else str(name),
        event_bus=props.get("EventBusName"),
        event_pattern=props["EventPattern"],
        description=None if description is None else str(description),
        targets=tuple(targets),
    )


def _queue_policy(logical_id: str, props: dict[str, Any], resolver: Resolver, where: str) -> QueuePolicySpec:
    del resolver  # resolved at provisioning: the document may name resources (a rule's ARN)
    _check_keys(where, props, frozenset({"Queues", "PolicyDocument"}), frozenset())
    queues = []
    for index, queue in enumerate(props.get("Queues") or []):
        if intrinsic_name(queue) != "Ref" or not isinstance(queue["Ref"], str):
            raise TemplateError(
                f"{where}.Queues[{index}] must be !Ref <AWS::SQS::Queue logical id> to run locally"
            )
        queues.append(queue["Ref"])
    if not queues or props.get("PolicyDocument") is None:
        raise TemplateError(f"{where}: a queue policy needs Queues and a PolicyDocument")
    return QueuePolicySpec(logical_id, tuple(queues), props["PolicyDocument"])


# -- functions and events ---------------------------------------------------------------------


def _function(
    logical_id: str, props: dict[str, Any], resolver: Resolver, root: Path, where: str
) -> FunctionSpec:
    _check_keys(where, props, _FUNCTION_USED, _FUNCTION_IGNORED)
    if props.get("PackageType", "Zip") != "Zip" or "InlineCode" in props:
        raise TemplateError(f"{where}: only Zip functions with a CodeUri run locally")
    runtime = str(resolver.resolve(props.get("Runtime", ""), f"{where}.Runtime"))
    if not runtime.startswith("python3"):
        raise TemplateError(f"{where}: Runtime {runtime!r} cannot run in the local (Python) runtime")
    code_uri = resolver.resolve(props.get("CodeUri"), f"{where}.CodeUri")
    handler = resolver.resolve(props.get("Handler"), f"{where}.Handler")
    if not isinstance(code_uri, str) or not isinstance(handler, str) or "." not in handler:
        raise TemplateError(f"{where}: needs a local CodeUri directory and a Handler 'module.function'")
    environment = (props.get("Environment") or {}).get("Variables") or {}
    events_raw: dict[str, Any] = props.get("Events") or {}
    events = tuple(
        _event(name, spec, resolver, f"{where}.Events.{name}") for name, spec in events_raw.items()
    )
    return FunctionSpec(
        logical_id=logical_id,
        function_name=resolver.resolve(props.get("FunctionName"), f"{where}.FunctionName"),
        code_uri=(root / code_uri).resolve(),
        handler=handler,
        runtime=runtime,
        timeout=int(resolver.resolve(props.get("Timeout", 3), f"{where}.Timeout")),
        memory_size=int(resolver.resolve(props.get("MemorySize", 128), f"{where}.MemorySize")),
        environment=dict(environment),
        layers=tuple(props.get("Layers") or ()),
        events=events,
    )


def _event(name: str, spec: Any, resolver: Resolver, where: str) -> EventSpec:
    if not isinstance(spec, dict):
        raise TemplateError(f"{where}: an event needs Type and Properties")
    kind = spec.get("Type")
    props: dict[str, Any] = spec.get("Properties") or {}
    if kind == "HttpApi":
        return _http_api_event(name, props, resolver, where)
    if kind == "DynamoDB":
        return _dynamodb_event(name, props, resolver, where)
    if kind == "SQS":
        return _sqs_event(name, props, resolver, where)
    if kind == "Schedule":
        return _schedule_event(name, props, resolver, where)
    raise TemplateError(f"{where}: event type {kind!r} is not supported by the local runtime")


def _http_api_event(name: str, props: dict[str, Any], resolver: Resolver, where: str) -> HttpApiEvent:
    _check_keys(
        where,
        props,
        frozenset(
            {"ApiId", "Method", "Path", "PayloadFormatVersion", "Auth", "TimeoutInMillis", "RouteSettings"}
        ),
        frozenset(),
    )
    version = str(resolver.resolve(props.get("PayloadFormatVersion", "2.0"), where))
    if version != "2.0":
        raise TemplateError(f"{where}: only PayloadFormatVersion 2.0 is emulated locally")
    api_id = props.get("ApiId")
    api = None
    if api_id is not None:
        if intrinsic_name(api_id) != "Ref":
            raise TemplateError(f"{where}.ApiId must be !Ref to an AWS::Serverless::HttpApi")
        api = str(api_id["Ref"])
    path = props.get("Path")
    method = str(resolver.resolve(props.get("Method", "ANY"), where)).upper()
    if path is not None:
        path = str(resolver.resolve(path, where))
        if not path.startswith("/"):
            raise TemplateError(f"{where}.Path must start with '/'")
    timeout = resolver.resolve(
        props.get("TimeoutInMillis", INTEGRATION_TIMEOUT_MS), f"{where}.TimeoutInMillis"
    )
    return HttpApiEvent(
        name=name,
        method="ANY" if method in {"ANY", "X-AMAZON-APIGATEWAY-ANY-METHOD"} else method,
        path=path,
        api=api,
        auth=resolver.resolve(props.get("Auth"), f"{where}.Auth") or None,
        timeout_ms=_bounded_int(timeout, 50, INTEGRATION_TIMEOUT_MS, f"{where}.TimeoutInMillis"),
        route_settings=_throttle(props.get("RouteSettings"), resolver, f"{where}.RouteSettings"),
    )


def _dynamodb_event(name: str, props: dict[str, Any], resolver: Resolver, where: str) -> DynamoDBStreamEvent:
    _check_keys(
        where,
        props,
        frozenset(
            {
                "Stream",
                "StartingPosition",
                "BatchSize",
                "MaximumBatchingWindowInSeconds",
                "MaximumRetryAttempts",
                "BisectBatchOnFunctionError",
                "ParallelizationFactor",
                "FunctionResponseTypes",
                "DestinationConfig",
                "Enabled",
                "MaximumRecordAgeInSeconds",
            }
        ),
        frozenset({"KmsKeyArn", "MetricsConfig"}),
    )
    table = _arn_target(props.get("Stream"), TABLE_TYPE, f"{where}.Stream", attribute="StreamArn")
    values = resolver.resolve(
        {key: value for key, value in props.items() if key not in {"Stream", "DestinationConfig"}}, where
    )
    starting = str(values.get("StartingPosition", ""))
    if starting not in {"TRIM_HORIZON", "LATEST"}:
        raise TemplateError(f"{where}.StartingPosition must be TRIM_HORIZON or LATEST, not {starting!r}")
    factor = int(values.get("ParallelizationFactor", 1))
    if factor != 1:
        raise TemplateError(f"{where}: ParallelizationFactor {factor} is not emulated locally (only 1)")
    if int(values.get("MaximumRecordAgeInSeconds", -1)) != -1:
        raise TemplateError(f"{where}: MaximumRecordAgeInSeconds is not emulated locally (leave it at -1)")
    retries = int(values.get("MaximumRetryAttempts", -1))
    if retries < -1:
        raise TemplateError(f"{where}.MaximumRetryAttempts must be >= -1")
    on_failure = None
    on_failure_config = (props.get("DestinationConfig") or {}).get("OnFailure") or {}
    if on_failure_config.get("Type", "SQS") != "SQS":
        raise TemplateError(f"{where}: only SQS on-failure destinations are emulated locally")
    destination = on_failure_config.get("Destination")
    if destination is not None:
        on_failure = _arn_target(destination, QUEUE_TYPE, f"{where}.DestinationConfig.OnFailure.Destination")
    return DynamoDBStreamEvent(
        name=name,
        table=table,
        starting_position=starting,
        batch_size=_bounded_int(values.get("BatchSize", 100), 1, 10_000, f"{where}.BatchSize"),
        maximum_batching_window_seconds=float(values.get("MaximumBatchingWindowInSeconds", 0)),
        maximum_retry_attempts=retries,
        bisect_batch_on_function_error=_is_true(values.get("BisectBatchOnFunctionError", False)),
        parallelization_factor=factor,
        function_response_types=_response_types(values.get("FunctionResponseTypes"), where),
        on_failure_queue=on_failure,
        enabled=_is_true(values.get("Enabled", True)),
    )


def _sqs_event(name: str, props: dict[str, Any], resolver: Resolver, where: str) -> SqsEvent:
    _check_keys(
        where,
        props,
        frozenset(
            {"Queue", "BatchSize", "MaximumBatchingWindowInSeconds", "FunctionResponseTypes", "Enabled"}
        ),
        frozenset({"ScalingConfig", "KmsKeyArn", "MetricsConfig"}),
    )
    queue = _arn_target(props.get("Queue"), QUEUE_TYPE, f"{where}.Queue")
    values = resolver.resolve({key: value for key, value in props.items() if key != "Queue"}, where)
    window = float(values.get("MaximumBatchingWindowInSeconds", 0))
    batch_size = _bounded_int(values.get("BatchSize", 10), 1, 10_000, f"{where}.BatchSize")
    if batch_size > 10 and window <= 0:
        raise TemplateError(f"{where}: a BatchSize above 10 needs MaximumBatchingWindowInSeconds (as on AWS)")
    return SqsEvent(
        name=name,
        queue=queue,
        batch_size=batch_size,
        maximum_batching_window_seconds=window,
        function_response_types=_response_types(values.get("FunctionResponseTypes"), where),
        enabled=_is_true(values.get("Enabled", True)),
    )


def _schedule_event(name: str, props: dict[str, Any], resolver: Resolver, where: str) -> ScheduleEvent:
    _check_keys(
        where,
        props,
        frozenset({"Schedule", "Enabled", "State", "Input"}),
        frozenset({"Name", "Description", "RetryPolicy", "DeadLetterConfig"}),
    )
    values = resolver.resolve(props, where)
    expression = str(values.get("Schedule", ""))
    return ScheduleEvent(
        name=name,
        expression=expression,
        interval_seconds=rate_seconds(expression, where),
        enabled=_is_true(values.get("Enabled", True)) and values.get("State", "ENABLED") == "ENABLED",
        input=values.get("Input"),
    )


# How each kind of resource (other than functions and layers) is described.
_DESCRIBERS: dict[str, Callable[[str, dict[str, Any], Resolver, str], Any]] = {
    TABLE_TYPE: _table,
    QUEUE_TYPE: _queue,
    HTTP_API_TYPE: _http_api,
    LOG_GROUP_TYPE: _log_group,
    EVENT_BUS_TYPE: _event_bus,
    EVENT_RULE_TYPE: _event_rule,
    QUEUE_POLICY_TYPE: _queue_policy,
}


def rate_seconds(expression: str, where: str = "Schedule") -> float:
    """Seconds between runs of an EventBridge `rate(...)` expression."""
    match = _RATE.match(expression.strip())
    if match is None:
        raise TemplateError(f"{where}: only rate(...) schedules run locally, not {expression!r}")
    amount, unit = int(match.group(1)), match.group(2).rstrip("s")
    if amount <= 0 or (amount == 1) != (match.group(2) == unit):
        raise TemplateError(f"{where}: {expression!r} is not a valid rate (rate(1 minute), rate(5 minutes))")
    return float(amount * _RATE_UNIT_SECONDS[unit])


# -- helpers ----------------------------------------------------------------------------------


def _arn_target(value: Any, resource_type: str, where: str, attribute: str = "Arn") -> str:
    """The logical id behind `!GetAtt X.<attribute>`; other forms cannot be wired locally."""
    if intrinsic_name(value) == "Fn::GetAtt":
        target = value["Fn::GetAtt"]
        if isinstance(target, list) and len(target) == 2 and target[1] == attribute:
            return str(target[0])
    raise TemplateError(
        f"{where}: must be !GetAtt <{resource_type} logical id>.{attribute} to run locally, not {value!r}"
    )


def _check_references(template: Template) -> None:
    for function in template.functions.values():
        for event in function.events:
            where = f"Resources.{function.logical_id}.Events.{event.name}"
            if isinstance(event, DynamoDBStreamEvent):
                table = template.tables.get(event.table)
                if table is None:
                    raise TemplateError(f"{where}: {event.table} is not a DynamoDB table of this template")
                if table.stream_view_type is None:
                    raise TemplateError(f"{where}: table {event.table} has no StreamSpecification")
                if event.on_failure_queue is not None and event.on_failure_queue not in template.queues:
                    raise TemplateError(
                        f"{where}: on-failure destination {event.on_failure_queue} is not a queue"
                    )
            elif isinstance(event, SqsEvent) and event.queue not in template.queues:
                raise TemplateError(f"{where}: {event.queue} is not an SQS queue of this template")
            elif (
                isinstance(event, HttpApiEvent)
                and event.api is not None
                and event.api not in template.http_apis
            ):
                raise TemplateError(f"{where}: ApiId {event.api} is not an AWS::Serverless::HttpApi")
    _check_queue_references(template)


def _check_queue_references(template: Template) -> None:
    """Rule targets, queue policies and redrive policies name queues of this template."""
    for rule in template.event_rules.values():
        for target in rule.targets:
            if target.queue not in template.queues:
                raise TemplateError(
                    f"Resources.{rule.logical_id}: target {target.target_id} is not an SQS queue of this template "
                    "(the only kind of rule target emulated locally)"
                )
    for policy in template.queue_policies.values():
        for queue_id in policy.queues:
            if queue_id not in template.queues:
                raise TemplateError(
                    f"Resources.{policy.logical_id}: {queue_id} is not an SQS queue of this template"
                )
    for queue in template.queues.values():
        if queue.dead_letter_queue is not None and queue.dead_letter_queue not in template.queues:
            raise TemplateError(
                f"Resources.{queue.logical_id}: dead-letter target is not a queue of this template"
            )


def _response_types(value: Any, where: str) -> tuple[str, ...]:
    types = tuple(str(item) for item in (value or ()))
    unknown = [item for item in types if item != "ReportBatchItemFailures"]
    if unknown:
        raise TemplateError(f"{where}.FunctionResponseTypes: unknown value(s) {unknown}")
    return types


def _bounded_int(value: Any, low: int, high: int, where: str) -> int:
    number = int(value)
    if not low <= number <= high:
        raise TemplateError(f"{where} must be between {low} and {high}, not {number}")
    return number


def _is_true(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


def _scalar_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _str_dict(value: Any) -> dict[str, str]:
    return {str(key): str(item) for key, item in dict(value).items()}
