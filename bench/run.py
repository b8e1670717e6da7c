"""Run every benchmark and write bench/RESULTS.md (and the raw figures to bench/out/).

    .venv/bin/python -m bench.run                # what `make bench` runs
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
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from bench import approve, browser, bucket, learning, photos, pm_session, report, sections, seed
from bench.servers import (
    BENCH,
    ROOT,
    LoadResult,
    Served,
    answer_of,
    paced,
    rss_mb,
    start_ceiling,
    start_service,
    wait_until_idle,
)
from support.images import camera_jpeg

OUT = BENCH / "out"
DEFAULTS = {"seconds": 10, "rate": 20.0, "small": 1_000, "big": 100_000}


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
    chromium = subprocess.run([browser.CHROMIUM, "--version"], text=True,
                              capture_output=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kb / 1024 / 1024, 1),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": sections.measured_commit(),
            "python": platform.python_version(), "chromium": chromium}


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


def sign_in(base_url: str, email: str, password: str) -> dict[str, str]:
    """Sign a reviewer in through the login form; return the headers its browser then sends.

    The sign-in is bound to the browser's address and User-Agent, so pages are asked for
    with the same User-Agent as the form was sent with.
    """
    session = requests.Session()
    session.headers["User-Agent"] = "Mozilla/5.0 (bench) reviewer"
    form = session.get(f"{base_url}/login", timeout=30)
    form.raise_for_status()
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1)
    answer = session.post(f"{base_url}/login", timeout=30, allow_redirects=False,
                          data={"csrf_token": token, "email": email, "password": password})
    if answer.status_code != 302:
        raise RuntimeError(f"signing in answered {answer.status_code}, not a redirect")
    return {"User-Agent": session.headers["User-Agent"], "Accept-Encoding": "gzip, deflate, br",
            "Cookie": "; ".join(f"{cookie.name}={cookie.value}" for cookie in session.cookies)}


def main() -> int:
    """Parse options, run every section, write the results."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=DEFAULTS["seconds"],
                        help="length of each paced run")
    parser.add_argument("--rate", type=float, default=DEFAULTS["rate"],
                        help="requests per second of the paced runs")
    parser.add_argument("--small", type=int, default=DEFAULTS["small"],
                        help="tickets for the first latency runs")
    parser.add_argument("--big", type=int, default=DEFAULTS["big"],
                        help="tickets for the second latency runs")
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
    # Only a full run (the defaults, or longer runs) replaces bench/RESULTS.md; a quick look
    # goes to bench/out/.
    full = (all(getattr(args, name) == DEFAULTS[name] for name in ("rate", "small", "big"))
            and args.seconds >= DEFAULTS["seconds"])
    target = BENCH / "RESULTS.md" if full else OUT / "RESULTS.md"
    report.write(json.loads(text), target)
    log(f"wrote {target}")
    return 0


class Requests:
    """The benchmarked requests (report.ROUTES), sent alike to the service and to the ceiling.

    API calls carry the company's key; pages carry what a signed-in reviewer's browser sends
    (see sign_in).
    """

    def __init__(self, key: str, signed_in: dict[str, str], project_id: str,
                 ticket_id: str) -> None:
        api = {"Authorization": f"Bearer {key}"}
        create = json.dumps(approve.ticket_body(project_id)).encode()
        self.sent: dict[str, tuple[str, str, dict[str, str], bytes | None]] = {
            "me": ("GET", "/v1/me", api, None),
            "list": ("GET", "/v1/tickets?limit=50", api, None),
            "list_filtered": ("GET", "/v1/tickets?limit=50&status=submitted&project_id="
                              + project_id, api, None),
            "get": ("GET", f"/v1/tickets/{ticket_id}", api, None),
            "queue": ("GET", "/queue", signed_in, None),
            "queue_filtered": ("GET", f"/queue?status=all&project_id={project_id}", signed_in,
                               None),
            "create": ("POST", "/v1/tickets", {**api, "Content-Type": "application/json"}, create),
        }
        assert tuple(self.sent) == report.ROUTES

    def answers(self, service: Served, names: list[str]) -> dict[str, dict]:
        """The service's answer to each named request, by "METHOD /path?query", for the ceiling."""
        found = {}
        for name in names:
            method, path, headers, body = self.sent[name]
            answer = answer_of(service.url + path, method=method, headers=headers, body=body)
            if not 200 <= answer["status"] < 300:
                raise RuntimeError(f"{report.LABELS[name]} answered {answer['status']}")
            found[f"{method} {path}"] = answer
        return found

    def paced(self, server: Served, name: str, args) -> LoadResult:
        """One paced (open-loop) run of a request on a server."""
        method, path, headers, body = self.sent[name]
        log(f"paced {args.rate:g} req/s {server.name} {report.LABELS[name]}")
        worker = server.worker_pid()
        result = paced(server.url + path, method=method, headers=headers, body=body,
                       rate=args.rate, seconds=args.seconds, worker_pid=worker)
        # Figures from a run with failed answers would measure failures. An answer too slow
        # to wait for is a figure (the slowness) and is reported beside it.
        if any(count for kind, count in result.errors.items() if kind != "timeout"):
            raise RuntimeError(f"{server.name} paced {name}: the run saw errors {result.errors}")
        if result.errors["timeout"]:
            log(f"{result.errors['timeout']} of {result.requests} timed out; waiting for the "
                "worker to finish what is queued")
        wait_until_idle(worker)
        return result


