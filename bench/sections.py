"""Sections of RESULTS.md that a measurement run alone writes between their own marks."""
from __future__ import annotations

from pathlib import Path


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
