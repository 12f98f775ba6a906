"""Invoking a function's handler the way Lambda does: in execution environments.

Each function has a pool of execution environments. An environment is a child process
(`localrun.functions.lambda_worker`) that imports the handler module from `CodeUri` once and then
runs one invocation at a time; a concurrent invocation that finds no idle environment
starts a new one (a cold start), up to `max_environments` per function, beyond which it
waits for one to become free. Processes rather than threads because handlers and the
libraries they use keep per-invocation state in module and class attributes (Powertools'
resolver keeps the current event on its class), which Lambda never shares between
concurrent invocations and neither may we.

Events and answers cross the process boundary as JSON, as they cross it between Lambda
and its callers, so a handler can neither receive nor return objects that Lambda could
not carry. Each environment sees exactly the variables it is given (`localrun.functions.environment`:
its function's own plus Lambda's), not this process's, and starts as its `Launch` says
(`localrun.functions.launch`: the source tree on this virtualenv, or the built artifacts on a clean
python3.12). `warm(n)` starts environments ahead of the first invocation (their init phase
done), as provisioned concurrency would. Each environment reports Lambda's Init Duration and
each invocation its Duration; `reports` keeps the latest ones.

A handler error is raised here as `FunctionError` (errorType and errorMessage as Lambda
reports them; the traceback goes to the environment's stderr, as Lambda logs it). A run
longer than the function's Timeout is stopped: the process is killed, its side effects
are whatever it had done by then, and `FunctionTimeoutError` is raised. An environment
that timed out or died is discarded; one whose handler raised is kept, as on Lambda.

Tests can wrap a function to inject faults: `invoker.wrap(wrapper)` where
`wrapper(event, context, call_next)` decides whether and how to call the next layer.
Wrappers run in this process; a wrapper that never calls `call_next` stands in for the
handler, and no environment is started for it.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from localrun.errors import TemplateError
from localrun.functions.lambda_worker import LambdaContext
from localrun.functions.launch import Launch
from localrun.stack.provision import FunctionIdentity
from localrun.stack.template import FunctionSpec

log = logging.getLogger("localrun.functions.invoke")

CallNext = Callable[[Any, LambdaContext], Any]
Wrapper = Callable[[Any, LambdaContext, CallNext], Any]

INIT_TIMEOUT_SECONDS = 60.0  # imports only; generous because many environments may start at once


class FunctionError(Exception):
    """The handler raised, or its environment failed (Lambda's errorType and errorMessage)."""

    def __init__(self, function: str, error_type: str, message: str) -> None:
        super().__init__(f"{function}: {error_type}: {message}")
        self.error_type = error_type
        self.error_message = message


class FunctionTimeoutError(Exception):
    """The handler ran longer than the function's Timeout (Lambda: "Task timed out")."""


def new_context(identity: FunctionIdentity, memory_size: int, timeout: int) -> LambdaContext:
    """A context for one invocation, as the Lambda runtime would hand it to the handler."""
    return LambdaContext(
        {
            "function_name": identity.name,
            "function_version": "$LATEST",
            "invoked_function_arn": identity.arn,
            "memory_limit_in_mb": memory_size,
            "aws_request_id": str(uuid.uuid4()),
            "log_group_name": f"/aws/lambda/{identity.name}",
            "log_stream_name": f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}",
            "remaining_ms": timeout * 1000,
        }
    )


class _EnvironmentLost(Exception):
    """The environment cannot be used again (it died, timed out, or never started)."""


@dataclass(frozen=True)
class InitReport:
    wall_ms: float  # from starting the process to ready: what a cold start waits
    init_ms: float  # the handler module's import, as the environment measured it (Init Duration)


@dataclass(frozen=True)
class InvocationReport:
    request_id: str
    duration_ms: float  # the handler's run, as the environment measured it (Lambda's Duration)
    total_ms: float  # from invoke() to its answer here, hand-off both ways included


