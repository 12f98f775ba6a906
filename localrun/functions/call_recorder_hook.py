"""Records every AWS API call made in this process, for the least-privilege check.

Standard library only (botocore is used if it can be imported): `lambda_worker` loads this
file by path inside an execution environment, which may run on a clean interpreter where
neither localrun nor botocore is installed. There the environment writes one
`{"recorder": "unavailable"}` line, so a check over its calls fails instead of passing on
nothing.

Each call becomes one JSON line in `<directory>/<principal>-<pid>.jsonl`: the service's
signing name (the IAM prefix), the operation, and the parameters that name resources
(tables, indexes, streams, queues, the items of a transaction, the buses of PutEvents' entries).
Shard iterators are opaque, so the stream each one came from is remembered from the calls
that handed it out.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

ENVIRONMENT_VARIABLE = "LOCALRUN_CALL_LOG"
_NAMING_PARAMETERS = ("TableName", "IndexName", "StreamArn", "QueueUrl", "QueueName")


class CallLog:
    def __init__(self, directory: str, principal: str, origin: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{principal}-{origin}-{os.getpid()}.jsonl")
        self.principal = principal
        self.origin = origin
        self._iterators: dict[str, str] = {}
        self._lock = threading.Lock()
        # Line-buffered and kept open for the process's life: each call costs one write.
        self._sink = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"principal": self.principal, "origin": self.origin, **record}) + "\n"
        with self._lock:
            self._sink.write(line)

    def before_call(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if "StreamArn" in params:  # the stream whose iterators this call's answer hands out
            context["localrun_stream_arn"] = params["StreamArn"]
        elif "ShardIterator" in params:
            context["localrun_stream_arn"] = self._iterators.get(str(params["ShardIterator"]))
        service = model.service_model.signing_name
        named = {name: params[name] for name in _NAMING_PARAMETERS if name in params}
        if service == "events" and "Entries" in params:  # PutEvents: each entry names its bus
            named["EventBusNames"] = sorted(
                {str(entry.get("EventBusName") or "default") for entry in params["Entries"]}
            )
        if "ShardIterator" in params:
            named["StreamArn"] = self._iterators.get(str(params["ShardIterator"]), "unknown-stream")
        if "TransactItems" in params:
            named["TransactItems"] = [
                [kind, body.get("TableName")]
                for item in params["TransactItems"]
                for kind, body in item.items()
            ]
        if "RequestItems" in params:
            named["RequestItems"] = sorted(params["RequestItems"])
        self.write({"service": service, "operation": model.name, "params": named})

    def after_call(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        stream = context.get("localrun_stream_arn")
        for key in ("ShardIterator", "NextShardIterator"):
            if stream and parsed.get(key):
                with self._lock:
                    self._iterators[str(parsed[key])] = stream

    def register(self, events: Any) -> None:
        events.register("before-parameter-build", self.before_call)
        events.register("after-call", self.after_call)


def install(directory: str, principal: str) -> None:
    """Record the calls of every botocore session this process creates from now on."""
    log = CallLog(directory, principal, "function")
    try:
        import botocore.session  # noqa: PLC0415 - optional: absent on a clean interpreter
    except ImportError:
        log.write({"recorder": "unavailable"})
        return
    original = botocore.session.Session.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        log.register(self)

    botocore.session.Session.__init__ = init  # type: ignore[method-assign]
    log.write({"recorder": "installed"})
