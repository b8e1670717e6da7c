"""The soak section of bench/RESULTS.md, from the figures `make soak` records in bench/soak.json.

`python -m bench.soak` rewrites only that section, so a soak needs no benchmark run.
"""
from __future__ import annotations

import json
from pathlib import Path

from bench import sections

HERE = Path(__file__).resolve().parent
FIGURES = HERE / "soak.json"
RESULTS = HERE / "RESULTS.md"
START, END = "<!-- soak -->", "<!-- /soak -->"
TITLES = {
    "schemathesis": "Schemathesis, randomised, 300 examples per operation",
    "schemathesis_linked": "Schemathesis along the document's links, randomised, 200 chains of up to "
                           "25 calls",
    "mixed_load": "Mixed load: 5 rounds of 50 creators, 4 approvers, 4 listers (threaded server)",
    "crashes": "SIGKILL under create-and-approve load, 10 times in a row, then one restart",
    "slow_clients_and_flood": "6 trickling bodies, 12 slow header senders and a flood of 15 MP images "
                              "from one company; sign-in, another company's capture page and photo",
}


def section() -> list[str]:
    """Markdown lines of the soak section (empty when no soak has run yet)."""
    if not FIGURES.exists():
        return []
    data = json.loads(FIGURES.read_text())
    lines = [START, "", "## Soak (`make soak`)", "",
             "Long randomised runs of the reliability checks; each must end with zero failures, "
             "zero 5xx, nothing lost and nothing written twice.", "",
             "| Run | Figures | Recorded |", "|---|---|---|"]
    for name, figures in data.items():
        shown = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in figures.items()
                          if key != "recorded_at")
        lines.append(f"| {TITLES.get(name, name)} | {shown} | {figures.get('recorded_at', '')} |")
    return lines + ["", END]


def update(path: Path = RESULTS) -> None:
    """Replace (or add) the soak section of RESULTS.md."""
    sections.put(path, section(), START, END)


if __name__ == "__main__":
    update()
