"""The memory section alone: the worker's RSS after the load runs, as `make bench` measures it.

    .venv/bin/python -m bench.memory

Starts the service as `make run` does (bin/serve) and the ceiling app, seeds 1,000 then
100,000 tickets and paces every request at both counts exactly as bench/run.py does before
it reads the worker's memory; writes its row into bench/RESULTS.md (a section of its own).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench import report, sections, seed
from bench.run import DEFAULTS, latency_runs, load
from bench.servers import BENCH, rss_mb, start_ceiling, start_service

START, END = "<!-- memory -->", "<!-- /memory -->"


def measure(workdir: Path, args) -> dict:
    """The worker's RSS after each stage of the load runs, and the ceiling app's after its own."""
    service = start_service(workdir)
    started = [service]
    try:
        steps = {"started": rss_mb(service.worker_pid())}
        loaded = load(service, args)
        app, company_id, sent = loaded.app, loaded.company_id, loaded.sent
        ceiling = start_ceiling(workdir, loaded.answers)
        started.append(ceiling)
        for name in report.ROUTES:
            sent.paced(ceiling, name, args)
        runs = {"small": latency_runs(sent, service, app, company_id, args)}
        steps["small"] = rss_mb(service.worker_pid())
        seed.seed_tickets(app, company_id, loaded.template_id, args.big)
        runs["big"] = latency_runs(sent, service, app, company_id, args)
        steps["big"] = rss_mb(service.worker_pid())
        return {"service_mb": steps["big"], "ceiling_mb": rss_mb(ceiling.worker_pid()),
                "steps": steps,
                "p99_ms": {size: {name: run.p99_ms for name, run in phase["paced"].items()}
                           for size, phase in runs.items()}}
    finally:
        for served in reversed(started):
            served.stop()


def section(mem: dict) -> list[str]:
    """Markdown lines of this section when measured on its own."""
    before, after = mem["load"]
    steps = mem["steps"]
    rows = [report._fig("memory.mb", "9. Memory", "Worker RSS after the load runs",
                        mem["service_mb"], "MB", mem["ceiling_mb"],
                        f"≤ {report.RSS_TARGET_MB} MB", mem["service_mb"] <= report.RSS_TARGET_MB)]
    return [START, "", "## Memory after the load runs (`python -m bench.memory`)", "",
            f"Measured on its own on {mem['date']}, commit {mem['commit']} (load average "
            f"{before:.1f} before, {after:.1f} after on {os.cpu_count()} cores): the service "
            "as `make run` serves it, the paced runs of every request at 1,000 and 100,000 "
            "tickets as in Load runs, then the worker's VmRSS; the ceiling is the bare app's "
            "worker after its own runs.", "", *report.summary_table(rows), "",
            f"On the way: {steps['started']:.0f} MB once started, {steps['small']:.0f} MB after "
            f"the runs at 1,000 tickets, {steps['big']:.0f} MB after those at 100,000.", "", END]


def main() -> int:
    """This section alone against a service of its own; written into bench/RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=DEFAULTS["seconds"],
                        help="length of each paced run")
    args = parser.parse_args()
    args.rate, args.small, args.big = DEFAULTS["rate"], DEFAULTS["small"], DEFAULTS["big"]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ewt-bench-memory-") as workdir:
        mem = measure(Path(workdir), args)
    sections.kept_result("memory", mem, load_before)
    if args.seconds >= DEFAULTS["seconds"]:  # a shorter look stays in bench/out/
        sections.put(BENCH / "RESULTS.md", section(mem), START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
