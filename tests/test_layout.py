"""The house's shape: services in domain packages importing only downwards, no import cycles,
no import inside a function to dodge one, and no service or blueprint module past 500 lines."""
from __future__ import annotations

import ast
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app.py", "webapp.py", "server.py", "blueprints", "models", "services", "sandbox")
# Imports a function may make itself: libraries only some processes need (boto3 and botocore
# cost a worker 24 MB and half a second, and only installs with a bucket use them; redis 6 MB,
# and only installs keeping their limits on Redis use it).
LAZY_LIBRARIES = {"weasyprint", "jsonschema", "boto3", "botocore", "cryptography", "redis"}
MAX_LINES = 500
# The domains under services/, lowest first: a module may import its own domain and those
# before it. Modules directly under services/ (health, demo) look at every domain; no domain
# imports them.
DOMAINS = ("platform", "files", "accounts", "project_system", "routing", "pricing", "tickets",
           "webhooks", "capture", "approval", "review", "reports")


def modules() -> dict[str, Path]:
    """Every Python module of the project, by its dotted name."""
    found = {}
    for package in PACKAGES:
        paths = [ROOT / package] if package.endswith(".py") else (ROOT / package).rglob("*.py")
        for path in paths:
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may load."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".")[: len(module.split(".")) - node.level + int(is_package)]
        base = ".".join([*parts, base] if base else parts)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Which project modules each module imports, and every import made inside a function."""
    found = modules()
    graph: dict[str, set[str]] = {name: set() for name in found}
    inside: list[str] = []
    for name, path in found.items():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        targets = imported(node, name, path.name == "__init__.py")
                        if targets[0].split(".")[0] not in LAZY_LIBRARIES:
                            inside.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= {t for t in imported(node, name, path.name == "__init__.py")
                                if t in found and t != name}
    return graph, inside


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_and_no_imports_inside_functions():
    graph, inside = import_graph()
    assert {"services.capture.tickets", "services.tickets.ticket_shapes", "blueprints.tickets"} <= set(graph)
    assert cycles(graph) == []
    assert inside == []


def domain_of(module: str) -> str | None:
    """The services domain a module belongs to, "" for a module directly under services/."""
    parts = module.split(".")
    if parts[0] != "services" or len(parts) == 1:
        return None
    return parts[1] if parts[1] in DOMAINS else ""


def imports_up(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a services domain into a later domain, or into a module above the domains."""
    found = []
    for module, targets in graph.items():
        here = domain_of(module)
        if not here:
            continue
        for target in sorted(targets):
            there = domain_of(target)
            if there is None:
                continue
            if there == "" or DOMAINS.index(there) > DOMAINS.index(here):
                found.append(f"{module} -> {target}")
    return found


def test_services_are_packages_by_domain_importing_only_downwards():
    graph, _ = import_graph()
    assert imports_up(graph) == []
    folders = {p.name for p in (ROOT / "services").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(DOMAINS)
    for domain in DOMAINS:
        assert ast.get_docstring(ast.parse((ROOT / "services" / domain / "__init__.py").read_text()))
    loose = sorted(p.name for p in (ROOT / "services").glob("*.py") if p.name != "__init__.py")
    assert loose == ["demo.py", "health.py"]


def test_an_import_up_the_domains_is_found():
    graph = {"services.files.storage": {"services.platform.errors", "services.tickets.signatures"},
             "services.platform.web": {"services.health"},
             "services.review.review_queue": {"services.capture.links", "models"},
             "services.health": {"services.review.review_queue"}}
    assert imports_up(graph) == ["services.files.storage -> services.tickets.signatures",
                                 "services.platform.web -> services.health"]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_service_or_blueprint_module_is_over_500_lines_unless_it_is_one_thing():
    long = []
    for folder in ("services", "blueprints"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if text.count("\n") > MAX_LINES and "one thing" not in docstring:
                long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert long == []


def graded_d_or_worse(source: str) -> list[str]:
    """The functions, methods and closures radon grades D or worse, with their complexity."""
    found, blocks = [], [b for b in cc_visit(source) if not hasattr(b, "methods")]
    while blocks:
        block = blocks.pop()
        blocks.extend(block.closures)
        if cc_rank(block.complexity) >= "D":
            found.append(f"{block.lineno} {block.fullname} {block.complexity}")
    return sorted(found)


def test_no_function_of_the_project_is_of_complexity_d_or_worse():
    graded = [f"{path.relative_to(ROOT)}:{found}" for path in modules().values()
              for found in graded_d_or_worse(path.read_text())]
    assert graded == []


def test_a_closure_of_complexity_d_is_found():
    branches = "".join(f"        if y == {i}:\n            return {i}\n" for i in range(21))
    source = f"def outer():\n    def inner(y):\n{branches}        return y\n    return inner\n"
    assert graded_d_or_worse(source) == ["2 inner 22"]
