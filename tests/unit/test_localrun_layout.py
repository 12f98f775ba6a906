"""localrun's layout: subpackages by part of AWS, no import cycle, no upward import.

Every import counts, those under ``if TYPE_CHECKING:`` and inside functions too: a cycle hidden
from the interpreter is still two modules that cannot be understood apart."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOCALRUN = Path(__file__).resolve().parents[2] / "localrun"
PARTS = ("stack", "gateway", "functions", "sources")
# The top: what composes the parts (and the shared errors, which import nothing).
TOP = ("localrun.runtime", "localrun.__main__", "localrun")


def module_name(path: Path) -> str:
    parts = path.relative_to(LOCALRUN.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every localrun module ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "localrun":
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "localrun")
    return found


GRAPH = {module_name(path): imports_of(path) for path in LOCALRUN.rglob("*.py")}


def test_each_part_is_a_subpackage_that_says_what_it_is():
    for part in PARTS:
        init = LOCALRUN / part / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), part
    # and no module is left loose beside them but the composition and the shared errors
    loose = {path.stem for path in LOCALRUN.glob("*.py")}
    assert loose == {"__init__", "__main__", "runtime", "errors", "stop_signal"}


@pytest.mark.parametrize("part", PARTS)
def test_no_part_imports_the_composition_above_it(part):
    upward = {
        (module, imported)
        for module, imported_set in GRAPH.items()
        if module.startswith(f"localrun.{part}.")
        for imported in imported_set
        if imported in TOP
    }
    assert upward == set()


def test_the_import_graph_has_no_cycle():
    state: dict[str, str] = {}
    cycle: list[str] = []

    def visit(module: str, path: list[str]) -> bool:
        state[module] = "open"
        for imported in sorted(GRAPH.get(module, ())):
            if imported not in GRAPH or imported == module:
                continue
            if state.get(imported) == "open":
                cycle.extend([*path, module, imported])
                return True
            if imported not in state and visit(imported, [*path, module]):
                return True
        state[module] = "done"
        return False

    for module in sorted(GRAPH):
        if module not in state and visit(module, []):
            break
    assert cycle == []


def test_the_checker_sees_imports_under_type_checking(tmp_path):
    # Given a module whose only import of another is for type checking
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from localrun.runtime import X\n"
    )
    # Then it is an import all the same
    assert imports_of(source) == {"localrun.runtime"}
