"""Invoking a function's handler in this process, the way the Lambda Python runtime would.

Each function has a pool of execution environments, as on Lambda: an environment runs
one invocation at a time, and a concurrent invocation that finds no idle environment
gets a new one (a cold start). An environment is the handler module loaded from
`CodeUri/<module>.py` under a name unique to this runtime, function and environment, so
module state (cached clients, Powertools resolvers, which keep per-request state on the
instance) is never shared between concurrent invocations, between two functions with the
same module name, or between two runtimes. The CodeUri directory is on `sys.path` while
the module is imported, as `/var/task` is on Lambda. Packages the handler imports (the
layer) are ordinary modules, shared by all environments in the process.

Events and responses go through a JSON round trip, as they do between Lambda and its
callers, so a handler can neither receive nor return objects that Lambda could not carry.

Tests can wrap a function to inject faults: `invoker.wrap(wrapper)` where
`wrapper(event, context, call_next)` decides whether and how to call the next layer.
A wrapper that never calls `call_next` stands in for the handler, which is then never
imported.

A handler that runs longer than the function's Timeout is reported as failed
(`FunctionTimeoutError`) after it returns: unlike Lambda, the local runtime cannot
stop it half-way, so its side effects are complete. Its environment is discarded, as
Lambda discards an environment after a timeout.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from localrun.errors import TemplateError
from localrun.provision import FunctionIdentity
from localrun.template import FunctionSpec

log = logging.getLogger("localrun.invoke")

CallNext = Callable[[Any, "LambdaContext"], Any]
Wrapper = Callable[[Any, "LambdaContext", CallNext], Any]

_runtime_ids = itertools.count(1)
_import_lock = threading.Lock()


class FunctionTimeoutError(Exception):
    """The handler ran longer than the function's Timeout (Lambda: "Task timed out")."""


class LambdaContext:
    """The attributes and method of the Lambda Python runtime's context object."""

    def __init__(self, identity: FunctionIdentity, memory_size: int, timeout: int) -> None:
        self.function_name = identity.name
        self.function_version = "$LATEST"
        self.invoked_function_arn = identity.arn
        self.memory_limit_in_mb = memory_size
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{identity.name}"
        self.log_stream_name = f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self.tenant_id = None
        self._deadline = time.monotonic() + timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def new_module_prefix() -> str:
    """A prefix for handler module names, unique to one runtime in this process."""
    return f"_localrun{next(_runtime_ids)}"


class FunctionInvoker:
    """Calls one function's handler with a fresh context per invocation; thread-safe."""

    def __init__(
        self,
        spec: FunctionSpec,
        identity: FunctionIdentity,
        *,
        module_prefix: str,
        enforce_timeout: bool = True,
    ) -> None:
        self.spec = spec
        self.identity = identity
        self._module_name = f"{module_prefix}_{spec.logical_id}_{spec.handler_module.replace('.', '_')}"
        self._enforce_timeout = enforce_timeout
        self._idle: list[Callable[[Any, LambdaContext], Any]] = []
        self._wrappers: list[Wrapper] = []
        self._lock = threading.Lock()
        self.invocations = 0
        self.environments = 0  # environments created so far (cold starts)

    @property
    def logical_id(self) -> str:
        return self.spec.logical_id

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def arn(self) -> str:
        return self.identity.arn

    # -- wrapping ---------------------------------------------------------------------------------

    def wrap(self, wrapper: Wrapper) -> Callable[[], None]:
        """Add a wrapper (outermost); returns a function that removes it again."""
        with self._lock:
            self._wrappers.append(wrapper)

        def unwrap() -> None:
            with self._lock:
                if wrapper in self._wrappers:
                    self._wrappers.remove(wrapper)

        return unwrap

    def clear_wrappers(self) -> None:
        with self._lock:
            self._wrappers.clear()

    # -- invoking ---------------------------------------------------------------------------------

    def invoke(self, event: Any) -> Any:
        """Run the function once; returns its JSON response, raises what the handler raised."""
        payload = json.loads(json.dumps(event))
        context = LambdaContext(self.identity, self.spec.memory_size, self.spec.timeout)
        with self._lock:
            wrappers = list(self._wrappers)
            self.invocations += 1
        call: CallNext = self._call_handler
        for wrapper in wrappers:
            call = _bind(wrapper, call)
        started = time.monotonic()
        log.debug("START %s RequestId: %s", self.name, context.aws_request_id)
        try:
            result = call(payload, context)
        finally:
            elapsed = time.monotonic() - started
            log.debug("END %s RequestId: %s (%.0f ms)", self.name, context.aws_request_id, elapsed * 1000)
        if self._enforce_timeout and elapsed > self.spec.timeout:
            raise FunctionTimeoutError(
                f"{self.name}: task timed out after {elapsed:.2f} seconds (Timeout {self.spec.timeout} s)"
            )
        try:
            return json.loads(json.dumps(result))
        except (TypeError, ValueError) as error:
            raise TypeError(f"{self.name}: the response is not JSON serialisable ({error})") from error

    def _call_handler(self, event: Any, context: LambdaContext) -> Any:
        handler = self._checkout()
        started = time.monotonic()
        try:
            return handler(event, context)
        finally:  # an environment whose handler raised is kept, as on Lambda; a timed-out one is not
            if not (self._enforce_timeout and time.monotonic() - started > self.spec.timeout):
                with self._lock:
                    self._idle.append(handler)

    def _checkout(self) -> Callable[[Any, LambdaContext], Any]:
        """An idle environment's handler, or a new environment's when all are busy."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.environments += 1
            number = self.environments
        with _import_lock:
            return self._load(number)

    def _load(self, environment: int) -> Callable[[Any, LambdaContext], Any]:
        module_name = f"{self._module_name}_env{environment}"
        path = self.spec.handler_path
        where = f"Resources.{self.logical_id} (Handler {self.spec.handler})"
        if not path.is_file():
            raise TemplateError(f"{where}: {path} does not exist")
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise TemplateError(f"{where}: cannot import {path}")
        module: ModuleType = importlib.util.module_from_spec(spec)
        code_dir = str(self.spec.code_uri)
        sys.path.insert(0, code_dir)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        finally:
            if code_dir in sys.path:
                sys.path.remove(code_dir)
        handler = getattr(module, self.spec.handler_function, None)
        if not callable(handler):
            raise TemplateError(f"{where}: {path} has no function {self.spec.handler_function}")
        log.info("loaded %s from %s (environment %d)", self.spec.handler, path, environment)
        return handler  # type: ignore[no-any-return]


def _bind(wrapper: Wrapper, call_next: CallNext) -> CallNext:
    def call(event: Any, context: LambdaContext) -> Any:
        return wrapper(event, context, call_next)

    return call