class ExecutionEnvironment:
    """One child process running one function's handler, one invocation at a time."""

    def __init__(
        self, spec: FunctionSpec, identity: FunctionIdentity, launch: Launch, environment: Mapping[str, str]
    ) -> None:
        self._function = identity.name
        self._timeout_ms = spec.timeout * 1000
        self._started = time.perf_counter()
        self.init_report: InitReport | None = None
        request_read, self._requests = os.pipe()
        self._responses, response_write = os.pipe()
        variables = {
            **environment,
            "AWS_LAMBDA_LOG_STREAM_NAME": f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}",
        }
        try:
            self.process = subprocess.Popen(
                launch.command(spec.handler_module, spec.handler_function, request_read, response_write),
                pass_fds=(request_read, response_write),
                stdin=subprocess.DEVNULL,
                env=variables,
                cwd=launch.code_dir,
                # Ctrl-C in the terminal is for the runtime, which stops its environments itself;
                # an environment whose runtime died sees its request pipe close and exits.
                start_new_session=True,
            )
        finally:
            os.close(request_read)
            os.close(response_write)
        self._buffer = b""

    def initialise(self, where: str) -> None:
        """Wait for the handler module to be imported; raise what the init phase raised."""
        try:
            answer = self._receive(INIT_TIMEOUT_SECONDS, what="init")
        except _EnvironmentLost as lost:
            raise FunctionError(self._function, "Runtime.ExitError", str(lost)) from None
        except TimeoutError:
            raise FunctionError(
                self._function, "Runtime.InitTimeout", f"init took over {INIT_TIMEOUT_SECONDS:.0f} s"
            ) from None
        if "initError" in answer:
            failure = answer["initError"]
            if failure["errorType"] == "Runtime.HandlerNotFound":
                raise TemplateError(f"{where}: {failure['errorMessage']}")
            raise FunctionError(self._function, failure["errorType"], failure["errorMessage"])
        wall_ms = (time.perf_counter() - self._started) * 1000
        self.init_report = InitReport(round(wall_ms, 3), float(answer.get("initMs", 0.0)))

    def invoke(self, event_json: str, context: LambdaContext, timeout: float | None) -> tuple[Any, float]:
        """Run one invocation of an event already encoded as JSON; returns (result, Duration in ms)."""
        # The clock starts now, as Lambda's starts after the init phase.
        fields = json.dumps(context.fields(remaining_ms=self._timeout_ms))
        message = f'{{"event": {event_json}, "context": {fields}}}\n'.encode()
        try:
            self._write_all(message)
        except OSError as error:
            raise _EnvironmentLost(f"the runtime exited ({error})") from error
        answer = self._receive(timeout, what="invoke")
        if "error" in answer:
            failure = answer["error"]
            raise FunctionError(self._function, failure["errorType"], failure["errorMessage"])
        return answer["result"], float(answer.get("durationMs", 0.0))

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._requests, view) :]

    def _receive(self, timeout: float | None, *, what: str) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(what)
            readable, _, _ = select.select([self._responses], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(self._responses, 1 << 16)
            if not chunk:
                code = self.process.wait()
                raise _EnvironmentLost(f"the runtime exited with status {code} during {what}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Stop the process; an invocation waiting on it sees the runtime exit."""
        if self.process.poll() is None:
            self.process.kill()

    def close(self) -> None:
        """Kill the process if it still runs and release the pipes; the owner calls it once."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._requests)
        os.close(self._responses)


class FunctionInvoker:
    """Calls one function's handler in its pool of execution environments; thread-safe."""

    def __init__(
        self,
        spec: FunctionSpec,
        identity: FunctionIdentity,
        launch: Launch,
        environment: Mapping[str, str],
        *,
        enforce_timeout: bool = True,
        max_environments: int = 10,
    ) -> None:
        if max_environments < 1:
            raise ValueError("max_environments must be at least 1")
        self.spec = spec
        self.identity = identity
        self.launch = launch
        self.environment = dict(environment)  # what each of its environments sees
        self._enforce_timeout = enforce_timeout
        self._max_environments = max_environments
        self._idle: list[ExecutionEnvironment] = []
        self._live: set[ExecutionEnvironment] = set()  # started and initialised or initialising
        self._size = 0  # environments counted against max_environments, starting ones included
        self._wrappers: list[Wrapper] = []
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._closed = False
        self.invocations = 0
        self.environments = 0  # environments started so far (cold starts and warm-ups)
        self.init_reports: deque[InitReport] = deque(maxlen=1000)
        self.reports: deque[InvocationReport] = deque(maxlen=10_000)

    @property
    def logical_id(self) -> str:
        return self.spec.logical_id

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def arn(self) -> str:
        return self.identity.arn

    @property
    def pids(self) -> list[int]:
        """Process ids of the running environments."""
        with self._lock:
            return [environment.process.pid for environment in self._live]

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
        context = new_context(self.identity, self.spec.memory_size, self.spec.timeout)
        with self._lock:
            wrappers = list(self._wrappers)
            self.invocations += 1
        if not wrappers:
            # The event crosses to the environment as JSON once and the answer comes back parsed:
            # both are already copies, as Lambda's caller and handler never share objects.
            return self._call_handler(event, context)
        call: CallNext = self._call_handler
        for wrapper in wrappers:
            call = _bind(wrapper, call)
        result = call(json.loads(json.dumps(event)), context)
        try:
            return json.loads(json.dumps(result))
        except (TypeError, ValueError) as error:
            raise TypeError(f"{self.name}: the response is not JSON serialisable ({error})") from error

    def _call_handler(self, event: Any, context: LambdaContext) -> Any:
        started = time.perf_counter()
        event_json = json.dumps(event)  # before an environment is taken: a bad event is the caller's
        environment = self._checkout()
        timeout = self.spec.timeout if self._enforce_timeout else None
        keep = False
        try:
            result, duration_ms = environment.invoke(event_json, context, timeout)
            keep = True
        except FunctionError:
            keep = True
            raise
        except TimeoutError:
            elapsed = time.perf_counter() - started
            raise FunctionTimeoutError(
                f"{self.name}: task timed out after {elapsed:.2f} seconds (Timeout {self.spec.timeout} s)"
            ) from None
        except _EnvironmentLost as error:
            raise FunctionError(self.name, "Runtime.ExitError", str(error)) from None
        finally:
            self._checkin(environment, keep)
        total_ms = (time.perf_counter() - started) * 1000
        self.reports.append(InvocationReport(context.aws_request_id, duration_ms, round(total_ms, 3)))
        log.debug("REPORT %s RequestId: %s Duration: %.2f ms", self.name, context.aws_request_id, duration_ms)
        return result

    def warm(self, count: int) -> None:
        """Start up to `count` environments (no more than the limit) at once and keep them idle.

        Raises the first init failure, as the first invocation would have.
        """
        with self._lock:
            if self._closed:
                return
            count = max(0, min(count, self._max_environments) - self._size)
            self._size += count
            self.environments += count
        if count == 0:
            return
        with ThreadPoolExecutor(count, thread_name_prefix=f"warm-{self.logical_id}") as pool:
            started = [pool.submit(self._start_reserved) for _ in range(count)]
        failures: list[BaseException] = []
        for future in started:
            error = future.exception()
            if error is not None:
                failures.append(error)
            else:
                self._checkin(future.result(), keep=True)
        if failures:
            raise failures[0]

    def _checkout(self) -> ExecutionEnvironment:
        """An idle environment, or a new one when all are busy (waiting at the limit)."""
        with self._lock:
            while not self._idle and self._size >= self._max_environments and not self._closed:
                self._freed.wait()
            if self._closed:
                raise FunctionError(self.name, "Runtime.Stopped", "the local runtime is stopping")
            if self._idle:
                return self._idle.pop()
            self._size += 1
            self.environments += 1
        return self._start_reserved()

    def _start_reserved(self) -> ExecutionEnvironment:
        """Start an environment for a slot already counted in `_size`, through its init phase."""
        where = f"Resources.{self.logical_id} (Handler {self.spec.handler})"
        try:
            environment = self._spawn(where)
        except BaseException:
            with self._lock:
                self._size -= 1
                self._freed.notify()
            raise
        with self._lock:
            self._live.add(environment)
        try:
            environment.initialise(where)
        except BaseException:
            self._checkin(environment, keep=False)
            raise
        report = environment.init_report
        if report is not None:
            self.init_reports.append(report)
            log.info(
                "started %s environment (pid %d): Init Duration %.0f ms, ready after %.0f ms",
                self.spec.handler,
                environment.process.pid,
                report.init_ms,
                report.wall_ms,
            )
        return environment

    def _spawn(self, where: str) -> ExecutionEnvironment:
        handler_path = self.launch.code_dir / (self.spec.handler_module.replace(".", "/") + ".py")
        if not handler_path.is_file():
            raise TemplateError(f"{where}: {handler_path} does not exist")
        return ExecutionEnvironment(self.spec, self.identity, self.launch, self.environment)

    def _checkin(self, environment: ExecutionEnvironment, keep: bool) -> None:
        with self._lock:
            if keep and not self._closed and environment.alive:
                self._idle.append(environment)
                self._freed.notify()
                return
            self._live.discard(environment)
            self._size -= 1
            self._freed.notify()
        environment.close()

    def close(self) -> None:
        """Stop every environment; invocations still running fail with Runtime.ExitError."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live.difference_update(idle)
            busy = list(self._live)
            self._freed.notify_all()
        for environment in idle:
            environment.close()
        for environment in busy:
            environment.kill()  # its invocation's thread closes it


def _bind(wrapper: Wrapper, call_next: CallNext) -> CallNext:
    def call(event: Any, context: LambdaContext) -> Any:
        return wrapper(event, context, call_next)

    return call
