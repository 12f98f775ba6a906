"""`LocalRuntime`: the SAM app of template.yaml running in this process against local endpoints.

    with LocalRuntime(RuntimeOptions(port=0)) as runtime:
        requests.put(f"{runtime.api_url}/accounts/a1/limit", json={"limit": 5})
        runtime.wait_until_idle(timeout=30)

`start()` starts DynamoDB Local and moto (unless `endpoints` are given), creates the
template's tables, queues, event buses and rules, gives each function its own environment variables, starts
the HTTP gateway, the stream and queue pollers and the schedules, and warms the HTTP
functions' execution environments. `stop()` undoes all of it; `os.environ` is never touched
(tests and tools use `function_environment()` and `client_environment()`).

`RuntimeOptions(built=True)` runs the `sam build` output instead of the source tree
(`localrun.functions.built`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from localrun.errors import LocalRunError, TemplateError
from localrun.functions.built import (
    BUILD_DIR,
    built_launch,
    built_template,
    clean_interpreter,
    layer_directories,
)
from localrun.functions.call_recorder import ENVIRONMENT_VARIABLE as CALL_LOG_VARIABLE
from localrun.functions.call_recorder import attach as record_calls
from localrun.functions.environment import (
    client_variables,
    function_environment,
    lambda_variables,
    local_variables,
)
from localrun.functions.invoke import FunctionInvoker, Wrapper
from localrun.functions.launch import Launch, source_launch
from localrun.gateway.auth import GatewayAuth
from localrun.gateway.authorization import CONSOLE_CLIENT_ID, CONSOLE_ISSUER_VARIABLE
from localrun.gateway.limits import HttpLimits, RouteLimit, route_limit
from localrun.gateway.oidc_issuer import LocalIssuer
from localrun.gateway.routes import Route, RouteTable
from localrun.gateway.server import HttpGateway
from localrun.gateway.sigv4_authorizer import LOCAL_CALLER
from localrun.gateway.token_cli import (
    DEFAULT_ACCOUNT_CLAIM,
    DEFAULT_OPERATOR_SCOPE,
    DEFAULT_ORG_CLAIM,
)
from localrun.sources.scheduler import ScheduledJob, Scheduler
from localrun.sources.sqs_poller import QueueMapping, SqsPoller
from localrun.sources.stream_batches import RetryPolicy
from localrun.sources.stream_poller import StreamMapping, StreamPoller
from localrun.stack.aws_clients import dynamodb_client, events_client, sqs_client, streams_client
from localrun.stack.endpoints import LocalEndpoints
from localrun.stack.provision import LocalResources, provision
from localrun.stack.template import (
    REGION,
    DynamoDBStreamEvent,
    FunctionSpec,
    HttpApiEvent,
    ScheduleEvent,
    SqsEvent,
    Template,
    load_template,
)

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("localrun")


@dataclass
class RuntimeOptions:
    port: int = 3000  # HTTP gateway port on 127.0.0.1; 0 = a free port
    stack_name: str = "hybrid-counter-local"
    parameter_overrides: dict[str, str] = field(default_factory=dict)
    start_stream_pollers: bool = True
    start_queue_pollers: bool = True
    start_schedules: bool = True
    failure_visibility_seconds: float = 1.0  # SQS: how soon a failed message is received again
    retry_backoff_seconds: float = 0.2  # stream: first pause before a retry (doubles per failure)
    endpoints: LocalEndpoints | None = None  # running endpoints to use (not stopped by stop())
    # Beyond the basics:
    template_path: Path | None = None  # default: the project's template.yaml
    start_http: bool = True
    max_retry_backoff_seconds: float = 2.0
    schedule_interval_seconds: float | None = None  # override every Schedule's rate
    stream_batching_window_seconds: float | None = None  # override MaximumBatchingWindowInSeconds
    stream_poll_interval_seconds: float = 0.1
    enforce_timeouts: bool = True  # a run longer than the function's Timeout is stopped and fails
    max_environments: int = 10  # per function: concurrent invocations beyond it wait for one
    # Environments of each HTTP API function started at start (None = max_environments; none
    # without start_http), so a first burst of requests does not wait for imports.
    warm_http_environments: int | None = None
    extra_environment: dict[str, str] = field(default_factory=dict)  # e.g. POWERTOOLS_METRICS_DISABLED
    issuer_port: int = 0  # the local OIDC issuer (JWT authorizers without an issuer); 0 = a free port
    record_calls_to: Path | None = (
        None  # record each function's AWS calls here (localrun.functions.call_recorder)
    )
    built: bool = False  # run the `sam build` output on a clean python3.12 (localrun.functions.built)
    build_dir: Path = BUILD_DIR
    python: Path | None = None  # built mode's interpreter (default: this virtualenv's base python3.12)

    @classmethod
    def driven(cls, stack_name: str, **overrides: Any) -> RuntimeOptions:
        """Tables, queues and functions, and nothing that runs by itself (no gateway, pollers,
        schedules or warm environments): the caller drives the domain and the stream."""
        options: dict[str, Any] = {
            "port": 0,
            "stack_name": stack_name,
            "start_http": False,
            "start_stream_pollers": False,
            "start_queue_pollers": False,
            "start_schedules": False,
            "warm_http_environments": 0,
        }
        return cls(**(options | overrides))


class LocalRuntime:
    def __init__(self, options: RuntimeOptions | None = None) -> None:
        self.options = options or RuntimeOptions()
        self._template: Template | None = None
        self._resources: LocalResources | None = None
        self._endpoints: LocalEndpoints | None = None
        self._owns_endpoints = False
        self._invokers: dict[str, FunctionInvoker] = {}
        self._gateway: HttpGateway | None = None
        self._gateway_auth: GatewayAuth | None = None
        self._issuer: LocalIssuer | None = None
        self._http_limits: HttpLimits | None = None
        self._stream_pollers: list[StreamPoller] = []
        self._queue_pollers: list[SqsPoller] = []
        self._scheduler: Scheduler | None = None
        self._started = False

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._started:
            return self
        self._started = True
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        options = self.options
        template_path = options.template_path
        if options.built and template_path is None:
            template_path = built_template(options.build_dir)
        template = load_template(
            template_path,
            stack_name=options.stack_name,
            parameter_overrides=options.parameter_overrides,
        )
        self._template = template
        if options.endpoints is not None:
            if not options.endpoints.running:
                raise LocalRunError("RuntimeOptions.endpoints must be started")
            self._endpoints = options.endpoints
        else:
            self._endpoints = LocalEndpoints().start()
            self._owns_endpoints = True
        endpoints = self._endpoints
        resources = provision(
            template,
            dynamodb_client(endpoints.dynamodb_url),
            sqs_client(endpoints.sqs_url),
            events_client(endpoints.events_url),
        )
        self._resources = resources
        resolver = template.resolver.with_resources(resources.values())

        launches = self._launches(template)
        local = local_variables(endpoints.dynamodb_url, endpoints.sqs_url, endpoints.events_url)
        self._invokers = {}
        for logical_id, spec in template.functions.items():
            identity = resources.functions[logical_id]
            launch = launches[logical_id]
            lambda_defined = lambda_variables(
                function_name=identity.name,
                memory_size=spec.memory_size,
                handler=spec.handler,
                task_root=launch.code_dir,
                interpreter=launch.interpreter,
            )
            self._invokers[logical_id] = FunctionInvoker(
                spec,
                identity,
                launch,
                function_environment(
                    spec.resolved_environment(resolver),
                    lambda_defined,
                    local,
                    {**options.extra_environment, **self._call_log_variable()},
                ),
                enforce_timeout=options.enforce_timeouts,
                max_environments=options.max_environments,
            )
        if options.start_http:
            self._start_gateway(template, resources)
        if options.start_stream_pollers:
            self._start_stream_pollers(template, resources)
        if options.start_queue_pollers:
            self._start_queue_pollers(template, resources)
        if options.start_schedules:
            self._start_schedules(template, resources)
        self._warm_http_functions(template)
        log.info(
            "local runtime %s started%s", template.stack_name, " (built artifacts)" if options.built else ""
        )

    def _launches(self, template: Template) -> dict[str, Launch]:
        specs: dict[str, FunctionSpec] = template.functions
        if not self.options.built:
            return {logical_id: source_launch(spec.code_uri) for logical_id, spec in specs.items()}
        interpreter = clean_interpreter(self.options.python)
        layers = layer_directories(template.path)
        return {logical_id: built_launch(spec, interpreter, layers) for logical_id, spec in specs.items()}

    def _warm_http_functions(self, template: Template) -> None:
        """Start the HTTP functions' environments now, in parallel; an init failure fails the start."""
        if self._gateway is None:
            return  # nothing can send them requests
        count = self.options.warm_http_environments
        count = self.options.max_environments if count is None else count
        routed = [
            self._invokers[logical_id]
            for logical_id, spec in template.functions.items()
            if spec.events_of(HttpApiEvent)
        ]
        if count <= 0 or not routed:
            return
        failures: list[BaseException] = []

        def warm(invoker: FunctionInvoker) -> None:
            try:
                invoker.warm(count)
            except BaseException as error:  # reported to start()'s caller below
                failures.append(error)

        threads = [threading.Thread(target=warm, args=(invoker,), daemon=True) for invoker in routed]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]

    def stop(self) -> None:
        """Stop pollers, gateway, execution environments and (own) endpoints. Idempotent."""
        if self._scheduler is not None:
            self._scheduler.stop()
        for poller in self._stream_pollers:
            poller.stop()
        for queue_poller in self._queue_pollers:
            queue_poller.stop()
        for poller in self._stream_pollers:
            poller.join()
        for queue_poller in self._queue_pollers:
            queue_poller.join()
        if self._scheduler is not None:
            self._scheduler.join()
        self._stream_pollers, self._queue_pollers, self._scheduler = [], [], None
        if self._gateway is not None:
            self._gateway.stop()
            self._gateway = None
        if self._issuer is not None:
            self._issuer.stop()
            self._issuer = None
        if self._http_limits is not None:
            self._http_limits.close()
            self._http_limits = None
        for invoker in self._invokers.values():
            invoker.close()
        if self._endpoints is not None and self._owns_endpoints:
            self._endpoints.stop()
        self._owns_endpoints = False
        self._started = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- wiring -----------------------------------------------------------------------------------

    def _invoke(self, logical_id: str) -> Callable[[dict[str, Any]], Any]:
        return self._invokers[logical_id].invoke

    def _start_gateway(self, template: Template, resources: LocalResources) -> None:
        routes: list[Route] = []
        limits: list[RouteLimit] = []
        apis: set[str | None] = set()
        events: list[HttpApiEvent] = []
        for spec in template.functions.values():
            for event in spec.events_of(HttpApiEvent):
                routes.append(Route(event.method, event.path, spec.logical_id))
                apis.add(event.api)
                events.append(event)
                limits.append(route_limit(template, event))
        if not routes:
            return
        if len(apis) > 1:
            raise TemplateError(
                f"the local gateway serves one HTTP API; the template's routes use {sorted(map(str, apis))}"
            )
        (api,) = apis
        api_id = resources.http_api_ids.get(api or "", "localapi00")
        stage = template.http_apis[api].stage_name if api is not None else "$default"
        api_auth = template.http_apis[api].auth if api is not None else None
        self._gateway_auth = GatewayAuth.from_template(api_auth, events, self._start_issuer)
        self._http_limits = HttpLimits(limits)
        self._gateway = HttpGateway(
            RouteTable(routes),
            lambda logical_id, event: self._invokers[logical_id].invoke(event),
            api_id=api_id,
            stage=stage,
            port=self.options.port,
            auth=self._gateway_auth,
            limits=self._http_limits,
        )
        if self._issuer is not None:  # before the first request starts an API environment
            self._tell_functions_the_issuer(self._issuer)
        self._gateway.start()
        if self._issuer is not None:
            self._register_console(template, self._issuer, self._gateway.url)

    def _tell_functions_the_issuer(self, issuer: LocalIssuer) -> None:
        """The operator console signs in at the local issuer: the API function, which tells the
        page where to sign in, gets its URL (the template's JwtIssuer is empty locally)."""
        for invoker in self._invokers.values():
            if invoker.environment.get(CONSOLE_ISSUER_VARIABLE) == "":
                invoker.environment[CONSOLE_ISSUER_VARIABLE] = issuer.url

    @staticmethod
    def _register_console(template: Template, issuer: LocalIssuer, api_url: str) -> None:
        """The console's client at the local issuer, with its redirect URI (by either loopback name)."""
        client_id = template.parameter_values.get("ConsoleClientId") or CONSOLE_CLIENT_ID
        pages = [f"{api_url}/console", f"{api_url.replace('://127.0.0.1:', '://localhost:')}/console"]
        issuer.register_client(client_id, list(dict.fromkeys(pages)))

    def _call_log_variable(self) -> dict[str, str]:
        directory = self.options.record_calls_to
        return {} if directory is None else {CALL_LOG_VARIABLE: str(directory)}

    def _recorded[C](self, client: C, logical_id: str) -> C:
        """A mapping's client, recording its calls as the function's role's (when asked to)."""
        directory = self.options.record_calls_to
        if directory is not None:
            record_calls(client, self.resources.functions[logical_id].name, directory)
        return client

    def _start_issuer(self, audiences: tuple[str, ...]) -> str:
        if self._issuer is None:
            self._issuer = LocalIssuer(audiences, port=self.options.issuer_port).start()
            log.info("local OIDC issuer at %s", self._issuer.url)
        return self._issuer.url

    def _start_stream_pollers(self, template: Template, resources: LocalResources) -> None:
        endpoints = self.endpoints
        for spec in template.functions.values():
            for event in spec.events_of(DynamoDBStreamEvent):
                if not event.enabled:
                    continue
                table = resources.tables[event.table]
                assert table.stream_arn is not None
                window = self.options.stream_batching_window_seconds
                mapping = StreamMapping(
                    function_name=spec.logical_id,
                    function_arn=resources.functions[spec.logical_id].arn,
                    invoke=self._invoke(spec.logical_id),
                    stream_arn=table.stream_arn,
                    starting_position=event.starting_position,
                    batch_size=event.batch_size,
                    batching_window_seconds=event.maximum_batching_window_seconds
                    if window is None
                    else window,
                    policy=RetryPolicy(
                        maximum_retry_attempts=event.maximum_retry_attempts,
                        bisect_on_function_error=event.bisect_batch_on_function_error,
                        report_batch_item_failures=event.report_batch_item_failures,
                        backoff_seconds=self.options.retry_backoff_seconds,
                        max_backoff_seconds=self.options.max_retry_backoff_seconds,
                    ),
                    on_failure_queue_url=(
                        resources.queues[event.on_failure_queue].url if event.on_failure_queue else None
                    ),
                    region=REGION,
                    poll_interval_seconds=self.options.stream_poll_interval_seconds,
                )
                poller = StreamPoller(
                    mapping,
                    self._recorded(streams_client(endpoints.dynamodb_url), spec.logical_id),
                    self._recorded(sqs_client(endpoints.sqs_url), spec.logical_id),
                )
                self._stream_pollers.append(poller)
                poller.start()

    def _start_queue_pollers(self, template: Template, resources: LocalResources) -> None:
        endpoints = self.endpoints
        for spec in template.functions.values():
            for event in spec.events_of(SqsEvent):
                if not event.enabled:
                    continue
                queue = resources.queues[event.queue]
                mapping = QueueMapping(
                    function_name=spec.logical_id,
                    invoke=self._invoke(spec.logical_id),
                    queue_url=queue.url,
                    queue_arn=queue.arn,
                    batch_size=event.batch_size,
                    batching_window_seconds=event.maximum_batching_window_seconds,
                    report_batch_item_failures=event.report_batch_item_failures,
                    failure_visibility_seconds=self.options.failure_visibility_seconds,
                    region=REGION,
                )
                poller = SqsPoller(mapping, self._recorded(sqs_client(endpoints.sqs_url), spec.logical_id))
                self._queue_pollers.append(poller)
                poller.start()

    def _start_schedules(self, template: Template, resources: LocalResources) -> None:
        jobs = [
            ScheduledJob(
                function_name=spec.logical_id,
                rule_name=f"{template.stack_name}-{spec.logical_id}{event.name}"[:64],
                interval_seconds=self.options.schedule_interval_seconds or event.interval_seconds,
                invoke=self._invoke(spec.logical_id),
                input=event.input,
            )
            for spec in template.functions.values()
            for event in spec.events_of(ScheduleEvent)
            if event.enabled
        ]
        if jobs:
            self._scheduler = Scheduler(jobs)
            self._scheduler.start()

    @staticmethod
    def _once_started[T](value: T | None) -> T:
        if value is None:
            raise LocalRunError("the local runtime is not started")
        return value

    # -- what tests and tools use -----------------------------------------------------------------

    @property
    def template(self) -> Template:
        return self._once_started(self._template)

    @property
    def resources(self) -> LocalResources:
        return self._once_started(self._resources)

    @property
    def endpoints(self) -> LocalEndpoints:
        return self._once_started(self._endpoints)

    @property
    def api_url(self) -> str:
        if self._gateway is None:
            raise LocalRunError("the HTTP gateway is not running (no HttpApi events, or start_http=False)")
        return self._gateway.url

    @property
    def issuer(self) -> LocalIssuer:
        """The local OIDC issuer (running when a JWT authorizer of the template has no issuer)."""
        if self._issuer is None:
            raise LocalRunError(
                "no local issuer: the template's HTTP API has no JWT authorizer without an issuer"
            )
        return self._issuer

    @property
    def gateway_auth(self) -> GatewayAuth | None:
        return self._gateway_auth

    @property
    def dynamodb_url(self) -> str:
        return self.endpoints.dynamodb_url

    @property
    def sqs_url(self) -> str:
        return self.endpoints.sqs_url

    @property
    def events_url(self) -> str:
        return self.endpoints.events_url

    def auth_description(self) -> dict[str, Any]:
        """What a client needs to authenticate against the running gateway (for the state file)."""
        auth = self.gateway_auth
        mode = auth.mode if auth is not None else "none"
        parameters = self.template.parameter_values
        description: dict[str, Any] = {
            "mode": mode,
            "account_claim": parameters.get("AccountClaim", DEFAULT_ACCOUNT_CLAIM),
            "operator_scope": parameters.get("OperatorScope", DEFAULT_OPERATOR_SCOPE),
            "org_claim": parameters.get("OrgClaim", DEFAULT_ORG_CLAIM),
        }
        if mode == "jwt" and auth is not None:
            (authorizer, *_) = auth.jwt_authorizers
            description["issuer"] = authorizer.issuer
            description["audiences"] = list(authorizer.audiences)
            try:
                description["token_endpoint"] = self.issuer.token_endpoint
            except Exception:
                description["token_endpoint"] = None
        if mode == "iam":
            description["region"] = REGION
            description["access_key_id"] = LOCAL_CALLER.access_key_id
            description["secret_access_key"] = LOCAL_CALLER.secret_access_key
        return description

    @property
    def event_bus_arns(self) -> dict[str, str]:
        """Every event bus of the stack by name: the template's, and those its rules name (stand-ins)."""
        return {name: bus.arn for name, bus in self.resources.event_buses.items()}

    @property
    def table_names(self) -> dict[str, str]:
        return {logical_id: table.name for logical_id, table in self.resources.tables.items()}

    @property
    def table_name(self) -> str:
        """The name of the template's only table."""
        return self._only(self.resources.tables).name

    @property
    def stream_arn(self) -> str:
        """The stream ARN of the template's only table."""
        arn = self._only(self.resources.tables).stream_arn
        if arn is None:
            raise LocalRunError("the table has no stream")
        return arn

    @property
    def queue_urls(self) -> dict[str, str]:
        return {logical_id: queue.url for logical_id, queue in self.resources.queues.items()}

    @staticmethod
    def _only[T](items: dict[str, T]) -> T:
        if len(items) != 1:
            raise LocalRunError(
                f"the template has {len(items)} of these ({', '.join(items)}); pick one by id"
            )
        return next(iter(items.values()))

    def function_environment(self, logical_id: str) -> dict[str, str]:
        """The environment variables that function's execution environments see."""
        return dict(self.function(logical_id).environment)

    def client_environment(self) -> dict[str, str]:
        """Region, dummy credentials and endpoint URLs for a boto3 client or a tool in another process."""
        return client_variables(self.dynamodb_url, self.sqs_url, self.events_url)

    def function(self, logical_id: str) -> FunctionInvoker:
        try:
            return self._invokers[logical_id]
        except KeyError:
            raise LocalRunError(
                f"no function {logical_id!r}; the template has {', '.join(self._invokers) or 'none (not started?)'}"
            ) from None

    def wrap_function(self, logical_id: str, wrapper: Wrapper) -> Callable[[], None]:
        """Wrap a function's handler: `wrapper(event, context, call_next)`; returns an unwrap function."""
        return self.function(logical_id).wrap(wrapper)

    def pause_stream(self) -> None:
        """Stop invoking stream functions (records keep being read and wait); in-flight batches finish."""
        for poller in self._stream_pollers:
            poller.pause()

    def resume_stream(self) -> None:
        for poller in self._stream_pollers:
            poller.resume()

    def stream_backlog(self) -> int:
        """Stream records read but not yet processed (while paused: the records waiting for resume)."""
        return sum(poller.backlog() for poller in self._stream_pollers)

    def wait_until_idle(self, timeout: float = 30.0) -> None:
        """Return once all asynchronous work is done; raise TimeoutError naming what is still busy.

        Idle means: every stream shard has been read to its end (by a read that began after
        the check did), no batch is in flight or waiting for a retry, every polled queue is
        empty (in-flight messages included), no scheduled run is going on, and it stays so
        over a second check that starts after the first one passed.
        """
        deadline = time.monotonic() + timeout
        since = time.monotonic()
        idle_progress: tuple[Any, ...] | None = None
        while True:
            reasons = self._busy(since)
            if not reasons:
                progress = self._progress()
                if progress == idle_progress:
                    return  # idle twice, with nothing processed in between
                idle_progress = progress
                since = time.monotonic()  # the confirming check must see reads that begin after now
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"local runtime still busy after {timeout:g} s: {'; '.join(reasons) or 'still changing'}"
                )
            time.sleep(0.05)

    def _busy(self, since: float) -> list[str]:
        reasons: list[str] = []
        for poller in self._stream_pollers:
            reasons.extend(poller.busy(since))
        for queue_poller in self._queue_pollers:
            reasons.extend(queue_poller.busy())
        if self._scheduler is not None:
            reasons.extend(self._scheduler.busy())
        return reasons

    def _progress(self) -> tuple[Any, ...]:
        # Scheduled runs are not progress: they recur for ever. What they write shows up as stream work.
        return (
            tuple(poller.progress() for poller in self._stream_pollers),
            tuple(poller.progress() for poller in self._queue_pollers),
        )
