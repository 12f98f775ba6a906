"""Run the test suite (or part of it) against one mutation of the code, in a copy of the repository.

    python tests/mutations/run.py tests/mutations/01-claim-accepts-pending.patch -- tests/integration/test_api_races.py -x
    python tests/mutations/run.py --all                  # every patch of catalogue.toml, its own node ids
    python tests/mutations/run.py --all --only 01 13b    # the entries whose names start so

A mutation is *caught* when pytest fails (exit 0 here), *survives* when pytest passes (exit 1).
Anything else (the patch does not apply, pytest could not collect or run) is an error (exit 2).
The copy is HEAD's tracked files (``git archive HEAD``), with ``.venv`` and ``node_modules``
linked from this checkout; the checkout itself is never modified. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CATALOGUE = HERE / "catalogue.toml"
LINKED = (".venv", "node_modules")
CAUGHT, SURVIVED, ERROR = 0, 1, 2
VERDICTS = {CAUGHT: "CAUGHT", SURVIVED: "SURVIVED", ERROR: "ERROR"}


@dataclass
class Outcome:
    patch: str
    code: int  # CAUGHT, SURVIVED or ERROR
    seconds: float
    detail: str  # the first failure (caught), or why it is an error
    log: Path | None = None

    def line(self) -> str:
        return f"{VERDICTS[self.code]:<8} {self.patch}  ({self.seconds:.0f} s)  {self.detail}".rstrip()


def copy_of_head(into: Path) -> None:
    """HEAD's tracked files in ``into``, a git repository of its own (so ``git apply`` applies
    there), with the checkout's environments linked in."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    subprocess.run(["git", "init", "-q", str(into)], check=True)
    for name in LINKED:
        source = (ROOT / name).resolve()
        if source.exists():
            (into / name).symlink_to(source)


def first_failure(output: str) -> str:
    """The first ``FAILED``/``ERROR`` line of pytest's short summary, with the first ``E`` line of
    its report when the summary has no message, on one line."""
    lines = output.splitlines()
    summary = next((line for line in lines if line.startswith(("FAILED ", "ERROR "))), "")
    if summary:
        summary = summary.partition(" - ")[0]
        # The report's first ``E`` lines: the assertion and what it compared.
        message = [line[1:].strip() for line in lines if line.startswith("E ")][:3]
        summary = f"{summary} - {' / '.join(message)}" if message else summary
    return re.sub(r"\s+", " ", summary)[:400]


def run(patch: Path, pytest_args: list[str], *, keep: bool = False, echo: bool = False) -> Outcome:
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"mut-{patch.stem}-"))
    log = work.with_suffix(".log")
    try:
        copy_of_head(work)
        applied = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(patch.resolve())],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        if applied.returncode != 0:
            return Outcome(
                patch.name, ERROR, time.monotonic() - started, f"does not apply: {applied.stderr.strip()}"
            )
        env = dict(os.environ, COLUMNS="300")  # pytest's short summary keeps the message
        # The copy's code first, in this process and in any it starts (the venv holds an editable
        # install of the original checkout).
        env["PYTHONPATH"] = os.pathsep.join(
            [str(work / "layers" / "counter"), str(work), *filter(None, [env.get("PYTHONPATH")])]
        )
        python = str(work / ".venv" / "bin" / "python")
        where = subprocess.run(
            [python, "-c", "import hybrid_counter; print(hybrid_counter.__file__)"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if not where.stdout.strip().startswith(str(work)):
            return Outcome(patch.name, ERROR, time.monotonic() - started, f"imports {where.stdout.strip()}")
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *pytest_args]
        with log.open("w") as out:
            process = subprocess.Popen(
                command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert process.stdout is not None
            lines = []
            for line in process.stdout:
                out.write(line)
                lines.append(line)
                if echo:
                    sys.stdout.write(line)
            code = process.wait()
        seconds = time.monotonic() - started
        output = "".join(lines)
        if code == 1:
            return Outcome(patch.name, CAUGHT, seconds, first_failure(output), log)
        if code == 0:
            return Outcome(patch.name, SURVIVED, seconds, "every test passed", log)
        return Outcome(patch.name, ERROR, seconds, f"pytest exited {code}: {first_failure(output)}", log)
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def catalogue() -> list[dict[str, Any]]:
    with CATALOGUE.open("rb") as source:
        entries: list[dict[str, Any]] = tomllib.load(source)["mutation"]
    return entries


def run_all(only: list[str], extra: list[str]) -> int:
    outcomes: list[tuple[dict[str, Any], Outcome]] = []
    for entry in catalogue():
        name = str(entry["patch"])
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        node_ids = [str(node) for node in entry["catches"]]
        print(f"--- {name}: {entry['description']}", flush=True)
        outcome = run(HERE / name, ["-x", *node_ids, *extra])
        print(outcome.line(), flush=True)
        outcomes.append((entry, outcome))
    print("\nSummary")
    print("| mutation | verdict | seconds | first failure |")
    print("|---|---|---|---|")
    for _, outcome in outcomes:
        detail = outcome.detail.replace("|", "\\|")
        print(f"| {outcome.patch} | {VERDICTS[outcome.code]} | {outcome.seconds:.0f} | {detail} |")
    caught = sum(outcome.code == CAUGHT for _, outcome in outcomes)
    print(f"\n{caught} of {len(outcomes)} mutations caught")
    return CAUGHT if caught == len(outcomes) else SURVIVED


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, pytest_args = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("patch", nargs="?", type=Path, help="a git diff to apply to HEAD's files")
    parser.add_argument("--all", action="store_true", help="every mutation of catalogue.toml")
    parser.add_argument("--only", nargs="*", default=[], help="with --all: patch names starting so")
    parser.add_argument("--keep", action="store_true", help="keep the mutated copy (its path is printed)")
    parser.add_argument("--echo", action="store_true", help="show pytest's output as it runs")
    options = parser.parse_args(args)
    if options.all:
        return run_all(options.only, pytest_args)
    if options.patch is None or not pytest_args:
        parser.error("give a patch and the pytest arguments after --, or --all")
    outcome = run(options.patch, pytest_args, keep=options.keep, echo=options.echo)
    print(outcome.line())
    if outcome.log is not None:
        print(f"pytest output: {outcome.log}")
    return outcome.code


if __name__ == "__main__":
    sys.exit(main())
