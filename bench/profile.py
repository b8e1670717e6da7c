"""Profile one benchmarked request of the live service with py-spy (where its time goes).

    .venv/bin/python -m bench.profile list          # or any request of report.ROUTES
    .venv/bin/python -m bench.profile queue --tickets 100000

Starts the service as `make run` does, seeds tickets, sends the request at a steady rate
(as `make bench` does) while py-spy samples the serving process (only threads holding the
GIL, so idle and waiting threads do not count), then prints the heaviest frames,
inclusive, and keeps the collapsed stacks in bench/out/profile-<request>.txt for a flame
graph. py-spy needs ptrace rights (root, or kernel.yama.ptrace_scope=0).
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from bench import report, seed
from bench.run import OUT, Requests, demo_company, in_process_app, sign_in
from bench.servers import VENV_BIN, start_service


def top_frames(collapsed: Path, count: int = 40) -> list[tuple[float, str]]:
    """The frames present in the most samples, as (percent of samples, frame)."""
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        total += int(samples)
        for frame in set(stack.split(";")):
            inclusive[frame] += int(samples)
    plumbing = ("threading.py", "concurrent/futures", "waitress/task.py")
    return [(100 * n / max(total, 1), frame) for frame, n in inclusive.most_common()
            if not any(part in frame for part in plumbing)][:count]


def main() -> int:
    """Start the service, send one request at a steady rate, sample it, say where the time goes."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("request", choices=report.ROUTES)
    parser.add_argument("--tickets", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ewt-profile-") as workdir:
        service = start_service(Path(workdir))
        try:
            company = demo_company(service)
            key, project = company["api_key"], next(
                p["id"] for p in company["projects"] if p["change_events"])
            template = seed.make_template(service.url, key, project)
            seed.seed_tickets(in_process_app(service), int(company["company_id"]), template,
                              args.tickets)
            reviewer = company["reviewer"]
            sent = Requests(key, sign_in(service.url, reviewer["email"], reviewer["password"]),
                            project, template)
            out = OUT / f"profile-{args.request}.txt"
            sampler = threading.Thread(target=subprocess.run, args=([
                str(VENV_BIN / "py-spy"), "record", "--pid", str(service.worker_pid()), "--gil",
                "--nonblocking", "--rate", "250", "--duration", str(args.seconds),
                "--format", "raw", "--output", str(out)],), kwargs={"capture_output": True})
            sampler.start()
            result = sent.paced(service, args.request, args)
            sampler.join()
        finally:
            service.stop()
    print(f"{args.request}: {result.rps:.0f} req/s, p50 {result.p50_ms:.1f} ms, "
          f"p99 {result.p99_ms:.1f} ms; stacks in {out}")
    for percent, frame in top_frames(out):
        print(f"{percent:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
