"""Rules of the code's shape that a reader relies on (docs/architecture.md). The import layers themselves are
import-linter contracts in pyproject.toml, run by ``make lint``; these are the rules it cannot express."""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lanner"
MAX_LINES = 400


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def _unexplained_local_imports(path: Path) -> list[str]:
    """Imports inside a function with no comment giving the reason: on the import's line, or on the line just
    above the block of imports it belongs to."""
    lines = path.read_text().splitlines()
    found = []

    def check_body(body: list[ast.stmt]) -> None:
        explained_block = False
        previous_was_import = False
        for statement in body:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                if not previous_was_import:
                    above = lines[statement.lineno - 2].strip() if statement.lineno >= 2 else ""
                    explained_block = above.startswith("#")
                same_line = any("#" in line for line in lines[statement.lineno - 1:statement.end_lineno])
                if not (explained_block or same_line):
                    found.append(f"{path.relative_to(ROOT)}:{statement.lineno}: {lines[statement.lineno - 1].strip()}")
                previous_was_import = True
            else:
                previous_was_import = False

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            check_body(node.body)
            for inner in ast.walk(node):
                if inner is not node and hasattr(inner, "body") and isinstance(inner.body, list) \
                        and not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    check_body(inner.body)
    return found


def test_imports_inside_functions_say_why() -> None:
    """An import hidden in a function hides a dependency from readers (and once hid an import cycle): it needs
    a reason next to it, such as an optional dependency or start-up cost."""
    unexplained = [line for path in _sources() for line in _unexplained_local_imports(path)]
    assert not unexplained, "imports inside functions without a reason:\n" + "\n".join(unexplained)


def test_the_check_sees_unexplained_and_explained_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    import json\n    return json\n\n\ndef g():\n    # optional dependency\n"
                      "    import ray\n    import yaml\n    return ray, yaml\n\n\ndef h():\n"
                      "    import torch  # start-up cost\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert _unexplained_local_imports(sample) == ["sample.py:2: import json"]
    finally:
        ROOT = saved


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these along the jobs they do: {long}"


def test_the_repository_holds_no_generated_artefacts() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    generated = ("*.pt", "*.pth", "*.onnx", "*.db", "*.sqlite", "*.pyc", "*.egg-info/*", "weights/*", "runs/*",
                 ".lanner/*", "*.log")
    bad = [path for path in tracked if any(fnmatch.fnmatch(path, pattern) for pattern in generated)]
    assert not bad, f"generated files are tracked: {bad}"


def test_every_package_data_pattern_names_files() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["lanner"]
    empty = [pattern for pattern in patterns if not list(PACKAGE.glob(pattern))]
    assert not empty, f"package data patterns that match nothing: {empty}"


def _contract_names() -> set[str]:
    """Every module a layer or ground-floor contract of pyproject.toml names."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    names = set()
    for contract in contracts:
        for entry in [*contract.get("layers", []), *contract.get("source_modules", [])]:
            names.update(part.strip() for part in entry.replace("|", ":").split(":"))
    return names


def _top_level() -> list[str]:
    """The packages and modules directly under lanner/ (migrations are data, not code a layer holds)."""
    packages = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and p.name != "migrations"]
    modules = [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    return sorted(packages + modules)


def test_every_top_level_package_and_module_is_placed_and_described() -> None:
    """A new package or root module must be given a place in the layers (pyproject.toml) and a line in
    docs/architecture.md: unplaced, import-linter checks nothing about it; undescribed, a reader cannot find it."""
    names, doc = _contract_names(), (ROOT / "docs" / "architecture.md").read_text()
    unplaced = [n for n in _top_level() if f"lanner.{n}" not in names]
    undescribed = [n for n in _top_level() if not re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", doc)]
    assert not unplaced, f"not in a layer or ground-floor contract of pyproject.toml: {unplaced}"
    assert not undescribed, f"not described in docs/architecture.md: {undescribed}"


def test_the_benchmarks_import_no_circle() -> None:
    """The benchmarks are scripts importing each other by file name (``from common import ...``): import-linter
    does not see them, so their graph is checked here (anywhere in a file, a function's import included)."""
    folder = ROOT / "benchmarks"
    stems = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
        graph[path.stem] = (imported & stems) - {path.stem}
    circles = []

    def visit(stem: str, trail: list[str]) -> None:
        for target in sorted(graph[stem]):
            if target in trail:
                circles.append(" -> ".join([*trail[trail.index(target):], target]))
            else:
                visit(target, [*trail, target])

    for stem in sorted(graph):
        visit(stem, [stem])
    assert not circles, circles


def test_the_package_root_holds_at_most_a_dozen_modules() -> None:
    """The root is for what every layer names and the composition root; plumbing goes into a package that says
    what it is (``db/``, ``http/``, ``cli/``), so the tree shows persistence, HTTP and the command apart."""
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert len(modules) <= 12, modules
