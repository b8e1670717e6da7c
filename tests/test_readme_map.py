"""README is a map: short, the two commands first, and a table of where things live that
names every module of services/ and blueprints/ and nothing that is not there."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def mapped_paths() -> set[str]:
    """The paths named in the first column of the table under "Where things live"."""
    section = README.split("\n## Where things live\n", 1)[1].split("\n## ", 1)[0]
    paths = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            paths |= set(re.findall(r"`([^`]+)`", row.split("|")[1]))
    return paths


def test_readme_is_at_most_300_lines_with_the_two_commands_first():
    assert len(README.splitlines()) <= 300
    sections = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert sections[:3] == ["Two commands", "Where things live", "Configuration"]
    commands = README.split("\n## Two commands\n", 1)[1].split("```")[1]
    assert re.findall(r"^make (\w+)", commands, flags=re.MULTILINE) == ["run", "test"]


def test_every_mapped_path_exists():
    assert sorted(path for path in mapped_paths() if not (ROOT / path).exists()) == []


def drawn_services() -> set[str]:
    """The modules the tree of services/ under "Where things live" names, as paths."""
    section = README.split("\n## Where things live\n", 1)[1].split("\n## ", 1)[0]
    tree = section.split("```text\nservices/\n", 1)[1].split("```", 1)[0]
    drawn, folder = set(), ""
    for row in tree.splitlines():
        top = re.match(r"^[├└]── (\S+)", row)
        if top:
            folder = top.group(1) if top.group(1).endswith("/") else ""
        for name in re.findall(r"(?<![\w./])(\w+\.(?:py|txt))\b", row):
            drawn.add(f"services/{folder}{name}")
    return drawn


def test_every_module_of_blueprints_is_mapped_and_services_is_drawn_as_its_tree():
    blueprints = {f"blueprints/{path.name}" for path in (ROOT / "blueprints").glob("*.py")
                  if path.name != "__init__.py"}
    assert sorted(blueprints - mapped_paths()) == []
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "services").rglob("*")
             if path.suffix in (".py", ".txt") and path.name != "__init__.py"}
    assert sorted(files ^ drawn_services()) == []
