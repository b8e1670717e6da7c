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


def test_every_module_of_services_and_blueprints_is_mapped():
    modules = set()
    for folder in ("services", "blueprints"):
        for path in (ROOT / folder).iterdir():
            if path.suffix == ".py" and path.name != "__init__.py":
                modules.add(f"{folder}/{path.name}")
            elif path.is_dir() and (path / "__init__.py").exists():
                modules.add(f"{folder}/{path.name}/")
    assert sorted(modules - mapped_paths()) == []
