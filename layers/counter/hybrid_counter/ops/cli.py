"""hybrid-counter-ops: the operator's tool for the counters and the dead-letter queues.

Where to act: ``--stack NAME`` (a deployed stack's outputs), ``--local`` (the embedded runtime
started by ``make dev``, which writes .local/runtime.json), or ``--table`` with
``--operator-queue-url``/``--retry-queue-url`` (and the usual AWS environment); ``events tail``
needs only the quota events queue (``--events-queue-url``, or either of the first two).
Every command prints JSON (``events tail``: one JSON line per event). What each command is
for and when: docs/operator-guide.md "The operator queue and recounts".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from hybrid_counter.aws import RETRYING, SINGLE_ATTEMPT, Clients
from hybrid_counter.counting.ops import CensusOp, HealOp
from hybrid_counter.counting.records import PoisonRecord, ops_from_record
from hybrid_counter.counting.replay import ReplayFailed
from hybrid_counter.effects import Effects
from hybrid_counter.errors import ValidationError
from hybrid_counter.governance.usage_over import UsageOver
from hybrid_counter.keys import resource_key
from hybrid_counter.observability import Observability
from hybrid_counter.ops.clock import ClockUnknown, ServerClock, calibrate
from hybrid_counter.ops.events_tail import (
    LONG_POLLING,
    MAX_WAIT_SECONDS,
    QueueUnavailable,
    TailOptions,
    tail,
)
from hybrid_counter.ops.queues import FailureQueue, QueuedFailure
from hybrid_counter.runtime import Components
from hybrid_counter.settings import Settings

LOCAL_STATE = Path(".local/runtime.json")
DEFAULT_GRACE = 300  # the template's PendingGraceSeconds default


@dataclass
class Target:
    table_name: str
    queues: dict[str, str | None]
    clients: Clients
    sqs: Any
    grace_seconds: int = DEFAULT_GRACE
    events_queue_url: str | None = None  # QuotaEventsQueue, for `events tail`
    sqs_endpoint: str | None = None  # None: boto3's own (AWS, or AWS_ENDPOINT_URL_SQS)
    usage_thresholds: str | None = None  # the stack's UsageThresholds, for `top`


def resolve_target(args: argparse.Namespace) -> Target:
    endpoints: dict[str, str] = {}
    grace = int(os.environ.get("PENDING_GRACE_SECONDS", DEFAULT_GRACE))
    thresholds = os.environ.get("USAGE_THRESHOLDS")
    table = args.table or os.environ.get("TABLE_NAME")
    queues: dict[str, str | None] = {
        "operator": args.operator_queue_url or os.environ.get("OPERATOR_QUEUE_URL"),
        "retry": args.retry_queue_url or os.environ.get("RETRY_QUEUE_URL"),
    }
    events_queue = args.events_queue_url or os.environ.get("EVENTS_QUEUE_URL")
    if args.local:
        state_file = Path(args.local_state)
        if not state_file.is_file():
            raise SystemExit(f"{state_file} not found: is `make dev` running (from this directory)?")
        state = json.loads(state_file.read_text())
        # The local endpoints accept any credentials; region and keys just have to be present.
        for name, value in (
            ("AWS_DEFAULT_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
        ):
            os.environ.setdefault(name, value)
        endpoints = {"dynamodb": state["dynamodb_url"], "sqs": state["sqs_url"]}
        table = state["table_name"]
        queues = {
            "operator": state["queue_urls"]["OperatorQueue"],
            "retry": state["queue_urls"]["RetryQueue"],
        }
        events_queue = state.get("events_queue_url")
    elif args.stack:
        stack = boto3.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}
        grace = int(parameters.get("PendingGraceSeconds") or grace)
        thresholds = parameters.get("UsageThresholds") or thresholds
        table = outputs["TableName"]
        queues = {"operator": outputs.get("OperatorQueueUrl"), "retry": outputs.get("RetryQueueUrl")}
        events_queue = outputs.get("QuotaEventsQueueUrl")
    events_queue = args.events_queue_url or events_queue  # the flag wins over --local and --stack
    if not table and getattr(args, "needs_table", True):
        raise SystemExit("no table: use --stack, --local or --table (see --help)")

    def client(service: str, config: Any = RETRYING) -> Any:
        url = endpoints.get(service.replace("streams", ""))
        return boto3.client(service, endpoint_url=url, config=config)  # type: ignore[call-overload]

    clients = Clients(
        dynamodb=client("dynamodb"),
        dynamodb_single_attempt=client("dynamodb", SINGLE_ATTEMPT),
        streams=client("dynamodbstreams"),
    )
    return Target(
        table or "", queues, clients, client("sqs"), grace, events_queue, endpoints.get("sqs"), thresholds
    )


def _queue(target: Target, which: str) -> FailureQueue:
    url = target.queues.get(which)
    if not url:
        raise SystemExit(f"no URL for the {which} queue: use --stack, --local or --{which}-queue-url")
    return FailureQueue(target.sqs, url)


# Metrics off and logs on stderr: stdout carries the command's JSON only.
QUIET = Observability(emit_metrics=False, log_stream=sys.stderr)


def _parts(target: Target, clock: ServerClock | None = None) -> Components:
    """The domain's components; ``clock``: the server's, for commands that judge what is stale."""
    settings = Settings(table_name=target.table_name, pending_grace_seconds=target.grace_seconds)
    effects = Effects() if clock is None else Effects(clock=clock)
    return Components(settings, target.clients, QUIET, effects)


def _server_clock(target: Target) -> ServerClock:
    """What is stale is judged by DynamoDB's clock, not this machine's (ops/clock.py)."""
    try:
        return calibrate(target.clients.dynamodb, target.table_name)
    except ClockUnknown as error:
        raise SystemExit(f"refusing to judge what is stale: {error}") from None


def _check_grace(target: Target, seconds: float | None, force: bool, what: str) -> None:
    """Refuse a grace period shorter than PendingGraceSeconds unless --force."""
    if seconds is None or seconds >= target.grace_seconds or force:
        return
    raise SystemExit(
        f"refusing to {what} resources younger than PendingGraceSeconds ({target.grace_seconds} s): "
        "their create or delete may still be running. Counting a create whose admission is still on "
        "its way counts it in eventual before best_effort, which is harmless, but finishing one whose "
        "admission is about to be refused makes a resource live that the account had no room for; "
        "taking over a delete that is still running releases its slot twice (best_effort and "
        "eventual then undercount until a recount). Use --force if you know no request is in flight."
    )


def _find(queue: FailureQueue, message_id: str) -> QueuedFailure:
    failure = queue.find(message_id)
    if failure is None:
        raise SystemExit(f"message {message_id} is not in {queue.url}")
    return failure


def cmd_queue_list(target: Target, args: argparse.Namespace) -> Any:
    return [failure.summary() for failure in _queue(target, args.queue).peek(args.max)]


def cmd_queue_show(target: Target, args: argparse.Namespace) -> Any:
    failure = _find(_queue(target, args.queue), args.message_id)
    replayer = _parts(target).replayer
    shown: dict[str, Any] = {**failure.summary(), "body": failure.body}
    batch = failure.batch
    if batch is None:
        return {**shown, "records": "not an on-failure record of a DynamoDB stream"}
    try:
        records = replayer.read_range(batch)
    except Exception as error:
        return {**shown, "records": f"cannot read the range from the stream: {error}"}
    shown["records"] = [_describe_record(target, record) for record in records]
    return shown


def _describe_record(target: Target, record: dict[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {
        "sequence_number": record.get("dynamodb", {}).get("SequenceNumber"),
        "event": record.get("eventName"),
        "keys": record.get("dynamodb", {}).get("Keys"),
    }
    try:
        ops = ops_from_record(record)
    except PoisonRecord as error:
        return {**described, "poison": str(error)}
    described["operations"] = []
    for op in ops:
        if isinstance(op, HealOp | CensusOp):
            described["operations"].append({"operation": repr(op)})
            continue
        item = target.clients.dynamodb.get_item(
            TableName=target.table_name,
            Key=resource_key(op.account_id, op.resource_id, kind=op.kind),
            ConsistentRead=True,
        ).get("Item")
        described["operations"].append({"operation": repr(op), "resource_now": item})
    return described


def cmd_queue_replay(target: Target, args: argparse.Namespace) -> Any:
    queue = _queue(target, args.queue)
    replayer = _parts(target).replayer
    failures = queue.peek(1000) if args.all else [_find(queue, m) for m in args.message_ids]
    results = []
    for failure in failures:
        try:
            outcome = queue.replay(failure, replayer)
        except (ReplayFailed, LookupError) as error:
            results.append({"message_id": failure.message_id, "replayed": False, "error": str(error)})
            continue
        results.append(
            {
                "message_id": failure.message_id,
                "replayed": True,
                "deleted_from_queue": True,
                "records_read": outcome.records_read,
                "audit_requested_instead": outcome.audit_requested,
                "counted": outcome.report.counted,
                "deletes_finished": outcome.report.finished_deletes,
                "already_done": outcome.report.already_done,
            }
        )
    return results


def cmd_queue_delete(target: Target, args: argparse.Namespace) -> Any:
    queue = _queue(target, args.queue)
    failure = _find(queue, args.message_id)
    queue.delete(failure)
    return {"message_id": failure.message_id, "deleted": True}


def cmd_recount(target: Target, args: argparse.Namespace) -> Any:
    """One report per kind: the one asked for, or every kind the account has a counter for."""
    _check_grace(target, args.finish_pending_older_than, args.force, "count")
    clock = _server_clock(target)
    recounter = _parts(target, clock).recounter
    kinds = [args.kind] if args.kind else recounter.kinds_of(args.account_id)
    if args.continuation and len(kinds) != 1:
        raise SystemExit("--continuation goes on with one kind's recount: give its --kind")
    reports = [
        recounter.recount(
            args.account_id,
            fix=args.fix,
            finish_older_than=args.finish_pending_older_than,
            continuation=args.continuation,
            kind=kind,
        ).to_json()
        for kind in kinds
    ]
    return {"kinds": reports, "dry_run": not args.fix, "server_clock": clock.describe()}


def cmd_org_recount(target: Target, args: argparse.Namespace) -> Any:
    """One report per kind of the organization: its counter items against its members' resources."""
    clock = _server_clock(target)
    recounter = _parts(target, clock).org_recounter
    kinds = [args.kind] if args.kind else recounter.kinds_of(args.org_id)
    reports = [recounter.recount(args.org_id, kind=kind, fix=args.fix).to_json() for kind in kinds]
    return {"kinds": reports, "dry_run": not args.fix, "server_clock": clock.describe()}


