"""The documents' walkthroughs run as written and answer what they show: the README's shell
walkthrough and its Python snippet, the client page's example, and the user guide's recipe
(seats per plan, an override, a warning at 80 %). Each is read from its page and run, as a
reader would from the project's root, against a local runtime of its own (the one `make dev`
runs; its state file is what `hybrid-counter-token` and `hybrid-counter-ops --local` read)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localrun.__main__ import write_state
from localrun.runtime import LocalRuntime, RuntimeOptions

pytestmark = pytest.mark.e2e

PROJECT = Path(__file__).resolve().parents[2]
DOCUMENTED_API = "http://127.0.0.1:3000"
# What differs on every run: ids the service makes and clocks.
VOLATILE = frozenset({"resource_id", "created_at", "at", "change_id", "event_id", "time"})


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A folder laid out as the project's root for the documented commands (its .venv, the
    runtime's state file), and the runtime's API URL. The walkthroughs use ids of their own
    (acme, umbrella, globex and initech), so they share one runtime."""
    root = tmp_path_factory.mktemp("reader")
    (root / ".venv").symlink_to(PROJECT / ".venv")
    options = RuntimeOptions(
        port=0,
        stack_name="hybrid-counter-docs",
        start_schedules=False,  # nothing here waits for the sweeper
        max_environments=2,  # the walkthroughs send one request at a time
        warm_http_environments=1,
    )
    with LocalRuntime(options) as runtime:
        write_state(runtime, root / ".local/runtime.json")
        yield root, runtime.api_url


def section(page: str, heading: str) -> str:
    text = (PROJECT / page).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : None if end < 0 else end]


def fenced(text: str) -> list[tuple[str, str]]:
    """The page's fenced blocks in order, as (language, body); language "" for a plain one."""
    found: list[tuple[str, str]] = []
    opened: tuple[str, list[str]] | None = None
    for line in text.splitlines():
        if opened is None and line.startswith("```"):
            opened = (line[3:].strip(), [])
        elif opened is not None and line == "```":
            found.append((opened[0], "\n".join(opened[1]) + "\n"))
            opened = None
        elif opened is not None:
            opened[1].append(line)
    return found


def blocks(text: str, language: str) -> list[str]:
    return [body for lang, body in fenced(text) if lang == language]


def run(script: str, reader: tuple[Path, str], *, shell: bool) -> str:
    root, api_url = reader
    script = script.replace(DOCUMENTED_API, api_url)
    command = ["bash", "-c", script] if shell else [sys.executable, "-c", script]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in VOLATILE else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    return value


def hex_ids_masked(text: str) -> str:
    return re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)


def test_the_readme_walkthrough_and_its_python_snippet_print_what_the_readme_shows(reader):
    walkthrough = section("README.md", "## Five minutes with it")
    (shell,) = blocks(walkthrough, "sh")
    (snippet,) = blocks(walkthrough, "python")
    first, again = blocks(walkthrough, "")
    # Given the walkthrough, run as written: every answer is JSON, and one is the 409 it promises
    answers = [json.loads(line) for line in run(shell, reader, shell=True).splitlines() if line]
    assert [a["error"]["code"] for a in answers if "error" in a] == ["LimitExceeded", "Forbidden"]
    # When the Python snippet runs, twice: it prints what the README shows each time
    assert hex_ids_masked(run(snippet, reader, shell=False)) == hex_ids_masked(first)
    assert run(snippet, reader, shell=False) == again


def test_the_client_pages_example_runs_as_written_and_again(reader):
    use = section("clients/python/README.md", "## Use")
    example, shown = blocks(use, "python")[0], blocks(use, "")[0]  # the first; then its sections'
    for _ in range(2):  # it empties its account, so a second run prints the same
        printed = run(example, reader, shell=False)
        # (the listing's order is the ids', which differ on each run)
        assert sorted(hex_ids_masked(printed).splitlines()) == sorted(hex_ids_masked(shown).splitlines())


def documented_steps(recipe: str) -> list[tuple[str, list[str]]]:
    """(commands, the answers shown for them): a `# {...}` line after a command is its answer;
    a plain block right after a shell block holds the answers of that block's last command."""
    steps: list[tuple[str, list[str]]] = []
    for language, body in fenced(recipe):
        if language == "":
            steps[-1][1].extend(line for line in body.splitlines() if line)
            continue
        for line in body.splitlines():
            if line.startswith("# "):
                steps[-1][1].append(line[2:])
            elif line.strip():
                steps.append((line, []))
    return steps


def test_the_user_guides_recipe_answers_what_it_shows(reader):
    recipe = section("docs/user-guide.md", "## Recipe: seats per plan")
    steps = documented_steps(recipe)
    own = set(re.findall(r"/(?:accounts|plans)/([\w.-]+)", recipe))
    assert {"globex", "initech", "team", "business"} <= own
    events_tail(reader)  # what the other walkthroughs left queued
    assert sum(len(shown) for _, shown in steps) >= 10  # the answers this test exists to check
    # Given each command run in order in one shell, as a reader would
    marker = "@@@ step done"
    script = "\n".join(f"{command}\necho '{marker}'" for command, _ in steps)
    outputs = run(script, reader, shell=True).split(f"{marker}\n")
    assert len(outputs) == len(steps) + 1
    for (command, shown), printed in zip(steps, outputs, strict=False):
        answers = [line for line in printed.splitlines() if line]
        if "events tail" in command:
            answers = [line for line in answers if concerns(line, own)]
            answers += events_until(reader, own, len(shown) - len(answers))
            # a standard queue: roughly in order
            assert sorted(map(canonical, answers)) == sorted(map(canonical, shown)), command
        else:
            assert [canonical(a) for a in answers] == [canonical(s) for s in shown], command


def canonical(line: str) -> str:
    return json.dumps(masked(json.loads(line)), sort_keys=True)


def events_tail(reader: tuple[Path, str]) -> list[str]:
    return [
        line
        for line in run(".venv/bin/hybrid-counter-ops --local events tail", reader, shell=True).splitlines()
        if line
    ]


def concerns(event: str, own: set[str]) -> bool:
    """An event of the recipe's accounts or plans (another walkthrough's may arrive late)."""
    detail = json.loads(event)["detail"]
    return detail.get("account_id") in own or detail.get("plan_id") in own


def events_until(reader: tuple[Path, str], own: set[str], missing: int, deadline: float = 30) -> list[str]:
    """The events the stream path publishes a moment after the tail ran: the same command again."""
    found: list[str] = []
    stop = time.monotonic() + deadline
    while len(found) < missing and time.monotonic() < stop:
        found += [line for line in events_tail(reader) if concerns(line, own)]
    return found
