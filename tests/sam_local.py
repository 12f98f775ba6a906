"""`make sam-local`: every function with every file in events/ through `sam local invoke`.

    python -m tests.sam_local --check-docker   # exit 2, saying why, when no Docker engine is reachable
    python -m tests.sam_local                  # after `make sam-build`
    python -m tests.sam_local --dry-run        # prepare everything, print the commands (no Docker needed)

DynamoDB Local and moto are started and the stack's tables and queues created by localrun;
each function then runs in SAM's Lambda container from the build, with its environment
given through `--env-vars`: its own variables with the local names, and the endpoint URLs
of the host's DynamoDB. Each answer is checked (tests/sample_events.py).

`sam local invoke` only sets variables the template declares, and the deployed template
must not declare local endpoints; so the template used here is the built one plus
declarations of the endpoint variables (written to .aws-sam/sam-local/template.yaml):
the same code, layer and settings otherwise. On Linux the containers share the host's
network (`--docker-network host`) and reach DynamoDB Local on 127.0.0.1; elsewhere they use
host.docker.internal.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from localrun.functions.built import BUILD_DIR, built_template
from localrun.functions.environment import client_variables
from localrun.runtime import LocalRuntime, RuntimeOptions
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.template import PROJECT_ROOT, REGION
from tests.docker_env import docker_unavailable
from tests.sample_events import SAMPLE_EVENTS, missing_events

SAM = PROJECT_ROOT / ".tools" / "bin" / "sam"
WORK_DIR = PROJECT_ROOT / ".aws-sam" / "sam-local"
# Declared in the variant template so that --env-vars may set them (never in the deployed one).
LOCAL_ONLY = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_SQS")


def variant_template(built: Path, target: Path) -> Path:
    """The built template with the local endpoint variables declared and absolute code paths."""
    document: dict[str, Any] = load_yaml(built)
    variables = document.setdefault("Globals", {}).setdefault("Function", {}).setdefault("Environment", {})
    declared = variables.setdefault("Variables", {})
    for name in (*LOCAL_ONLY, "POWERTOOLS_TRACE_DISABLED"):
        declared.setdefault(name, "")
    for resource in document["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = str((built.parent / properties[key]).resolve())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def environment_file(runtime: LocalRuntime, host: str, target: Path) -> Path:
    endpoints = client_variables(runtime.dynamodb_url, runtime.sqs_url)
    local = {name: endpoints[name].replace("127.0.0.1", host) for name in LOCAL_ONLY}
    values = {
        logical_id: {
            **runtime.function(logical_id).spec.resolved_environment(
                runtime.template.resolver.with_resources(runtime.resources.values())
            ),
            **local,
            "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon next to the container
        }
        for logical_id in runtime.template.functions
    }
    target.write_text(json.dumps(values, indent=2))
    return target


def invoke_command(
    function: str, event: Path, template: Path, env_vars: Path, network: list[str]
) -> list[str]:
    command = [str(SAM), "local", "invoke", function, "-t", str(template), "-e", str(event)]
    return [*command, "--env-vars", str(env_vars), "--region", REGION, *network]


def invoke(command: list[str]) -> Any:
    function = command[3]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise AssertionError(
            f"sam local invoke {function} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        raise AssertionError(f"sam local invoke {function} printed no answer:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def run(dry_run: bool = False) -> int:
    assert missing_events() == set(), f"events without a sample check: {missing_events()}"
    built = built_template(BUILD_DIR)
    linux = platform.system() == "Linux"
    host = "127.0.0.1" if linux else "host.docker.internal"
    network = ["--docker-network", "host"] if linux else ["--add-host", "host.docker.internal:host-gateway"]
    options = RuntimeOptions.driven("hybrid-counter-sam-local", built=True)
    failures = 0
    with LocalRuntime(options) as runtime:
        template = variant_template(built, WORK_DIR / "template.yaml")
        env_vars = environment_file(runtime, host, WORK_DIR / "env.json")
        for sample in SAMPLE_EVENTS:
            event = PROJECT_ROOT / "events" / sample.file
            command = invoke_command(sample.function, event, template, env_vars, network)
            if dry_run:
                print(" ".join(command))
                continue
            try:
                sample.check(invoke(command))
            except AssertionError as error:
                failures += 1
                print(f"FAIL {sample.function} {sample.file}: {error}", flush=True)
            else:
                print(f"ok   {sample.function} {sample.file}", flush=True)
    if not dry_run:
        print(f"{len(SAMPLE_EVENTS) - failures} of {len(SAMPLE_EVENTS)} sample events answered as expected")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check-docker", action="store_true", help="only check that a Docker engine is reachable"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="prepare, print the commands; no Docker needed"
    )
    args = parser.parse_args()
    if args.dry_run:
        return run(dry_run=True)
    problem = docker_unavailable()
    if problem is not None:
        print(
            f"make sam-local: no Docker engine is reachable ({problem}). sam local invoke runs each "
            "function in a Lambda container image, so nothing was invoked. Start Docker and run it again.",
            file=sys.stderr,
        )
        return 2
    return 0 if args.check_docker else run()


if __name__ == "__main__":
    sys.exit(main())