def cmd_pending(target: Target, args: argparse.Namespace) -> Any:
    keys = _parts(target, _server_clock(target)).sweeper.pending_keys(args.older_than)
    return [{"pk": k["pk"]["S"], "sk": k["sk"]["S"], "state": k.get("state", {}).get("S")} for k in keys]


def cmd_sweep(target: Target, args: argparse.Namespace) -> Any:
    _check_grace(target, args.older_than, args.force, "sweep")
    clock = _server_clock(target)
    return {
        **_parts(target, clock).sweeper.sweep(args.older_than).summary(),
        "server_clock": clock.describe(),
    }


def cmd_audit(target: Target, args: argparse.Namespace) -> Any:
    if args.request_only:
        _parts(target).sweeper.request_audit("asked for by an operator")
        return {"requested": True}
    clock = _server_clock(target)
    sweeper = _parts(target, clock).sweeper
    sweeper.request_audit("asked for by an operator")
    return {**sweeper.audit().summary(), "server_clock": clock.describe()}


def cmd_heal(target: Target, args: argparse.Namespace) -> Any:
    healer = _parts(target).healer
    if args.all:
        return healer.heal_all(args.continuation, parallelism=args.parallelism).to_json()
    counters = _parts(target).resources.counters
    return [
        healer.heal_account(account, kind=kind).__dict__
        for account in args.account_ids
        for kind in ([args.kind] if args.kind else sorted(counters.read_all(account)))
    ]


