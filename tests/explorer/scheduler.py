"""Step-level control of concurrent operations: every DynamoDB call is a scheduling point.

Each operation runs the real domain code in a thread of its own, on the real boto3 clients.
A botocore ``before-send`` hook on those clients stops the calling thread before its request
leaves and waits until the scheduler lets that one call go (optionally with a fault), so the
scheduler decides exactly which operation's next call lands next. The operation then runs on
until its next call, or a wait (``Waiter.sleep``, also a scheduling point), or its end. An
operation spawned with ``clock_points`` also stops at its first read of its clock after each
call (``clock_point``), so that a run can let time pass before that read (runs.py, "late").

Calls from threads the scheduler does not own (the test's own checks) pass straight through.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from tests.faults import fail, forward, target_of

STEP_TIMEOUT = 60.0
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
# Scheduling points that are not DynamoDB calls: a Waiter's sleep, a read of the clock.
PSEUDO = frozenset({"wait", "clock"})


class Crash(BaseException):
    """Raised into an operation to stop it where it is, as if its Lambda was killed: a
    BaseException, so the domain's ``except Exception`` handlers do not run."""


@dataclass
class Call:
    op: str
    operation: str  # "UpdateItem", or "wait" for a Waiter sleep, "clock" for a clock read
    body: dict[str, Any] = field(default_factory=dict)
    outcome: str | None = None  # "ok", an error code, "fault:<kind>"
    applied: bool | None = None  # did it take effect (known to the scheduler even when the caller can't)
    seen: str = ""  # a digest of the response the caller got: what it can act on

    @property
    def writes(self) -> bool:
        return self.operation in WRITES

    @property
    def pseudo(self) -> bool:
        """A scheduling point that sends nothing (no fault can be given to it)."""
        return self.operation in PSEUDO

    @property
    def key(self) -> str:
        key = self.body.get("Key") or self.body.get("Item") or {}
        sk = key.get("sk", {}).get("S")
        if sk is not None:
            return str(sk)
        if self.operation == "TransactWriteItems":
            return "transaction"
        return self.operation

    @property
    def partition(self) -> str | None:
        """The partition key of the item it writes or reads (None for a transaction or a scan)."""
        key = self.body.get("Key") or self.body.get("Item") or {}
        pk = key.get("pk", {}).get("S")
        return None if pk is None else str(pk)

    def values(self) -> dict[str, Any]:
        return dict(self.body.get("ExpressionAttributeValues") or {})

    def describe(self) -> str:
        what = self.operation if self.pseudo else f"{self.operation} {self.key}"
        expression = self.body.get("UpdateExpression") or self.body.get("ConditionExpression") or ""
        if expression:
            what += f" [{expression[:70]}]"
        return f"{self.op}: {what} -> {self.outcome}"


class Operation:
    """One concurrent operation: the callable, its thread, and where it stands."""

    def __init__(self, name: str, fn: Callable[[], Any], clock_points: bool = False) -> None:
        self.name = name
        self.fn = fn
        self.clock_points = clock_points
        # It read its clock since its last call: what it does until its next call follows from
        # that reading (a check of its claim's age, a timestamp), as one step.
        self.read_clock = False
        self.calls: list[Call] = []
        self.pending: Call | None = None
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._arrived = threading.Event()
        self._go = threading.Event()
        self._fault: str | None = None
        self.thread = threading.Thread(target=self._run, name=f"op-{name}", daemon=True)

    @property
    def blocked(self) -> bool:
        return not self.done and self.pending is not None

    @property
    def waiting(self) -> bool:
        return self.blocked and self.pending is not None and self.pending.operation == "wait"

    @property
    def past_its_clock(self) -> bool:
        """Stopped at a call it decided on by a reading of its clock (see ``clock_point``)."""
        return self.blocked and self.read_clock and self.pending is not None and not self.pending.pseudo

    def _run(self) -> None:
        self._go.wait()  # until the scheduler has registered this thread
        self._go.clear()
        try:
            self.result = self.fn()
        except BaseException as error:  # the outcome is what the test inspects
            self.error = error
        finally:
            self.done = True
            self.pending = None
            self._arrived.set()

    # -- called in the operation's thread ---------------------------------------------------------
    def arrive(self, call: Call) -> str | None:
        self.pending = call
        self._arrived.set()
        if not self._go.wait(STEP_TIMEOUT):
            raise Crash(f"{self.name} was never scheduled again")
        self._go.clear()
        fault, self._fault = self._fault, None
        self.pending = None
        self.read_clock = call.operation == "clock"
        self.calls.append(call)
        if fault == "crash":
            call.outcome = "fault:crash"
            raise Crash(self.name)
        return fault

    # -- called by the scheduler --------------------------------------------------------------------
    def release(self, fault: str | None) -> None:
        self._arrived.clear()
        self._fault = fault
        self._go.set()

    def settle(self) -> None:
        if not self._arrived.wait(STEP_TIMEOUT):
            raise TimeoutError(
                f"operation {self.name} neither called DynamoDB nor finished in {STEP_TIMEOUT} s"
            )


