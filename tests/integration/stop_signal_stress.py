"""`python -m tests.integration.stop_signal_stress TRIALS SEED`: stop signals at random moments.

Each trial installs `hybrid-counter-local`'s stop handlers, lets a second thread send one to three
SIGINT/SIGTERM to this process after random delays of up to 2 ms, and waits for the stop as
`hybrid-counter-local` does (polling every 0 to 1 ms, so that the signals land at every point of
the wait). A wait that deadlocks never returns, and this process never prints its last line; the
test that runs it kills it after a deadline.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time

from localrun.stop_signal import STOP_SIGNALS, StopRequest, wait_for_stop


def send_later(signals: list[signal.Signals], delays: list[float]) -> None:
    for number, delay in zip(signals, delays, strict=True):
        time.sleep(delay)
        os.kill(os.getpid(), number)


def one_trial(rng: random.Random) -> None:
    stop = StopRequest()
    stop.install()
    signals = [rng.choice(STOP_SIGNALS) for _ in range(rng.randint(1, 3))]
    delays = [rng.uniform(0, 0.002) for _ in signals]
    sender = threading.Thread(target=send_later, args=(signals, delays))
    sender.start()
    wait_for_stop(stop, poll_seconds=rng.choice([0, 0.0001, 0.001]))
    sender.join()  # signals still on their way land in the handler after the wait: harmless


def main(argv: list[str]) -> int:
    trials, seed = int(argv[0]), int(argv[1])
    rng = random.Random(seed)
    for _ in range(trials):
        one_trial(rng)
    print(f"{trials} trials stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
