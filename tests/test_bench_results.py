"""bench/RESULTS.md holds the latest run's tables and bench/fixes.md the decisions in force:
history lives in git, not in either file."""
from __future__ import annotations

import re
from pathlib import Path

from bench import sections

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_a_section_written_again_replaces_the_last_one(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nThe run's tables.\n")
    for figure in ("12 ms", "9 ms"):
        sections.put(results, ["<!-- s -->", "## Alone", "", figure, "<!-- /s -->"],
                     "<!-- s -->", "<!-- /s -->")
    text = results.read_text()
    assert text.count("## Alone") == 1 and "9 ms" in text and "12 ms" not in text
    assert text.startswith("# Benchmark results\n\nThe run's tables.\n")
    assert sections.kept(text, "<!-- s -->", "<!-- /s -->") == [
        "<!-- s -->", "## Alone", "", "9 ms", "<!-- /s -->"]


def test_results_hold_one_run():
    text = (BENCH / "RESULTS.md").read_text()
    headings = re.findall(r"^#+ .+$", text, flags=re.MULTILINE)
    assert len(headings) == len(set(headings))
    assert text.count("- Date: ") == 1
    assert "## Before and after" not in headings
    copied = re.findall(r"^#+ .+$", (BENCH / "fixes.md").read_text(), flags=re.MULTILINE)
    assert set(copied) & set(headings) == set()


def test_fixes_are_decisions_not_a_diary():
    text = (BENCH / "fixes.md").read_text()
    assert len(text.splitlines()) <= 150
    assert re.findall(r"^#+ .*\d{4}-\d{2}-\d{2}.*$", text, flags=re.MULTILINE) == []
