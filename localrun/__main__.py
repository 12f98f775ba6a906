"""`hybrid-counter-local` (`make dev`): run the whole app locally in the foreground.

Options come from the command line or the environment: PORT (default 3000),
LOCALRUN_NO_SCHEDULES=1, LOCALRUN_PARAMS="Key=Value,Key=Value", LOCALRUN_BUILT=1 (run the
`sam build` output on a clean python3.12; `make dev-built`), LOCALRUN_PYTHON (that
interpreter). Ctrl-C (SIGINT) or SIGTERM stops everything cleanly and exits 0: at once while
running, right after `start()` while starting; more signals while it stops, or while the interpreter
shuts down after, change nothing (`localrun.stop_signal`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from localrun.errors import LocalRunError
from localrun.gateway.token_cli import banner_lines
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.stop_signal import StopRequest, wait_for_stop


def _parameter(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected Key=Value, not {text!r}")
    return key.strip(), value.strip()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="hybrid-counter-local",
        description="Run hybrid-counter locally: DynamoDB Local + moto (SQS, EventBridge) + the handlers in Lambda-like execution environments.",
    )
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("PORT", "3000")), help="HTTP port (PORT)"
    )
    parser.add_argument("--stack-name", default=os.environ.get("LOCALRUN_STACK_NAME", "hybrid-counter-local"))
    parser.add_argument(
        "--param",
        action="append",
        type=_parameter,
        default=[
            _parameter(item) for item in os.environ.get("LOCALRUN_PARAMS", "").split(",") if item.strip()
        ],
        metavar="KEY=VALUE",
        help="template parameter override (repeatable; env LOCALRUN_PARAMS=K=V,K=V)",
    )
    parser.add_argument(
        "--no-schedules",
        action="store_true",
        default=os.environ.get("LOCALRUN_NO_SCHEDULES", "") not in {"", "0", "false"},
        help="do not run Schedule events",
    )
    parser.add_argument(
        "--schedule-interval",
        type=float,
        default=None,
        help="seconds between scheduled runs (default: the rate)",
    )
    parser.add_argument(
        "--issuer-port",
        type=int,
        default=int(os.environ.get("ISSUER_PORT", "0")),
        help="port of the local OIDC issuer (ISSUER_PORT; default: a free one)",
    )
    parser.add_argument(
        "--built",
        action="store_true",
        default=os.environ.get("LOCALRUN_BUILT", "") not in {"", "0", "false"},
        help="run the sam build output (.aws-sam/build) on a clean python3.12, as Lambda would",
    )
    parser.add_argument(
        "--python",
        type=Path,
        default=Path(os.environ["LOCALRUN_PYTHON"]) if os.environ.get("LOCALRUN_PYTHON") else None,
        help="the clean python3.12 for --built (env LOCALRUN_PYTHON; default: the virtualenv's base)",
    )
    parser.add_argument("--log-level", default=os.environ.get("LOCALRUN_LOG_LEVEL", "INFO"))
    return parser.parse_args(argv)


def banner(runtime: LocalRuntime) -> str:
    lines = [
        "",
        "hybrid-counter is running locally",
        f"  API             {runtime.api_url}",
        f"  DynamoDB Local  {runtime.dynamodb_url}",
        f"  SQS (moto)      {runtime.sqs_url}",
        f"  EventBridge     {runtime.events_url}  (moto)",
    ]
    lines += [f"  table           {name}  ({logical_id})" for logical_id, name in runtime.table_names.items()]
    lines += [f"  queue           {url}  ({logical_id})" for logical_id, url in runtime.queue_urls.items()]
    lines += [f"  event bus       {name}  ({arn})" for name, arn in runtime.event_bus_arns.items()]
    if EVENTS_QUEUE in runtime.queue_urls:
        lines.append("  quota events    .venv/bin/hybrid-counter-ops --local events tail --follow")
    lines += banner_lines(runtime.auth_description(), runtime.api_url)
    lines += ["Ctrl-C to stop", ""]
    return "\n".join(lines)


STATE_FILE = Path(".local/runtime.json")
EVENTS_QUEUE = "QuotaEventsQueue"  # where the quota events' rule delivers (template.yaml)
log = logging.getLogger("localrun.main")


def write_state(runtime: LocalRuntime, path: Path = STATE_FILE) -> None:
    """Where everything runs, for `hybrid-counter-ops --local` (removed again on stop)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "api_url": runtime.api_url,
        "dynamodb_url": runtime.dynamodb_url,
        "sqs_url": runtime.sqs_url,
        "table_name": runtime.table_name,
        "stream_arn": runtime.stream_arn,
        "queue_urls": runtime.queue_urls,
        "events_url": runtime.events_url,
        "event_bus_name": event_bus_name(runtime),
        "events_queue_url": runtime.queue_urls.get(EVENTS_QUEUE),
        "auth": runtime.auth_description(),  # for hybrid-counter-token
    }
    path.write_text(json.dumps(state, indent=2))


def event_bus_name(runtime: LocalRuntime) -> str | None:
    """The bus the functions publish quota events on (their EVENT_BUS_NAME), if they do."""
    for logical_id in runtime.resources.functions:
        name = runtime.function_environment(logical_id).get("EVENT_BUS_NAME")
        if name:
            return name
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # Installed before anything starts: a signal during start() lets start() finish, then stops.
    stop = StopRequest()
    stop.install()
    log.info("starting (Ctrl-C or SIGTERM stops everything)")
    options = RuntimeOptions(
        port=args.port,
        stack_name=args.stack_name,
        parameter_overrides=dict(args.param),
        start_schedules=not args.no_schedules,
        schedule_interval_seconds=args.schedule_interval,
        issuer_port=args.issuer_port,
        built=args.built,
        python=args.python,
    )
    runtime = LocalRuntime(options)
    try:
        runtime.start()
        write_state(runtime)
        print(banner(runtime), flush=True)
        print(
            f"operator tool: .venv/bin/hybrid-counter-ops --local queue list   (state in {STATE_FILE})\n",
            flush=True,
        )
        wait_for_stop(stop)
    except LocalRunError as error:
        print(f"hybrid-counter-local: {error}", file=sys.stderr)
        return 1
    finally:
        stop.ignore_from_now_on()  # first: a stop() that raises still exits with its code, not -15
        runtime.stop()
        STATE_FILE.unlink(missing_ok=True)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
