"""The mutation catalogue stays runnable: every patch it names applies to the code as it is.

A patch that no longer applies reports ERROR only when someone runs the (slow, separate)
mutation suite; here it fails at once, beside the change that made it stale.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

MUTATIONS = Path(__file__).resolve().parents[1] / "mutations"
ROOT = MUTATIONS.parents[1]
ENTRIES = tomllib.loads((MUTATIONS / "catalogue.toml").read_text())["mutation"]


@pytest.mark.parametrize("patch", sorted({entry["patch"] for entry in ENTRIES}))
def test_every_catalogued_mutation_applies_to_the_current_code(patch: str) -> None:
    # git apply --check reads the working tree and writes nothing
    checked = subprocess.run(
        ["git", "apply", "--check", "--whitespace=nowarn", str(MUTATIONS / patch)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, f"{patch} no longer applies; regenerate it: {checked.stderr}"