def cmd_top(target: Target, args: argparse.Namespace) -> Any:
    """Who is at or over a threshold, newest crossing first: what GET /usage/over answers, read
    from the same indexes with the operator's IAM on the table (governance/usage_over.py)."""
    text = args.thresholds or target.usage_thresholds or "80,100"
    try:
        thresholds = Settings.from_env({"TABLE_NAME": target.table_name, "USAGE_THRESHOLDS": text})
    except RuntimeError as error:
        raise SystemExit(f"top: {error}") from None
    listing = UsageOver(target.table_name, thresholds.usage_thresholds, target.clients)
    try:
        page = listing.page(
            threshold=args.threshold, kind=args.kind, page_size=args.limit, next_token=args.next_token
        )
    except ValidationError as error:
        raise SystemExit(f"top: {error}") from None
    return {"items": [row.to_json() for row in page.rows], "next_token": page.next_token}


def cmd_events_tail(target: Target, args: argparse.Namespace) -> None:
    """Streams its own JSON lines (nothing for main() to print)."""
    if not target.events_queue_url:
        raise SystemExit(
            "no URL for the quota events queue: use --stack, --local or --events-queue-url "
            "(a stack deployed before quota events has no QuotaEventsQueueUrl output)"
        )
    wait = args.wait if args.wait is not None else (MAX_WAIT_SECONDS if args.follow else 2)
    try:
        options = TailOptions(max_events=args.max, wait_seconds=wait, follow=args.follow)
    except ValueError as error:
        raise SystemExit(f"events tail: {error}") from None
    try:
        reopen = (lambda: _local_events_queue(args)) if args.local else None
        tail(*_events_queue(target.sqs_endpoint, target.events_queue_url), options, reopen=reopen)
    except (BotoCoreError, ClientError) as error:
        raise SystemExit(f"events tail: {type(error).__name__}: {error}") from None
    except KeyboardInterrupt:
        pass  # Ctrl-C before the tail began: as quiet as during it