class Scheduler:
    def __init__(self, *clients: Any, redact: Callable[[str], str] = str) -> None:
        self._clients = clients
        self._redact = redact  # makes responses of two runs on two accounts comparable
        self._by_thread: dict[int, Operation] = {}
        self._current: dict[int, Call] = {}
        self.trace: list[Call] = []
        for client in clients:
            client.meta.events.register_first("before-send.dynamodb.*", self._before_send)
            client.meta.events.register("after-call.dynamodb.*", self._after_call)

    def close(self) -> None:
        for op in list(self._by_thread.values()):
            while not op.done:
                self.step(op, "crash" if op.blocked else None)
        for client in self._clients:
            client.meta.events.unregister("before-send.dynamodb.*", self._before_send)
            client.meta.events.unregister("after-call.dynamodb.*", self._after_call)

    def spawn(self, name: str, fn: Callable[[], Any], clock_points: bool = False) -> Operation:
        op = Operation(name, fn, clock_points)
        op.thread.start()
        assert op.thread.ident is not None
        self._by_thread[op.thread.ident] = op
        op.release(None)  # the thread waits for nothing before its first call
        op.settle()
        if op.done:
            self._forget(op)
        return op

    def step(self, op: Operation, fault: str | None = None) -> Call | None:
        """Let ``op``'s pending call go (with ``fault``: "lost", "unsent", "crash" or an error
        code), and run the operation to its next call or its end. Returns the call."""
        call = op.pending
        if call is None:
            raise RuntimeError(f"{op.name} is not waiting at a call")
        op.release(fault)
        op.settle()
        if call.outcome is None and call.pseudo:
            call.outcome = "slept" if call.operation == "wait" else "read"
        self.trace.append(call)
        if op.done:
            self._forget(op)
        return call

    def _forget(self, op: Operation) -> None:
        # A finished thread's id may be reused by a thread this scheduler does not own.
        ident = op.thread.ident
        if ident is not None and self._by_thread.get(ident) is op:
            del self._by_thread[ident]

    def sleep_point(self) -> None:
        """A Waiter's pause, as a scheduling point of its own (see ``Waiter.sleep``)."""
        op = self._by_thread.get(threading.get_ident())
        if op is not None:
            op.arrive(Call(op.name, "wait"))

    def clock_point(self) -> None:
        """An operation's first read of its clock since its last call, as a scheduling point
        (for operations spawned with ``clock_points``): the run may let time pass before it. A
        process that stalls after that read, before its call is sent, is outside what the
        explorer places (design.md: the half-grace rule's residual window, a few seconds of one
        attempt's send); a stall before it, or after the call, is not."""
        op = self._by_thread.get(threading.get_ident())
        if op is not None and op.clock_points and not op.read_clock:
            op.arrive(Call(op.name, "clock"))

    # -- botocore hooks (in the operation's thread) ----------------------------------------------------
    def _before_send(self, request: Any, **_: Any) -> Any:
        op = self._by_thread.get(threading.get_ident())
        if op is None:
            return None
        call = Call(op.name, target_of(request), json.loads(request.body or b"{}"))
        fault = op.arrive(call)
        self._current[threading.get_ident()] = call
        if fault is None:
            return None
        call.outcome = f"fault:{fault}"
        if fault == "lost":
            call.applied = forward(request) == 200
            raise ReadTimeoutError(endpoint_url=request.url)
        call.applied = False
        if fault == "unsent":
            raise ConnectTimeoutError(endpoint_url=request.url)
        return fail(request, error=fault)

    def _after_call(self, http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        call = self._current.pop(threading.get_ident(), None)
        if call is None or call.outcome is not None:
            return
        status = int(getattr(http_response, "status_code", 0))
        call.applied = status == 200
        call.outcome = "ok" if status == 200 else str(parsed.get("Error", {}).get("Code", status))
        shown = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
        text = self._redact(json.dumps(shown, sort_keys=True, default=str))
        call.seen = hashlib.sha1(text.encode()).hexdigest()[:12]


class Race:
    """Hand-written interleavings for tests: start operations, move each call by call."""

    def __init__(self, *clients: Any) -> None:
        self.scheduler = Scheduler(*clients)
        self.ops: list[Operation] = []

    def __enter__(self) -> Race:
        return self

    def __exit__(self, *_: object) -> None:
        self.scheduler.close()

    def start(self, name: str, fn: Callable[[], Any]) -> Operation:
        op = self.scheduler.spawn(name, fn)
        self.ops.append(op)
        return op

    def step(self, op: Operation, times: int = 1, fault: str | None = None) -> list[Call]:
        calls = []
        for _ in range(times):
            if op.done:
                break
            call = self.scheduler.step(op, fault)
            if call is not None:
                calls.append(call)
        return calls

    def until(self, op: Operation, operation: str, *, count: int = 1) -> Call:
        """Step ``op`` until it has made its ``count``-th call of ``operation`` (and stop there)."""
        seen = 0
        while not op.done:
            call = self.scheduler.step(op)
            if call is not None and call.operation == operation:
                seen += 1
                if seen == count:
                    return call
        raise AssertionError(f"{op.name} ended before its call number {count} of {operation}")

    def next_call(self, op: Operation) -> str | None:
        return None if op.pending is None else op.pending.operation

    def finish(self, op: Operation) -> Any:
        while not op.done:
            self.scheduler.step(op)
        return op.result

    def run(self, name: str, fn: Callable[[], Any]) -> Operation:
        op = self.start(name, fn)
        self.finish(op)
        return op
