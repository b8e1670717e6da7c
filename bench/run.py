"""Run every benchmark and write bench/RESULTS.md (and the raw figures to bench/out/).

    .venv/bin/python -m bench.run                # what `make bench` runs
    .venv/bin/python -m bench.run --rounds 3     # steadier ratios: 3 wrk pairs each, median kept
    .venv/bin/python -m bench.run --seconds 3    # a quick look, written to bench/out/RESULTS.md

Each figure is measured beside its ceiling in the same run; see RESULTS.md for the list.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from bench import approve, browser, photos, report, seed
from bench.servers import (
    BENCH,
    ROOT,
    LoadResult,
    Served,
    paced,
    rss_mb,
    start_ceiling,
    start_service,
    wrk,
)
from tests.images import camera_jpeg

OUT = BENCH / "out"
READS = ("me", "list", "get")
ENDPOINTS = (*READS, "create")
DEFAULTS = {"seconds": 10, "rounds": 1, "rate": 20.0, "connections": 16, "small": 1_000,
            "big": 100_000}


def log(message: str) -> None:
    """Progress on stderr, with the time since the start."""
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


STARTED = time.monotonic()


def machine() -> dict:
    """CPU model, cores, memory, and the versions that matter for the figures."""
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor() or "unknown")
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           text=True, capture_output=True).stdout.strip()
    chromium = subprocess.run([browser.CHROMIUM, "--version"], text=True,
                              capture_output=True).stdout.strip()
    wrk_version = subprocess.run(["wrk", "-v"], text=True, capture_output=True)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kb / 1024 / 1024, 1),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit + (" (with uncommitted changes)" if dirty else ""),
            "python": platform.python_version(), "chromium": chromium,
            "wrk": (wrk_version.stdout + wrk_version.stderr).split("Copyright")[0].strip()}


def demo_company(service) -> dict:
    """A fresh demo company made by `flask --app app demo --json` against the running service."""
    env = dict(service.extra["env"], EWT_PUBLIC_BASE_URL=service.url)
    done = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "demo", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    return json.loads(done.stdout)


def in_process_app(service):
    """An app built from the service's own environment: same database, photos and sandbox."""
    os.environ.update({k: v for k, v in service.extra["env"].items() if k.startswith("EWT_")})
    import logging

    from app import create_app

    app = create_app()
    logging.getLogger("ewt.requests").setLevel(logging.WARNING)  # keep the bench's output readable
    return app


def body_size(url: str, key: str, method: str = "GET", body: dict | None = None) -> int:
    """The size of one answer's JSON body, checking it succeeded."""
    answer = requests.request(method, url, json=body, timeout=30,
                              headers={"Authorization": f"Bearer {key}"})
    answer.raise_for_status()
    return len(answer.content)


