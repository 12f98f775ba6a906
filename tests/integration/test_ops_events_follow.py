"""`hybrid-counter-ops events tail --follow` keeps following: long polls, outages, restarts, Ctrl-C.

Against a real moto server (SQS over HTTP, in this process so that a test can stop it and start it
again on the same port, as an endpoint that refuses connections for a moment). The command runs
in a thread of this process, or (for Ctrl-C) as the installed command in a child process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from hybrid_counter.ops import cli
from localrun.stack.endpoints import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REGION = "us-east-1"


class MotoServer:
    """moto's server mode on a fixed port, which can be stopped and started again (its queues kept)."""

    def __init__(self) -> None:
        self.port = free_port()
        self._server: ThreadedMotoServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def sqs(self) -> Any:
        return boto3.client("sqs", endpoint_url=self.url, region_name=REGION)

    def new_queue(self) -> str:
        return str(self.sqs().create_queue(QueueName=f"events-{uuid.uuid4().hex[:8]}")["QueueUrl"])

    def publish(self, queue_url: str, seen: str) -> None:
        """An EventBridge event as the stack's rule delivers it to the queue."""
        event = {
            "version": "0",
            "id": uuid.uuid4().hex,
            "detail-type": "Quota Threshold Reached",
            "source": "hybrid-counter",
            "time": "2026-11-24T10:00:00Z",
            "detail": {"seen": seen},
        }
        self.sqs().send_message(QueueUrl=queue_url, MessageBody=json.dumps(event))


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def sqs_endpoint(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """The command's SQS calls go to the moto server (boto3 reads AWS_ENDPOINT_URL_SQS)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", moto.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    return moto


class Run:
    """The command in a thread; what it raised, if anything, is kept for the test to see."""

    def __init__(self, argv: list[str]) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(argv,), daemon=True)
        self._thread.start()

    def _main(self, argv: list[str]) -> None:
        try:
            cli.main(argv)
        except BaseException as error:  # the test asserts on it
            self.error = error

    def wait(self, seconds: float) -> None:
        self._thread.join(seconds)
        assert not self._thread.is_alive(), f"the command was still running after {seconds} s"
        assert self.error is None, repr(self.error)


def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.1)


def stderr_says(capsys: pytest.CaptureFixture[str], seen: list[str], text: str) -> bool:
    """Whether ``text`` has appeared on stderr so far (what was read is kept in ``seen``)."""
    seen.append(capsys.readouterr().err)
    return text in "".join(seen)


def printed_events(out: str) -> list[str]:
    return [json.loads(line)["detail"]["seen"] for line in out.splitlines()]


def test_following_outlasts_empty_long_polls_longer_than_5_s_and_prints_a_later_event(
    sqs_endpoint: MotoServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an empty queue, and every failed ReceiveMessage attempt of the command's clients recorded
    queue_url = sqs_endpoint.new_queue()
    failed_attempts: list[str] = []

    def record(caught_exception: Exception | None = None, **_: Any) -> None:
        if caught_exception is not None:
            failed_attempts.append(repr(caught_exception))

    session = boto3.Session()
    session.events.register("needs-retry.sqs.ReceiveMessage", record)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)  # the session boto3.client() uses

    # When the command follows it with long polls of 6 s (longer than the 5 s read timeout the tool
    # used to have), and an event arrives after two empty polls
    run = Run(["--events-queue-url", queue_url, "events", "tail", "--follow", "--wait", "6", "--max", "1"])
    time.sleep(12.5)
    sqs_endpoint.publish(queue_url, "after two empty polls")
    run.wait(15)

    # Then the event is printed, and no poll was cut short by the client's read timeout
    assert printed_events(capsys.readouterr().out) == ["after two empty polls"]
    assert failed_attempts == []


def test_an_endpoint_refusing_connections_for_a_moment_does_not_end_the_follow(
    sqs_endpoint: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a follow under way
    queue_url = sqs_endpoint.new_queue()
    run = Run(["--events-queue-url", queue_url, "events", "tail", "--follow", "--wait", "1", "--max", "1"])
    time.sleep(1.5)
    notes: list[str] = []

    # When the endpoint stops (connections refused) until the follow has noticed, then comes back
    sqs_endpoint.stop()
    wait_for(lambda: stderr_says(capsys, notes, "retrying in"), 30)
    sqs_endpoint.start()
    sqs_endpoint.publish(queue_url, "after the outage")
    run.wait(30)

    # Then the follow went on: a note on stderr instead of a crash, and the later event printed
    captured = capsys.readouterr()
    assert printed_events(captured.out) == ["after the outage"]
    note = "".join(notes) + captured.err
    assert "events tail: cannot receive (EndpointConnectionError" in note
    assert "Traceback" not in note


def test_following_the_local_runtime_survives_a_restart_on_new_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given `make dev`'s state file naming a first endpoint, and a follow with --local
    first, second = MotoServer(), MotoServer()
    first.start()
    state = tmp_path / "runtime.json"

    def write_state(server: MotoServer, queue_url: str) -> None:
        urls = {"OperatorQueue": "o", "RetryQueue": "r"}
        state.write_text(
            json.dumps(
                {
                    "dynamodb_url": server.url,
                    "sqs_url": server.url,
                    "table_name": "t",
                    "queue_urls": urls,
                    "events_queue_url": queue_url,
                }
            )
        )

    write_state(first, first.new_queue())
    argv = ["--local", "--local-state", str(state), "events", "tail", "--follow", "--wait", "1", "--max", "1"]
    run = Run(argv)
    time.sleep(1.5)
    notes: list[str] = []
    try:
        # When `make dev` stops (its state file gone) and starts again elsewhere (a new port, a new queue)
        first.stop()
        state.unlink()
        wait_for(lambda: stderr_says(capsys, notes, "waiting for `make dev`"), 30)
        second.start()
        queue_url = second.new_queue()
        write_state(second, queue_url)
        second.publish(queue_url, "after the restart")
        run.wait(30)
    finally:
        second.stop()

    # Then the follow found the new runtime and printed its event
    assert printed_events(capsys.readouterr().out) == ["after the restart"]


def test_ctrl_c_ends_the_command_quietly(moto: MotoServer) -> None:
    # Given the installed command following a queue (with its default 20 s long polls)
    queue_url = moto.new_queue()
    moto.publish(queue_url, "before Ctrl-C")
    command = Path(sys.executable).parent / "hybrid-counter-ops"
    env = {**os.environ, "AWS_ENDPOINT_URL_SQS": moto.url, "AWS_DEFAULT_REGION": REGION}
    # Started as a shell starts a foreground command: SIGINT at its default. A suite run in the
    # background of a non-interactive shell (`make test &`) inherits SIGINT ignored, which exec
    # keeps, and Python then never raises KeyboardInterrupt: the command would not be the one a
    # terminal's Ctrl-C reaches. (An exec wrapper, not preexec_fn: this process has threads.)
    argv = [str(command), "--events-queue-url", queue_url, "events", "tail", "--follow"]
    shell_like = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    process = subprocess.Popen(
        [sys.executable, "-c", shell_like, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()  # it is following once the queued event is printed

        # When Ctrl-C comes in the middle of a long poll
        time.sleep(1)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()

    # Then it ends at once, successfully, with nothing on stderr (no traceback)
    assert printed_events(first_line + out) == ["before Ctrl-C"]
    assert (process.returncode, err) == (0, "")
