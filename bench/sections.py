"""Sections of RESULTS.md that a measurement run alone writes between their own marks."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.servers import BENCH, ROOT


def put(path: Path, lines: list[str], start: str, end: str) -> None:
    """Replace the section between `start` and `end` in the file at `path` with `lines` (which
    begin and end with the marks), or add it at the end."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    block = "\n".join(lines)
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def kept(text: str, start: str, end: str) -> list[str]:
    """The section between `start` and `end` in `text`, marks included, as lines (none if absent)."""
    if start not in text or end not in text:
        return []
    return (start + text.split(start, 1)[1].split(end, 1)[0] + end).split("\n")


def measured_commit(*paths: str) -> str:
    """The commit measured, marked when `paths` (every tracked file if none) have uncommitted changes."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *paths],
                           cwd=ROOT, text=True, capture_output=True).stdout.strip()
    return commit + (" (with uncommitted changes)" if dirty else "")


def kept_result(name: str, result: dict, load_before: float, *paths: str) -> dict:
    """A section's result stamped with the load before and after, commit and date, kept in
    bench/out/<name>.json and printed."""
    result.update(load=(load_before, os.getloadavg()[0]), commit=measured_commit(*paths),
                  date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    (BENCH / "out").mkdir(exist_ok=True)
    (BENCH / "out" / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str), file=sys.stderr)
    return result
