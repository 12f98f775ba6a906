"""One Lambda execution environment: a child process that imports a handler and runs it.

Started by `localrun.functions.invoke` as `python lambda_worker.py CODE_DIR MODULE FUNCTION REQ_FD RESP_FD
[LAYER_PATH ...]`. Like the Lambda Python runtime, it puts the code directory and then the
layers' directories first on `sys.path`, imports the handler module by name once (the init
phase), then runs one invocation at a time for as long as the parent keeps it. Nothing is
shared with other environments: not module state, not class attributes of the libraries
the handler uses.

Requests and answers are JSON lines on two dedicated pipes, so the handler's own stdout
and stderr (its logs) pass straight through to the parent's, as Lambda's go to CloudWatch.
Answers: `{"ready": true, "initMs": ...}` or `{"initError": ...}` once, then
`{"result": ..., "durationMs": ...}` or `{"error": ...}` per request, errors in Lambda's shape
(errorType, errorMessage, stackTrace); the durations are what Lambda reports as Init Duration
(the handler module's import) and Duration (the handler's run). Standard library only: it
runs before anything of the project is imported, and on a clean interpreter in built mode.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, BinaryIO

_FIELDS = (
    "function_name",
    "function_version",
    "invoked_function_arn",
    "memory_limit_in_mb",
    "aws_request_id",
    "log_group_name",
    "log_stream_name",
)


class LambdaContext:
    """The attributes and method of the Lambda Python runtime's context object.

    Built from plain fields so that it crosses the process boundary as JSON; the parent
    (`localrun.functions.invoke`) builds the same class for the wrappers it runs.
    """

    def __init__(self, fields: dict[str, Any]) -> None:
        self.function_name = fields["function_name"]
        self.function_version = fields["function_version"]
        self.invoked_function_arn = fields["invoked_function_arn"]
        self.memory_limit_in_mb = fields["memory_limit_in_mb"]
        self.aws_request_id = fields["aws_request_id"]
        self.log_group_name = fields["log_group_name"]
        self.log_stream_name = fields["log_stream_name"]
        self.identity = None
        self.client_context = None
        self.tenant_id = None
        self._deadline = time.monotonic() + fields["remaining_ms"] / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))

    def fields(self, remaining_ms: int) -> dict[str, Any]:
        """The fields to rebuild this context elsewhere, with a fresh clock."""
        return {**{name: getattr(self, name) for name in _FIELDS}, "remaining_ms": remaining_ms}


def _error(error_type: str, message: str, stack: list[str] | None = None) -> dict[str, Any]:
    return {"errorType": error_type, "errorMessage": message, "stackTrace": stack or []}


def _describe(error: BaseException) -> dict[str, Any]:
    stack = traceback.format_list(traceback.extract_tb(error.__traceback__))
    return _error(type(error).__name__, str(error), stack)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _send(channel: BinaryIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message).encode() + b"\n")
    channel.flush()


def _record_aws_calls() -> None:
    """With LOCALRUN_CALL_LOG set, record the handler's AWS calls (localrun/functions/call_recorder_hook.py).

    Loaded by path, not imported: this interpreter may have neither localrun nor botocore.
    """
    directory = os.environ.get("LOCALRUN_CALL_LOG")
    if not directory:
        return
    spec = importlib.util.spec_from_file_location(
        "localrun_call_recorder_hook", Path(__file__).with_name("call_recorder_hook.py")
    )
    assert spec is not None
    assert spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook.install(directory, os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "unknown"))


def _load(code_dir: str, module_name: str, function_name: str, layer_paths: list[str]) -> Any:
    """The handler function, or None when the module has no such function."""
    sys.path[0:0] = [code_dir, *layer_paths]
    _record_aws_calls()  # after the code's paths are set, before anything it imports creates a client
    module = importlib.import_module(module_name)
    handler = getattr(module, function_name, None)
    return handler if callable(handler) else None


def main(argv: list[str]) -> int:
    code_dir, module_name, function_name, request_fd, response_fd, *layer_paths = argv
    requests = os.fdopen(int(request_fd), "rb")
    responses = os.fdopen(int(response_fd), "wb")
    init_started = time.perf_counter()
    try:
        handler = _load(code_dir, module_name, function_name, layer_paths)
    except Exception as error:
        traceback.print_exc()
        _send(responses, {"initError": _describe(error)})
        return 1
    if handler is None:
        message = f"{module_name} has no function {function_name}"
        _send(responses, {"initError": _error("Runtime.HandlerNotFound", message)})
        return 1
    _send(responses, {"ready": True, "initMs": _ms_since(init_started)})

    for line in requests:
        request = json.loads(line)
        started = time.perf_counter()
        try:
            result = handler(request["event"], LambdaContext(request["context"]))
        except Exception as error:
            # The Lambda runtime logs an unhandled error before reporting it.
            print(f"[ERROR] {type(error).__name__}: {error}", file=sys.stderr)
            traceback.print_exc()
            _send(responses, {"error": _describe(error)})
            continue
        duration = _ms_since(started)
        try:
            answer = json.dumps({"result": result, "durationMs": duration}).encode() + b"\n"
        except (TypeError, ValueError) as error:
            message = f"the response is not JSON serialisable ({error})"
            _send(responses, {"error": _error("Runtime.MarshalError", message)})
            continue
        responses.write(answer)
        responses.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
