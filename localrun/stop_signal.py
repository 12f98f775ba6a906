"""How `hybrid-counter-local` learns that SIGINT (Ctrl-C) or SIGTERM asked it to stop.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread is,
including inside `threading.Event.wait()` while it holds the event's internal lock. A handler that
calls `Event.set()` then waits for a lock its own thread holds, for ever: `make dev` hung that way
on Ctrl-C. So the handler here only assigns an attribute (no lock, no I/O, nothing that can block
or raise), and the main thread polls that attribute between plain `time.sleep()` calls, which hold
no lock either. Any number of signals, at any moment, only set the same flag again.

Once everything is stopped, the stop signals are ignored (`ignore_from_now_on`): on its way out
the interpreter puts back the default action of every signal that has a Python handler, so a
second Ctrl-C or SIGTERM landing during its shutdown killed the process (exit -15 after a clean
stop). An ignored signal keeps being ignored through the shutdown.
"""

from __future__ import annotations

import signal
import time
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL_SECONDS = 0.2  # how late after a signal the main thread notices it, at most


class StopRequest:
    """Set (and only set) by the stop signals' handler."""

    def __init__(self) -> None:
        self.requested = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def install(self) -> None:
        """Make SIGINT and SIGTERM request a stop (call from the main thread)."""
        for number in STOP_SIGNALS:
            signal.signal(number, self.handle)

    def ignore_from_now_on(self) -> None:
        """Once stopped: a stop signal while the interpreter shuts down must not kill it."""
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)


def wait_for_stop(stop: StopRequest, poll_seconds: float = POLL_SECONDS) -> None:
    """Return once a stop has been requested."""
    while not stop.requested:
        time.sleep(poll_seconds)