def latency_runs(sent: Requests, service: Served, app, company_id: int, args) -> dict:
    """A paced run of each request at the current ticket count, reads before creates."""
    return {"tickets": seed.ticket_count(app, company_id),
            "paced": {name: sent.paced(service, name, args) for name in report.ROUTES}}


@dataclasses.dataclass
class Loaded:
    """The bench's demo company on the service, its paced requests and their answers."""

    company: dict
    key: str
    company_id: int
    project_id: str
    template_id: str
    app: object
    sent: Requests
    answers: dict


def load(service: Served, args) -> Loaded:
    """A demo company with a template ticket, seeded to `args.small` tickets, and every paced
    request's answer (the create's before seeding, so the count is as seeded)."""
    company = demo_company(service)
    key, company_id = company["api_key"], int(company["company_id"])
    project_id = next(p["id"] for p in company["projects"] if p["change_events"])
    app = in_process_app(service)
    template_id = seed.make_template(service.url, key, project_id)
    reviewer = company["reviewer"]
    sent = Requests(key, sign_in(service.url, reviewer["email"], reviewer["password"]),
                    project_id, template_id)
    answers = sent.answers(service, ["create"])
    log(f"seeding up to {args.small} tickets, copies of {template_id}")
    seed.seed_tickets(app, company_id, template_id, args.small)
    answers.update(sent.answers(service, [name for name in report.ROUTES if name != "create"]))
    return Loaded(company, key, company_id, project_id, template_id, app, sent, answers)


def run_sections(workdir: Path, service, camera: bytes, args, results: dict,
                 started: list) -> None:
    """Every section against the running service; servers it starts go on `started`."""
    log(f"service up on {service.url}; making the bench's demo company")
    loaded = load(service, args)
    company, key, company_id = loaded.company, loaded.key, loaded.company_id
    project_id, template_id, app = loaded.project_id, loaded.template_id, loaded.app
    sent, answers = loaded.sent, loaded.answers
    ceiling = start_ceiling(workdir, answers)
    started.append(ceiling)
    results["sizes"] = {name: answers[f"{method} {path}"]["bytes"]
                        for name, (method, path, _, _) in sent.sent.items()}

    results["latency"] = {"ceiling_paced": {name: sent.paced(ceiling, name, args)
                                            for name in report.ROUTES}}
    results["latency"]["small"] = latency_runs(sent, service, app, company_id, args)

    log(f"seeding up to {args.big} tickets")
    start = time.monotonic()
    added = seed.seed_tickets(app, company_id, template_id, args.big)
    results["latency"]["seed"] = {"seconds": time.monotonic() - start, "added": added}
    log(f"seeded {added} in {results['latency']['seed']['seconds']:.1f} s")
    results["latency"]["big"] = latency_runs(sent, service, app, company_id, args)

    results["memory"] = {"service_mb": rss_mb(service.worker_pid()),
                         "ceiling_mb": rss_mb(ceiling.worker_pid())}
    log(f"memory after the paced runs: {results['memory']}")

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
            log("capture on one bar: open link to Sent, 12 photos, cut between photos and mid-photo")
            results["north_star"] = browser.north_star(chromium, company["capture_url"], camera)
            log("the same at 300 ms round trip")
            results["north_star_far"] = browser.north_star(chromium, company["capture_url"], camera,
                                                           signal=browser.FAR_BAR)
        finally:
            chromium.close()
    results["photo_browser"] = compressed
    results["memory"]["service_after_photo_pages_mb"] = rss_mb(service.worker_pid())

    log("server processing of one photo")
    results["photo_server"] = photos.time_server_processing(compressed.output)
    log("storing a photo in a bucket on loopback, and sending one from it")
    results["photo_bucket"] = bucket.measure(compressed.output)

    log("approvals against the sandbox")
    results["approve"] = approve.measure_approvals(app, service.url, company_id, key, project_id,
                                                   compressed.output)
    log("an approval with three photos while each Procore call takes 150 ms")
    results["approve_distant"] = approve.measure_distant(app, service.url, company_id, key,
                                                         project_id, compressed.output)
    results["memory"]["service_end_mb"] = rss_mb(service.worker_pid())

    log("routing that learns: the corpora, then 50,000 decisions over 20,000 wordings")
    results["learning"] = learning.measure(service, workdir, app, key, company, project_id,
                                           template_id)

    log("a PM's week on a tablet, then an approval while Procore hangs")
    week = demo_company(service)
    with sync_playwright() as playwright:
        chromium = browser.launch(playwright)
        try:
            results["pm"] = {**pm_session.session(chromium, service.url, week),
                             # (a company of its own: after the week's 60 approvals, the
                             # next one first waits for Procore's rate window, not the hang)
                             **pm_session.hung(chromium, service.url, demo_company(service))}
        finally:
            chromium.close()
    log(f"the PM's week: {results['pm']}")


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