def _events_queue(sqs_endpoint: str | None, queue_url: str) -> tuple[Any, str]:
    """A client for long polls (its read timeout outlasts them), and the queue's URL."""
    return boto3.client("sqs", endpoint_url=sqs_endpoint, config=LONG_POLLING), queue_url


def _local_events_queue(args: argparse.Namespace) -> tuple[Any, str]:
    """The local queue after a failure: a restarted `make dev` listens on new ports, so read its state anew."""
    try:
        state = json.loads(Path(args.local_state).read_text())
        sqs_endpoint, queue_url = state["sqs_url"], args.events_queue_url or state["events_queue_url"]
    except (OSError, ValueError, KeyError, TypeError):
        raise QueueUnavailable(
            f"waiting for `make dev` ({args.local_state} is missing or incomplete)"
        ) from None
    if not queue_url:
        raise QueueUnavailable("the local runtime has no quota events queue")
    return _events_queue(sqs_endpoint, queue_url)


def _recount_commands(commands: Any) -> None:
    recount = commands.add_parser("recount", help="count an account from its resources; report or fix drift")
    recount.add_argument("account_id")
    recount.add_argument("--kind", help="one kind of resource (default: every kind the account has)")
    recount.add_argument("--fix", action="store_true", help="write the corrections (default: dry run)")
    recount.add_argument(
        "--finish-pending-older-than",
        type=float,
        metavar="SECONDS",
        help="also count live resources the stream path never counted, created before this (with --fix)",
    )
    recount.add_argument("--continuation", help="go on from where an earlier run stopped")
    recount.add_argument(
        "--force", action="store_true", help="allow a grace shorter than PendingGraceSeconds"
    )
    recount.set_defaults(handler=cmd_recount)

    org_recount = commands.add_parser(
        "org-recount", help="count an organization from its members' resources; report or fix drift"
    )
    org_recount.add_argument("org_id")
    org_recount.add_argument("--kind", help="one kind of resource (default: every kind it has a counter for)")
    org_recount.add_argument(
        "--fix",
        action="store_true",
        help="write the corrections, after finishing what is stuck past the grace period (default: dry run)",
    )
    org_recount.set_defaults(handler=cmd_org_recount)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="hybrid-counter-ops", description=__doc__)
    where = root.add_argument_group("where")
    where.add_argument("--stack", help="CloudFormation stack name (reads its outputs)")
    where.add_argument("--local", action="store_true", help="the embedded runtime started by `make dev`")
    where.add_argument(
        "--local-state", default=str(LOCAL_STATE), help="its state file (default: %(default)s)"
    )
    where.add_argument("--table", help="table name")
    where.add_argument("--operator-queue-url")
    where.add_argument("--retry-queue-url")
    where.add_argument("--events-queue-url", help="the quota events queue (output QuotaEventsQueueUrl)")
    commands = root.add_subparsers(dest="command", required=True)

    queue = commands.add_parser("queue", help="the operator queue (or, with --queue retry, the retry queue)")
    queue_commands = queue.add_subparsers(dest="queue_command", required=True)
    for name, helptext in [
        ("list", "list messages without consuming them"),
        ("show", "one message, with its stream records read back and what each would do"),
        ("replay", "apply the failed batch again; delete the message when that succeeds"),
        ("delete", "drop a message (after the account has been recounted)"),
    ]:
        sub = queue_commands.add_parser(name, help=helptext)
        sub.add_argument("--queue", choices=["operator", "retry"], default="operator")
        if name == "list":
            sub.add_argument("--max", type=int, default=100)
            sub.set_defaults(handler=cmd_queue_list)
        elif name == "show":
            sub.add_argument("message_id")
            sub.set_defaults(handler=cmd_queue_show)
        elif name == "replay":
            sub.add_argument("message_ids", nargs="*")
            sub.add_argument("--all", action="store_true")
            sub.set_defaults(handler=cmd_queue_replay)
        else:
            sub.add_argument("message_id")
            sub.set_defaults(handler=cmd_queue_delete)

    _recount_commands(commands)
    _maintenance_commands(commands)

    top = commands.add_parser("top", help="who is at or over a usage threshold, newest crossing first")
    top.add_argument("--threshold", type=int, help="a configured threshold (default: the lowest)")
    top.add_argument("--kind", help="one kind (default: every kind)")
    top.add_argument("--limit", type=int, default=20, help="rows per page, 1-100 (default: %(default)s)")
    top.add_argument("--next-token", help="the next page of an earlier run (its next_token)")
    top.add_argument(
        "--thresholds",
        help="the stack's UsageThresholds (default: the stack's with --stack, else $USAGE_THRESHOLDS, else 80,100)",
    )
    top.set_defaults(handler=cmd_top)

    events = commands.add_parser("events", help='quota events (docs/operator-guide.md "Events")')
    events_commands = events.add_subparsers(dest="events_command", required=True)
    events_tail = events_commands.add_parser(
        "tail", help="print the events QuotaEventsQueue received, one JSON line each, and delete them"
    )
    events_tail.add_argument("--max", type=int, default=None, help="stop after this many events")
    events_tail.add_argument(
        "--wait",
        type=int,
        default=None,
        metavar="SECONDS",
        help=f"long polling per receive, 0-{MAX_WAIT_SECONDS} (default 2, following {MAX_WAIT_SECONDS})",
    )
    events_tail.add_argument("--follow", action="store_true", help="keep waiting for events until Ctrl-C")
    events_tail.set_defaults(handler=cmd_events_tail, needs_table=False)
    return root