def main() -> int:
    """Parse options, run every section, write the results."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=DEFAULTS["seconds"],
                        help="length of each paced run and each wrk run")
    parser.add_argument("--rounds", type=int, default=DEFAULTS["rounds"],
                        help="ceiling-then-service wrk pairs per figure (the median ratio is kept)")
    parser.add_argument("--rate", type=float, default=DEFAULTS["rate"],
                        help="requests per second of the paced runs")
    parser.add_argument("--connections", type=int, default=DEFAULTS["connections"],
                        help="connections of the wrk runs")
    parser.add_argument("--small", type=int, default=DEFAULTS["small"],
                        help="tickets for the first latency runs")
    parser.add_argument("--big", type=int, default=DEFAULTS["big"],
                        help="tickets for the second latency runs")
    parser.add_argument("--save-baseline", action="store_true",
                        help="also keep these figures as bench/baseline.json (the 'before')")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    results: dict = {"machine": machine(), "settings": vars(args)}
    log(f"machine: {results['machine']}")

    log("making a 12-megapixel camera JPEG")
    camera = camera_jpeg()  # the photo the browser tests use
    with tempfile.TemporaryDirectory(prefix="ewt-bench-") as workdir:
        service = start_service(Path(workdir))
        started = [service]  # run_sections adds the ceiling, so a failure still stops it
        try:
            run_sections(Path(workdir), service, camera, args, results, started)
        except BaseException:
            for served in started:
                sys.stderr.write(f"--- tail of {served.log_path.name}\n")
                sys.stderr.write(served.log_path.read_text(errors="replace")[-3000:])
            raise
        finally:
            for served in reversed(started):
                served.stop()
    text = json.dumps(results, indent=2, default=_plain)
    (OUT / "results.json").write_text(text)
    if args.save_baseline:
        (BENCH / "baseline.json").write_text(text)
    # Only a full run (the defaults, or longer runs and more rounds) replaces bench/RESULTS.md;
    # a quick look goes to bench/out/.
    full = (all(getattr(args, name) == DEFAULTS[name]
                for name in ("rate", "connections", "small", "big"))
            and args.seconds >= DEFAULTS["seconds"] and args.rounds >= DEFAULTS["rounds"])
    target = BENCH / "RESULTS.md" if full else OUT / "RESULTS.md"
    report.write(json.loads(text), target)
    log(f"wrote {target}")
    return 0


def _check(result: LoadResult, server: str, what: str) -> None:
    """Refuse figures from a run that had errors: they would measure failures."""
    if not result.ok:
        raise RuntimeError(f"{server} {what}: the load run saw errors {result.errors}")


class Api:
    """The four benchmarked requests, sent alike to the service and to the ceiling."""

    def __init__(self, key: str, project_id: str, ticket_id: str) -> None:
        self.key, self.project_id = key, project_id
        self.paths = {"me": "/v1/me", "list": "/v1/tickets?limit=50",
                      "get": f"/v1/tickets/{ticket_id}", "create": "/v1/tickets"}
        self.create_body = json.dumps(approve.ticket_body(project_id)).encode()

    def paced(self, server: Served, name: str, args) -> LoadResult:
        """One paced (open-loop) run of a request on a server."""
        headers = {"Authorization": f"Bearer {self.key}"}
        body = None
        if name == "create":
            headers["Content-Type"] = "application/json"
            body = self.create_body
        log(f"paced {args.rate:g} req/s {server.name} {report.LABELS[name]}")
        result = paced(server.url + self.paths[name], method="POST" if body else "GET",
                       headers=headers, body=body, rate=args.rate, seconds=args.seconds,
                       worker_pid=server.worker_pid())
        _check(result, server.name, f"paced {name}")
        return result

    def closed(self, server: Served, name: str, args) -> LoadResult:
        """One wrk (closed-loop) run of a request on a server."""
        log(f"wrk {args.connections} connections {server.name} {report.LABELS[name]}")
        script = "post_ticket.lua" if name == "create" else "get.lua"
        result = wrk(server.url + self.paths[name], script,
                     {"BENCH_KEY": self.key, "BENCH_PROJECT": self.project_id},
                     seconds=args.seconds, connections=args.connections,
                     worker_pid=server.worker_pid())
        _check(result, server.name, f"wrk {name}")
        return result

    def pairs(self, ceiling: Served, service: Served, name: str, args) -> dict:
        """`rounds` wrk pairs, ceiling then service back to back; the pair with the median ratio."""
        runs = [{"ceiling": self.closed(ceiling, name, args),
                 "service": self.closed(service, name, args)} for _ in range(args.rounds)]
        ratios = [run["service"].rps / run["ceiling"].rps for run in runs]
        middle = sorted(range(len(runs)), key=lambda i: ratios[i])[(len(runs) - 1) // 2]
        return {**runs[middle], "ratios": ratios}


def latency_runs(api: Api, ceiling: Served, service: Served, app, company_id: int,
                 args) -> dict:
    """Paced and wrk runs of each request at the current ticket count, reads before creates."""
    tickets = seed.ticket_count(app, company_id)
    runs: dict = {"tickets": tickets, "paced": {}, "closed": {}}
    for name in ENDPOINTS:
        runs["paced"][name] = api.paced(service, name, args)
        runs["closed"][name] = api.pairs(ceiling, service, name, args)
    return runs


def run_sections(workdir: Path, service, camera: bytes, args, results: dict,
                 started: list) -> None:
    """Every section against the running service; servers it starts go on `started`."""
    log(f"service up on {service.url}; making the bench's demo company")
    company = demo_company(service)
    key, company_id = company["api_key"], int(company["company_id"])
    project_id = next(p["id"] for p in company["projects"] if p["change_events"])
    app = in_process_app(service)

    template_id = seed.make_template(service.url, key, project_id)
    sizes = {"create": body_size(service.url + "/v1/tickets", key, "POST",
                                 approve.ticket_body(project_id))}
    log(f"seeding up to {args.small} tickets, copies of {template_id}")
    seed.seed_tickets(app, company_id, template_id, args.small)
    api = Api(key, project_id, template_id)
    sizes.update({name: body_size(service.url + api.paths[name], key) for name in READS})
    ceiling = start_ceiling(workdir, sizes)
    started.append(ceiling)
    results["sizes"] = sizes

    results["latency"] = {"ceiling_paced": {name: api.paced(ceiling, name, args)
                                            for name in ENDPOINTS}}
    results["latency"]["small"] = latency_runs(api, ceiling, service, app, company_id, args)

    log(f"seeding up to {args.big} tickets")
    start = time.monotonic()
    added = seed.seed_tickets(app, company_id, template_id, args.big)
    results["latency"]["seed"] = {"seconds": time.monotonic() - start, "added": added}
    log(f"seeded {added} in {results['latency']['seed']['seconds']:.1f} s")
    results["latency"]["big"] = latency_runs(api, ceiling, service, app, company_id, args)

    results["memory"] = {"service_mb": rss_mb(service.worker_pid()),
                         "ceiling_mb": rss_mb(ceiling.worker_pid())}
    log(f"memory after load: {results['memory']}")

    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        chromium = browser.launch(playwright)
        try:
            log("capture page, first load, throttled")
            page = browser.measure_page(chromium, company["capture_url"])
            minimal = browser.measure_page(chromium, ceiling.url + "/minimal")
            results["page"] = {"capture": page, "minimal": minimal}
            results["memory"]["service_after_pages_mb"] = rss_mb(service.worker_pid())
            log("photo compression in the page, CPU 4x slower")
            compressed = browser.compress_photo(chromium, company["capture_url"], camera)
            log("capture on one bar: open link to Sent, 12 photos, two drops")
            results["north_star"] = browser.north_star(chromium, company["capture_url"], camera)
        finally:
            chromium.close()
    results["photo_browser"] = compressed
    results["memory"]["service_after_photo_pages_mb"] = rss_mb(service.worker_pid())

    log("server processing of one photo")
    results["photo_server"] = photos.time_server_processing(compressed.output)

    log("approvals against the sandbox")
    results["approve"] = approve.measure_approvals(app, service.url, company_id, key, project_id,
                                                   compressed.output)
    results["memory"]["service_end_mb"] = rss_mb(service.worker_pid())


def _plain(value):
    """JSON for dataclasses and bytes in the results."""
    if dataclasses.is_dataclass(value):
        data = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, LoadResult):
            data["ok"] = value.ok
        return data
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
