"""Whether a Docker engine can be used from here: the commands that need one say why not, up front."""

from __future__ import annotations

import shutil
import subprocess


def docker_unavailable() -> str | None:
    """Why no Docker engine is reachable (the docker CLI's own words), or None when one is."""
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "docker info did not answer within 60 s"
    if done.returncode == 0 and done.stdout.strip():
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "docker info failed"


def compose_unavailable() -> str | None:
    """Why `docker compose` (the Compose v2 plugin) cannot run, or None."""
    done = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[0] if lines else "docker compose is not available"