def _maintenance_commands(commands: Any) -> None:
    """pending, sweep, audit and heal: what the scheduled sweeper does, on demand."""
    pending = commands.add_parser("pending", help="resources still waiting for the stream path")
    pending.add_argument("--older-than", type=float, default=0.0, metavar="SECONDS")
    pending.set_defaults(handler=cmd_pending)

    sweep = commands.add_parser("sweep", help="finish what failure paths left in PendingIndex")
    sweep.add_argument("--older-than", type=float, default=None, metavar="SECONDS")
    sweep.add_argument("--force", action="store_true", help="allow a grace shorter than PendingGraceSeconds")
    sweep.set_defaults(handler=cmd_sweep)

    audit = commands.add_parser("audit", help="scan the whole table and finish what the stream path lost")
    audit.add_argument("--request-only", action="store_true", help="leave it to the scheduled sweeper")
    audit.set_defaults(handler=cmd_audit)

    heal = commands.add_parser("heal", help="raise drifted best-effort counters to the eventual counter")
    heal.add_argument("account_ids", nargs="*")
    heal.add_argument("--kind", help="one kind of resource (default: every kind each account has)")
    heal.add_argument("--all", action="store_true")
    heal.add_argument("--parallelism", type=int, default=8)
    heal.add_argument("--continuation", help="go on from where an earlier --all stopped")
    heal.set_defaults(handler=cmd_heal)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    target = resolve_target(args)
    result = args.handler(target, args)
    if result is not None:  # None: the command printed its own output (events tail)
        json.dump(result, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
