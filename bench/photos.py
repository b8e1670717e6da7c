"""The server's processing of one photo, timed against a Pillow baseline; and, run alone, a
crew's photos on one bar of signal.

    .venv/bin/python -m bench.photos    # open link to Sent at 150 and 300 ms, into bench/RESULTS.md
"""
from __future__ import annotations

import dataclasses
import io
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from bench import report, sections
from bench.servers import BENCH

START, END = "<!-- signal -->", "<!-- /signal -->"


def _baseline(raw: bytes, quality: int = 82) -> bytes:
    """Pillow alone: decode the image and encode it again as JPEG, nothing else."""
    with Image.open(io.BytesIO(raw)) as image:
        image.load()
        out = io.BytesIO()
        image.save(out, "JPEG", quality=quality)
    return out.getvalue()


@dataclass(frozen=True)
class ServerPhoto:
    """Median times of process_photo and of the bare decode-and-encode baseline on one input."""

    input_bytes: int
    input_size: tuple[int, int]
    ms: float
    runs_ms: list[float]
    ceiling_ms: float
    ceiling_runs_ms: list[float]
    output_bytes: int
    output_size: tuple[int, int]


def time_server_processing(raw: bytes, runs: int = 7) -> ServerPhoto:
    """Time services.files.photos.process_photo and the baseline, alternating, on the same bytes."""
    from services.files.photos import process_photo

    process_photo(raw)
    _baseline(raw)  # warm both paths (imports, codec tables)
    times, ceiling = [], []
    for _ in range(runs):
        start = time.perf_counter()
        processed = process_photo(raw)
        times.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        _baseline(raw)
        ceiling.append((time.perf_counter() - start) * 1000)
    with Image.open(io.BytesIO(raw)) as image:
        size = image.size
    return ServerPhoto(input_bytes=len(raw), input_size=size, ms=statistics.median(times),
                       runs_ms=times, ceiling_ms=statistics.median(ceiling),
                       ceiling_runs_ms=ceiling, output_bytes=len(processed.data),
                       output_size=(processed.width, processed.height))


def measure_signal(capture_url: str, camera: bytes) -> dict:
    """Open link to Sent on one bar at 150 and at 300 ms round trip, in Debian's Chromium."""
    from playwright.sync_api import sync_playwright

    from bench import browser
    with sync_playwright() as playwright:
        chromium = browser.launch(playwright)
        try:
            return {"north_star": browser.north_star(chromium, capture_url, camera),
                    "north_star_far": browser.north_star(chromium, capture_url, camera,
                                                         signal=browser.FAR_BAR)}
        finally:
            chromium.close()


def section(result: dict) -> list[str]:
    """Markdown lines of the section this module writes when run alone."""
    before, after = result["load"]
    quiet = ("a quiet run" if max(before, after) < 1.0 else
             "**not a quiet run:** other work shared the machine")
    return [START, "", "## Photos on one bar of signal (`python -m bench.photos`)", "",
            f"Measured on its own on {result['date']}, commit {result['commit']}, {quiet} (load "
            f"average {before:.1f} before, {after:.1f} after on {os.cpu_count()} cores). The "
            "crew opens the link through support/network.py's proxy (200 kbit/s up, 1.6 Mbit/s "
            "down, CPU 4x slower), picks 12 camera photos, fills 3 lines and signs; the signal is "
            "cut for 3 s twice while the photos go up (between photos, mid-photo). Pieces sent: "
            + "; ".join(f"{ns['round_trip_ms']:g} ms: {ns['pieces']} requests for "
                        f"{ns['photos']} photos" for ns in (result["north_star"],
                                                            result["north_star_far"])) + ".", "",
            *report.summary_table(report.signal_rows(result, 4)), "", END]


def main() -> int:
    """The photos-on-one-bar rows alone, against a service of their own."""
    from bench.run import demo_company
    from bench.servers import start_service
    from support.images import camera_jpeg

    load_before = os.getloadavg()[0]
    camera = camera_jpeg()
    with tempfile.TemporaryDirectory(prefix="ewt-bench-photos-") as workdir:
        service = start_service(Path(workdir))
        try:
            company = demo_company(service)
            result = measure_signal(company["capture_url"], camera)
        finally:
            service.stop()
    result = {name: dataclasses.asdict(ns) for name, ns in result.items()}
    sections.kept_result("photos", result, load_before, "static", "bench")
    sections.put(BENCH / "RESULTS.md", section(result), START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
