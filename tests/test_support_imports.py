"""bench/ and tests/ share their fixtures through support/: nothing under bench/ imports tests/,
and support/ imports neither tests/ nor bench/."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every absolute module name a file imports (at its top or inside a function), by line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module))
    return found


def importing(folder: str, packages: set[str]) -> list[str]:
    """The places under `folder` that import one of `packages` (or a module of one)."""
    return [f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path in sorted((ROOT / folder).rglob("*.py"))
            for line, name in imports_of(path) if name.split(".")[0] in packages]


def test_nothing_under_bench_imports_tests():
    assert list((ROOT / "bench").rglob("*.py"))
    assert importing("bench", {"tests"}) == []


def test_support_imports_neither_tests_nor_bench():
    assert list((ROOT / "support").rglob("*.py"))
    assert importing("support", {"tests", "bench"}) == []


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from tests.plugins.network import ThrottlingProxy\n"
                      "import tests\n")
    assert sorted(imports_of(module)) == [(2, "tests.plugins.network"), (3, "tests")]
