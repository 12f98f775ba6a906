"""Built mode's ground rules, on the project's own `sam build` output (`make sam-build`).

The end-to-end suite runs the service from the build (HC_E2E_TARGET=built); these tests pin
down what makes that run mean something: the built environments import nothing but the build
and the standard library, the layer ships the versions the source-mode tests ran, and a
stale build is refused rather than run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from importlib import metadata
from pathlib import Path

import pytest

from localrun.errors import LocalRunError
from localrun.functions.built import (
    BUILD_DIR,
    built_launch,
    built_template,
    clean_interpreter,
    layer_directories,
)
from localrun.stack.template import PROJECT_ROOT, load_template

pytestmark = pytest.mark.integration

# Prints where every loaded module of the handler came from.
IMPORT_PROBE = """\
import json, sys
sys.path[0:0] = {paths!r}
import api_handler
print(json.dumps({{name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}}))
"""


@pytest.fixture(scope="module")
def build() -> Path:
    return built_template(BUILD_DIR).parent  # fails with "run make sam-build" when missing or stale


def _run_probe(
    interpreter: Path, flags: tuple[str, ...], paths: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(interpreter), *flags, "-c", IMPORT_PROBE.format(paths=paths)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", "")},
        check=False,
    )


def test_built_environments_import_only_the_build_and_the_standard_library(build: Path) -> None:
    template = load_template(build / "template.yaml")
    api = template.functions["ApiFunction"]
    launch = built_launch(api, clean_interpreter(), layer_directories(build / "template.yaml"))
    stdlib = Path(
        subprocess.run(
            [
                str(launch.interpreter),
                "-I",
                "-S",
                "-c",
                "import sysconfig; print(sysconfig.get_path('stdlib'))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )

    # With the layer: the handler imports, and every module comes from the build or the stdlib
    done = _run_probe(
        launch.interpreter, launch.flags, [str(launch.code_dir), *map(str, launch.layer_paths)], build
    )
    assert done.returncode == 0, done.stderr
    files = {name: Path(file) for name, file in json.loads(done.stdout).items() if file}
    outside = {
        name: file
        for name, file in files.items()
        if not file.is_relative_to(build) and not file.is_relative_to(stdlib)
    }
    assert outside == {}
    layer = layer_directories(build / "template.yaml")["CounterLayer"]
    for package in ("boto3", "botocore", "pydantic", "aws_lambda_powertools", "hybrid_counter"):
        assert files[package].is_relative_to(layer), (package, files[package])

    # Without it: nothing of the development virtualenv stands in for the layer
    missing = _run_probe(launch.interpreter, launch.flags, [str(launch.code_dir)], build)
    assert missing.returncode != 0
    assert re.search(
        r"ModuleNotFoundError: No module named '(hybrid_counter|aws_lambda_powertools|boto3)'", missing.stderr
    )


def _dist_versions(site: Path) -> dict[str, str]:
    versions = {}
    for info in site.glob("*.dist-info"):
        name, version = info.name[: -len(".dist-info")].rsplit("-", 1)
        versions[name.lower().replace("_", "-")] = version
    return versions


def test_the_layer_ships_the_versions_the_source_tests_run(build: Path) -> None:
    layer = layer_directories(build / "template.yaml")["CounterLayer"] / "python"
    shipped = _dist_versions(layer)
    assert {"boto3", "botocore", "aws-lambda-powertools", "pydantic"} <= set(shipped)
    assert shipped["boto3"].split(".")[:2] == shipped["botocore"].split(".")[:2]  # a released pair
    differing = {
        name: (version, metadata.version(name))
        for name, version in shipped.items()
        if metadata.version(name) != version
    }
    assert differing == {}, (
        "the layer and .venv differ (layer, venv); pin them alike in requirements.txt and pyproject.toml"
    )


def test_a_build_older_than_its_sources_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "functions" / "api").mkdir(parents=True)
    (source / "template.yaml").write_text("Resources: {}\n")
    build = tmp_path / "build"
    build.mkdir()
    (build / "template.yaml").write_text("Resources: {}\n")
    assert built_template(build, source) == build / "template.yaml"

    handler = source / "functions" / "api" / "api_handler.py"
    handler.write_text("# edited after the build\n")
    later = time.time() + 5
    os.utime(handler, (later, later))
    with pytest.raises(LocalRunError, match=r"older than functions/api/api_handler.py.*make sam-build"):
        built_template(build, source)
    with pytest.raises(LocalRunError, match="make sam-build"):
        built_template(tmp_path / "nothing-built", source)


def test_requirements_and_pyproject_pin_the_same_sdk() -> None:
    requirements = (PROJECT_ROOT / "layers" / "counter" / "requirements.txt").read_text()
    pyproject = (PROJECT_ROOT / "pyproject.toml").read_text()
    for package in ("boto3", "botocore"):
        pinned = re.search(rf"^{package}==([\d.]+)$", requirements, re.MULTILINE)
        assert pinned, f"{package} is not pinned in the layer's requirements.txt"
        assert f'"{package}=={pinned.group(1)}"' in pyproject
