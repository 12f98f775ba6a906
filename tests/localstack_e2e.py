"""`make localstack-e2e`: start LocalStack, deploy the built stack to it, run the e2e suite there, tear down.

    python -m tests.localstack_e2e --preflight   # what `make localstack-e2e` checks before building
    python -m tests.localstack_e2e               # after `make sam-build`

Needs a Docker engine with the Compose plugin, and LOCALSTACK_AUTH_TOKEN: since LocalStack
2026.03.0 every image starts only with a token, and this stack uses HTTP APIs (API Gateway v2)
and a Lambda layer, which LocalStack does not offer on its free plan (docs/local-runtime.md, "LocalStack").

Deployment uses the project's own SAM CLI pointed at LocalStack through AWS_ENDPOINT_URL
(LocalStack deprecated its `samlocal` wrapper); the suite runs with HC_E2E_TARGET=stack, so
the tests that need the embedded runtime (direct table writes, wrapped functions) are skipped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from localrun.stack.template import PROJECT_ROOT, REGION
from tests.docker_env import compose_unavailable, docker_unavailable

SAM = PROJECT_ROOT / ".tools" / "bin" / "sam"
COMPOSE = ["docker", "compose", "-f", str(PROJECT_ROOT / "docker-compose.yml")]
ENDPOINT = "http://localhost.localstack.cloud:4566"
STACK = "hybrid-counter"


def preflight() -> str | None:
    """Why LocalStack cannot be started here, or None."""
    problem = docker_unavailable()
    if problem is not None:
        return f"no Docker engine is reachable ({problem}); LocalStack runs as a container"
    problem = compose_unavailable()
    if problem is not None:
        return f"docker compose is not available ({problem})"
    if not os.environ.get("LOCALSTACK_AUTH_TOKEN"):
        return (
            "LOCALSTACK_AUTH_TOKEN is not set: LocalStack images start only with an auth token since "
            "2026.03.0, and this stack needs a plan with HTTP APIs (API Gateway v2) and Lambda layers"
        )
    return None


def run() -> int:
    aws = {
        **os.environ,
        "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "SAM_CLI_TELEMETRY": "0",
    }
    subprocess.run([*COMPOSE, "up", "-d", "--wait"], check=True, timeout=600)
    try:
        subprocess.run(
            [
                str(SAM),
                "deploy",
                "--config-env",
                "localstack",
                "--no-confirm-changeset",
                "--no-fail-on-empty-changeset",
            ],
            check=True,
            timeout=1800,
            env=aws,
            cwd=PROJECT_ROOT,
        )
        suite = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/e2e"],
            timeout=3600,
            env={**aws, "HC_E2E_TARGET": "stack", "HC_STACK_NAME": STACK},
            cwd=PROJECT_ROOT,
            check=False,
        )
        return suite.returncode
    finally:
        subprocess.run([*COMPOSE, "down", "-v"], check=False, timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preflight", action="store_true", help="only check Docker, Compose and the token")
    args = parser.parse_args()
    problem = preflight()
    if problem is not None:
        print(f"make localstack-e2e: {problem}. Nothing was started.", file=sys.stderr)
        return 2
    return 0 if args.preflight else run()


if __name__ == "__main__":
    sys.exit(main())
