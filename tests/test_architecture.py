"""Rules of the code's shape that a reader relies on (docs/architecture.md). The import layers themselves are
import-linter contracts in pyproject.toml, run by ``make lint``; these are the rules it cannot express."""

from __future__ import annotations

import ast
import fnmatch
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
