"""`python -m tests.integration.stop_at_shutdown ignore|keep`: a stop signal during shutdown.

Installs `hybrid-counter-local`'s stop handlers, receives a stop, then (with `ignore`) does what
`hybrid-counter-local` does once stopped. A module-level object sends SIGTERM to this process from
its finaliser, that is while the interpreter shuts down, after it has put back the default action
of signals with Python handlers. Exit 0 means the late signal was harmless.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from localrun.stop_signal import StopRequest, wait_for_stop


class SignalsAtShutdown:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # a signal with its default action has ended the process by now


def main(mode: str) -> int:
    stop = StopRequest()
    stop.install()
    os.kill(os.getpid(), signal.SIGINT)
    wait_for_stop(stop, poll_seconds=0.01)
    if mode == "ignore":
        stop.ignore_from_now_on()
    return 0


late = SignalsAtShutdown()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
