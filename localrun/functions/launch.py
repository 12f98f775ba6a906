"""How an execution environment's process starts: which interpreter, and what it can import.

Two kinds, chosen by `RuntimeOptions.built`:

* source (the default, fast to iterate on): this process's interpreter (the project's
  virtualenv) with the function's `CodeUri` directory in front; every package of the
  virtualenv is importable, whatever the layer would ship.
* built (`localrun.functions.built`): the `sam build` output on a clean python3.12, see there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

WORKER = Path(__file__).with_name("lambda_worker.py")


@dataclass(frozen=True)
class Launch:
    interpreter: Path
    flags: tuple[str, ...]  # interpreter options, before the worker script
    code_dir: Path  # LAMBDA_TASK_ROOT: first on sys.path and the working directory
    layer_paths: tuple[Path, ...] = ()  # after the code directory, as Lambda puts /opt/python

    def command(self, module: str, function: str, request_fd: int, response_fd: int) -> list[str]:
        return [
            str(self.interpreter),
            *self.flags,
            str(WORKER),
            str(self.code_dir),
            module,
            function,
            str(request_fd),
            str(response_fd),
            *map(str, self.layer_paths),
        ]


def source_launch(code_dir: Path) -> Launch:
    # -P: the worker's own directory must not shadow the handler's imports; -u: logs arrive as written.
    return Launch(Path(sys.executable), ("-P", "-u"), code_dir)
