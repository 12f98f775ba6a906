"""Built mode: run what `sam build` produced, as Lambda would run the deployed package.

The runtime reads `.aws-sam/build/template.yaml` (the template `sam build` writes, whose
`CodeUri`/`ContentUri` point at the build directories) and starts each execution
environment as Lambda's python3.12 runtime would:

* on a clean python3.12 (`-I -S`: no site-packages, no user site, no PYTHON* variables),
  so nothing of the development virtualenv is importable;
* with `sys.path` = the function's build directory (`/var/task`), then for each of its
  layers `<layer>/python/lib/python3.12/site-packages` and `<layer>/python` (where Lambda
  extracts a layer: `/opt/python/...`), then the standard library.

The Lambda runtime would also offer its own boto3/botocore (and their dependencies) after
the layers. Built mode offers none: the layer ships a pinned SDK (layers/counter/
requirements.txt, see docs/local-runtime.md "Built mode"), which shadows the runtime's copy entirely on AWS,
so anything the layer forgot must fail here rather than silently pick up whatever SDK AWS
ships that month.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from localrun.errors import LocalRunError, TemplateError
from localrun.functions.launch import Launch
from localrun.stack.cfn_yaml import load_yaml
from localrun.stack.template import LAYER_TYPE, PROJECT_ROOT, FunctionSpec

BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
PYTHON_VERSION = (3, 12)
# Source trees whose changes `sam build` must have seen (relative to the template's directory).
_SOURCES = ("template.yaml", "functions", "layers")


def built_template(build_dir: Path = BUILD_DIR, source_root: Path = PROJECT_ROOT) -> Path:
    """The built template, after checking it exists and is newer than every source file."""
    template = build_dir / "template.yaml"
    if not template.is_file():
        raise LocalRunError(f"{template} not found: run `make sam-build` first (built mode runs its output)")
    built_at = template.stat().st_mtime
    newer = [path for path in _source_files(source_root) if path.stat().st_mtime > built_at]
    if newer:
        names = ", ".join(str(path.relative_to(source_root)) for path in newer[:3])
        raise LocalRunError(
            f"the build in {build_dir} is older than {names}{' ...' if len(newer) > 3 else ''}: "
            "run `make sam-build` again"
        )
    return template


def _source_files(root: Path) -> Iterable[Path]:
    for name in _SOURCES:
        top = root / name
        if top.is_file():
            yield top
        elif top.is_dir():
            yield from (
                path
                for path in top.rglob("*")
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
            )


def clean_interpreter(candidate: Path | None = None) -> Path:
    """A python3.12 outside any virtualenv: the one this virtualenv was made from, unless given."""
    interpreter = candidate or Path(getattr(sys, "_base_executable", sys.executable))
    probe = "import sys; print(sys.version_info[0], sys.version_info[1], sys.prefix != sys.base_prefix)"
    try:
        answer = subprocess.run(
            [str(interpreter), "-I", "-S", "-c", probe],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as error:
        raise LocalRunError(
            f"built mode needs a python3.12 interpreter; {interpreter} failed: {error}"
        ) from error
    if (int(answer[0]), int(answer[1])) != PYTHON_VERSION or answer[2] == "True":
        raise LocalRunError(
            f"{interpreter} is Python {answer[0]}.{answer[1]}{' in a virtualenv' if answer[2] == 'True' else ''};"
            " built mode needs a plain python3.12 (set LOCALRUN_PYTHON)"
        )
    return interpreter


def layer_directories(template_path: Path) -> dict[str, Path]:
    """Each `AWS::Serverless::LayerVersion` of the (built) template -> its content directory."""
    document: dict[str, Any] = load_yaml(template_path)
    layers: dict[str, Path] = {}
    for logical_id, resource in (document.get("Resources") or {}).items():
        if isinstance(resource, dict) and resource.get("Type") == LAYER_TYPE:
            content = (resource.get("Properties") or {}).get("ContentUri")
            if not isinstance(content, str):
                raise TemplateError(f"Resources.{logical_id}.ContentUri must be a built directory")
            layers[logical_id] = (template_path.parent / content).resolve()
    return layers


def layer_paths(spec: FunctionSpec, layers: dict[str, Path]) -> tuple[Path, ...]:
    """Where Lambda's python3.12 runtime looks into the function's layers, in the function's order."""
    paths: list[Path] = []
    for reference in spec.layers:
        logical_id = reference.get("Ref") if isinstance(reference, dict) else None
        if logical_id not in layers:
            raise TemplateError(
                f"Resources.{spec.logical_id}.Layers: {reference!r} is not a layer of this template; "
                "built mode runs only layers it has built"
            )
        root = layers[logical_id] / "python"
        paths += [root / "lib" / "python{}.{}".format(*PYTHON_VERSION) / "site-packages", root]
    return tuple(paths)


def built_launch(spec: FunctionSpec, interpreter: Path, layers: dict[str, Path]) -> Launch:
    # -I: no PYTHON* variables, no user site, no script directory; -S: no site-packages.
    return Launch(interpreter, ("-I", "-S", "-u"), spec.code_uri, layer_paths(spec, layers))
