"""`hybrid-counter-local` stops cleanly on SIGINT (Ctrl-C) and SIGTERM, whenever they arrive.

Its signal handler used to call `threading.Event.set()` while the main thread waited in
`Event.wait()`: a signal landing while the main thread held the event's lock deadlocked the
process for good. The wait is stressed on its own, hundreds of times in a light subprocess; then
the real command is started and signalled twice at random moments, once while it starts and once
while it runs.

A second signal that landed after the clean stop, while the interpreter shut down, killed the
process (exit -15, seen once in CI): the interpreter had put back the signals' default action.
That moment is hit on purpose, in a light subprocess, and `main` is checked to leave the stop
signals ignored on every way out.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

import localrun.__main__ as local_command
from localrun.errors import LocalRunError
from localrun.stack.template import PROJECT_ROOT
from localrun.stop_signal import STOP_SIGNALS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

STRESS_TRIALS = 400
LOCAL_COMMAND = Path(sys.executable).with_name("hybrid-counter-local")
STARTING_LINE = "starting (Ctrl-C or SIGTERM stops everything)"
READY_LINE = "Ctrl-C to stop"
SECONDS_TO_STOP = 20


def test_stop_signals_at_random_moments_always_end_the_wait() -> None:
    # Given a process that, trial after trial, waits for a stop while 1-3 SIGINT/SIGTERM arrive
    seed = random.randrange(1_000_000)
    command = [sys.executable, "-m", "tests.integration.stop_signal_stress", str(STRESS_TRIALS), str(seed)]

    # When it runs every trial
    try:
        done = subprocess.run(
            command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired:  # run() has killed it (SIGKILL: its stop handlers cannot interfere)
        pytest.fail(f"a wait for a stop signal hung (seed {seed})")

    # Then every wait returned
    assert (done.returncode, done.stdout.strip()) == (0, f"{STRESS_TRIALS} trials stopped"), done.stderr


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param("ignore", 0, id="ignored-once-stopped"),
        pytest.param("keep", -signal.SIGTERM, id="control-handler-kept-dies"),
    ],
)
def test_a_stop_signal_while_the_interpreter_shuts_down_after_the_stop(mode: str, expected: int) -> None:
    # Given a process that has received a stop, with its handlers kept or ignored from then on
    command = [sys.executable, "-m", "tests.integration.stop_at_shutdown", mode]

    # When a SIGTERM lands while its interpreter shuts down
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=30, check=False)

    # Then ignoring it from the stop on exits 0; keeping the handler lets the signal kill the process
    assert done.returncode == expected, done.stderr


class _RuntimeThatCannotStart:
    def __init__(self, options: object) -> None:
        self.stopped = False

    def start(self) -> None:
        raise LocalRunError("DynamoDB Local did not start")

    def stop(self) -> None:
        self.stopped = True


def test_the_local_command_ignores_stop_signals_on_its_way_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given the local command, on a runtime that fails to start
    monkeypatch.setattr(local_command, "LocalRuntime", _RuntimeThatCannotStart)
    monkeypatch.setattr(local_command, "STATE_FILE", tmp_path / "runtime.json")
    before = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    try:
        # When it gives up
        code = local_command.main(["--port", "0", "--no-schedules"])

        # Then it has stopped and leaves the stop signals ignored for the shutdown that follows
        assert code == 1
        assert [signal.getsignal(number) for number in STOP_SIGNALS] == [signal.SIG_IGN] * 2
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


class LocalRun:
    """`hybrid-counter-local --port 0` in `directory`, its output collected as it comes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process = subprocess.Popen(
            [str(LOCAL_COMMAND), "--port", "0", "--no-schedules"],
            cwd=directory,  # its state file goes here, not over a developer's `make dev` one
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._collect, args=(self.process.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._collect, args=(self.process.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _collect(stream: IO[str], lines: list[str]) -> None:
        for line in stream:  # one line at a time: the test reads the list while it grows
            lines.append(line)

    def wait_for_line(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.stdout + self.stderr):
            assert self.process.poll() is None, "".join(self.stderr)
            assert time.monotonic() < deadline, f"no {text!r} in {timeout} s"
            time.sleep(0.05)

    def signal(self, number: signal.Signals) -> None:
        if self.process.poll() is None:
            self.process.send_signal(number)

    def wait(self, timeout: float) -> int | None:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None
        for reader in self._readers:
            reader.join(timeout=5)
        return code


@pytest.mark.parametrize(
    ("first", "moment"),
    [
        pytest.param(signal.SIGTERM, "while starting", id="SIGTERM-while-starting"),
        pytest.param(signal.SIGINT, "while running", id="SIGINT-while-running"),
    ],
)
def test_the_local_command_exits_0_after_a_clean_stop(
    tmp_path: Path, first: signal.Signals, moment: str
) -> None:
    # Given `hybrid-counter-local`, starting or running
    rng = random.Random()
    run = LocalRun(tmp_path)
    run.wait_for_line(STARTING_LINE, timeout=30)  # its stop handlers are installed from here on
    if moment == "while starting":
        time.sleep(rng.uniform(0, 5))  # starting takes 8-10 s here
    else:
        run.wait_for_line(READY_LINE, timeout=60)
        time.sleep(rng.uniform(0, 1))

    # When a stop signal arrives, and another one at a random moment soon after (while it stops)
    run.signal(first)
    time.sleep(rng.uniform(0, 1.5))
    run.signal(rng.choice([signal.SIGINT, signal.SIGTERM]))

    # Then it stops everything and exits 0 within seconds, and removes its state file
    code = run.wait(timeout=SECONDS_TO_STOP)
    assert code == 0, f"exit {code} ({moment}):\n" + "".join(run.stderr[-30:])
    assert "stopped\n" in run.stdout
    assert not (tmp_path / ".local" / "runtime.json").exists()
    assert not any("Traceback" in line for line in run.stderr), "".join(run.stderr)
