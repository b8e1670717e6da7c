"""Routing that learns: how often it lands where the PM would, and what it costs.

The corpus (support/routing_corpus.py) is replayed through the live service as a PM would (each
ticket created, then approved on the PM's codes), and then its new lines are sent: the share
that lands on the PM's code is the figure. The held-out corpus (support/routing_heldout.py,
written apart from the synonym table) gives the right, wrong and abstained shares. Speed and
memory are measured on the service's own database: a company with 50,000 past decisions over
20,000 distinct wordings, a 20-line ticket routed in this process from scratch (no answer kept
from before) against the same ticket with no decisions, each paced create's lines routed in
this process ticket by ticket, and POST /v1/tickets paced at 20 a second against the running
service, each create a 20-line ticket of wordings it never saw, beside the bare route's ceiling.

    .venv/bin/python -m bench.learning    # this section alone, written into bench/RESULTS.md
"""
from __future__ import annotations

import datetime as dt
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import requests

from bench import report, sections, seed
from bench.servers import (
    BENCH,
    answer_of,
    paced,
    start_ceiling,
    start_service,
    wait_until_idle,
)
from support.routing_corpus import COST_TYPE, HISTORY, NEW, ticket_body
from support.routing_wordings import wordings

DECISIONS = 50_000
WORDINGS = 20_000
LINES = 20
RUNS = 30
BAR_MS = 25
RATE, SECONDS = 20.0, 10.0
START, END = "<!-- learning -->", "<!-- /learning -->"
DESCRIPTION = "Extra work on the north wing"


def _send(api, headers, sub, project_id, description, lines):
    """POST a ticket; the ticket and each given line's index in its routing."""
    body, places = ticket_body(sub, project_id, description, lines)
    made = requests.post(f"{api}/tickets", json=body, headers=headers, timeout=60)
    made.raise_for_status()
    return made.json(), places


def replay_history(base_url: str, key: str, projects: list[dict]) -> dict[str, str]:
    """Send and approve the corpus's past tickets on the PM's codes (what routing learns
    from); the project ids standing for its projects "A" and "B"."""
    api, headers = f"{base_url}/v1", {"Authorization": f"Bearer {key}"}
    chosen = [p for p in projects if p["change_events"]][:2]
    letters = {"A": chosen[0]["id"], "B": chosen[1]["id"]}
    codes = {}
    for letter, project_id in letters.items():
        items = requests.get(f"{api}/projects/{project_id}/cost-codes", headers=headers,
                             timeout=60).json()["data"]
        codes[letter] = {(item["code"], code["cost_type"]): code["id"]
                         for item in items for code in item["budget_codes"]}
    for sub, letter, description, lines in HISTORY:
        ticket, places = _send(api, headers, sub, letters[letter], description,
                               [(kind, said) for kind, said, _ in lines])
        routes = {str(place): codes[letter][code, COST_TYPE[kind]]
                  for place, (kind, _, code) in zip(places, lines, strict=True)}
        requests.post(f"{api}/tickets/{ticket['id']}/approve", headers=headers, timeout=120,
                      json={"destination": "daily_log", "routes": routes}).raise_for_status()
    return letters


def corpus(base_url: str, key: str, projects: list[dict]) -> dict:
    """Replay the PM's habits, then send the new lines; how many land on the PM's code."""
    api, headers = f"{base_url}/v1", {"Authorization": f"Bearer {key}"}
    letters = replay_history(base_url, key, projects)
    right = 0
    for sub, letter, description, kind, said, want in NEW:
        ticket, [place] = _send(api, headers, sub, letters[letter], description, [(kind, said)])
        line = requests.get(f"{api}/tickets/{ticket['id']}", headers=headers,
                            timeout=60).json()["routing"][place]
        got = line["budget_code"].rsplit(".", 1)[0] if line["budget_code"] else None
        right += got == want
    return {"lines": len(NEW), "right": right}


def _decisions(company_id: int, project_id: str) -> list[dict]:
    """DECISIONS made-up decisions of one company over WORDINGS distinct wordings from 30
    subs: each wording once, the rest repeating the common ones more often (support/'s
    wordings)."""
    rng = random.Random(7)
    seen = wordings(WORDINGS, 7)
    subs = [f"Sub {n:02d}" for n in range(30)]
    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for n in range(DECISIONS):
        kind, text, code = seen[n] if n < len(seen) else \
            seen[min(len(seen) - 1, int(rng.paretovariate(1.2)) - 1)]
        rows.append({"company_id": company_id, "project_id": project_id,
                     "ticket_id": f"bench-{n:08d}", "line": 0, "kind": kind, "text": text,
                     "description": DESCRIPTION, "sub": rng.choice(subs),
                     "crew_cost_code": None, "cost_code": code, "cost_type": COST_TYPE[kind],
                     "budget_code_id": None, "budget_code": f"{code}.L", "how": "chosen",
                     "decided_at": start + dt.timedelta(minutes=n)})
    return rows


def _fresh_lines(count: int) -> list[list[tuple[str, str]]]:
    """`count` tickets' LINES lines (kind, text), of wordings no decision used."""
    fresh = wordings(WORDINGS + count * LINES, 7)[WORDINGS:]
    return [[(kind, text) for kind, text, _code in fresh[n * LINES:(n + 1) * LINES]]
            for n in range(count)]


def _create_bodies(project_id: str, count: int) -> list[bytes]:
    """`count` 20-line tickets as crews send them, of wordings no decision used."""
    return [json.dumps(ticket_body("Sub 03", project_id, DESCRIPTION, lines)[0]).encode()
            for lines in _fresh_lines(count)]


def _paced_routing_ms(index) -> list[float]:
    """The thread CPU of routing each paced create's lines on the index, nothing kept from
    the ticket before (what each create's routing costs, ticket by ticket)."""
    found = []
    for lines in _fresh_lines(int(RATE * (SECONDS + 1))):
        for kept in index._answers.values():
            kept.clear()
        start = time.thread_time()
        for kind, text in lines:
            index.suggest(kind, text, "Sub 03", DESCRIPTION)
        found.append((time.thread_time() - start) * 1000)
    return found


def held_out() -> dict:
    """The held-out corpus's right, wrong and abstained lines (support/routing_heldout.py)."""
    from support.routing_index_cases import held_out_score

    return held_out_score()


def speed(app, service, workdir: Path, key: str, company_id: int, project_id: str,
          template_id: str) -> dict:
    """Routing a 20-line ticket for a company with 50,000 past decisions over 20,000 wordings,
    from scratch, against the same with none; building those decisions' index and the memory
    it holds; creates paced at 20 a second with the index in use, beside the bare route."""
    from sqlalchemy import delete, insert

    from models import RoutingDecision, Ticket, db
    from services.project_system import projects
    from services.routing import learning
    from services.tickets.ticket_shapes import Wait, routing_of

    lines = [{"kind": "labor", "trade": t, "hours": "4", "workers": "1", "rate": "60",
              "amount": "240", "costCode": None} for t in
             ("Framer", "carpintero", "Electrican", "plomero", "laborers", "ironworker",
              "apprentice electrician", "drywall hanger", "finisher", "Welder")] + \
            [{"kind": "equipment", "description": d, "hours": "2", "rate": "90", "amount": "180",
              "costCode": None} for d in ("Scissor lift", "boomlift", "dumpster", "skid steer",
                                          "excavator")] + \
            [{"kind": "materials", "description": d, "quantity": "3", "unitCost": "12",
              "amount": "36", "costCode": None} for d in ("metal studs", "rebar #5", "conduit EMT",
                                                         "plywood", "grout")]
    assert len(lines) == LINES
    with app.app_context():
        db.session.execute(delete(RoutingDecision).where(RoutingDecision.company_id == company_id))
        db.session.commit()
        template = db.session.get(Ticket, template_id)
        ticket = Ticket(id="bench-routing", company_id=company_id, project_id=project_id,
                        status="submitted", lines=lines, sub="Sub 03",
                        description=template.description)
        projects.catalog(company_id, project_id)  # the project's codes, read once

        def route_ms() -> list[float]:
            found = []
            for _ in range(RUNS):
                index = learning.index_for(company_id)
                if index is not None:
                    for kept in index._answers.values():
                        kept.clear()  # nothing kept from the run before
                start, cpu = time.perf_counter(), time.thread_time()
                routing_of(ticket, Wait.YES)
                found.append((time.perf_counter() - start) * 1000)
                cpu_ms.append((time.thread_time() - cpu) * 1000)
            return found

        cpu_ms: list[float] = []

        bare = route_ms()
        db.session.remove()  # no read of this process's open while the service writes
        unlearned = _creates(service, key, _create_bodies(project_id, int(RATE * (SECONDS + 1))))
        print(f"paced creates with no decisions: {unlearned}", file=sys.stderr, flush=True)
        rows = _decisions(company_id, project_id)
        for chunk in range(0, len(rows), 5_000):
            db.session.execute(insert(RoutingDecision), rows[chunk:chunk + 5_000])
        db.session.commit()
        app.extensions.pop("routing_decisions", None)
        gc.collect()
        tracked = len(gc.get_objects())
        start = time.perf_counter()
        learning.index_for(company_id)
        build_ms = (time.perf_counter() - start) * 1000
        gc.collect()  # what the cycle collector still walks once the index has settled
        tracked = len(gc.get_objects()) - tracked
        app.extensions.pop("routing_decisions", None)
        tracemalloc.start()  # read again to count what it holds (tracing slows it down)
        index = learning.index_for(company_id)
        held, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        cpu_ms.clear()
        learned = route_ms()
        paced_routing = sorted(_paced_routing_ms(index))
        print(f"routing from scratch: {sorted(learned)} ms; none learned: {sorted(bare)} ms",
              file=sys.stderr, flush=True)
        db.session.remove()  # no read of this process's open while the service writes
        create = _paced_creates(service, workdir, key, project_id, template_id)
        db.session.execute(delete(RoutingDecision).where(RoutingDecision.company_id == company_id))
        db.session.commit()
        app.extensions.pop("routing_decisions", None)
        db.session.remove()
    return {"decisions": index.size, "wordings": sum(len(keys) for keys in index._keys.values()),
            "lines": LINES, "route_ms": statistics.median(learned),
            "route_cpu_ms": statistics.median(cpu_ms),
            "route_p99_ms": max(learned), "bare_ms": statistics.median(bare),
            "paced_route_ms": statistics.median(paced_routing),
            "paced_route_slowest_ms": paced_routing[-1], "paced_tickets": len(paced_routing),
            "bare_slowest_ms": max(bare), "build_ms": build_ms, "index_mb": held / 1e6,
            "index_tracked": tracked,
            "create_unlearned_p99_ms": unlearned.p99_ms,
            "create_unlearned_cpu_ms": 1000 * unlearned.worker_cpu_s / unlearned.requests,
            **create}


def _paced_creates(service, workdir: Path, key: str, project_id: str, template_id: str) -> dict:
    """POST /v1/tickets at RATE a second for SECONDS, each a 20-line ticket of new wordings
    routed on the service's index of the decisions, and the bare route's answer at the same
    pace (each run after a one-second warm-up)."""
    api = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    # A read brings the service's index up to date; a create only uses it.
    requests.get(f"{service.url}/v1/tickets/{template_id}", headers=api,
                 timeout=120).raise_for_status()
    bodies = _create_bodies(project_id, int(RATE * (SECONDS + 1)) + 2)
    made = requests.post(f"{service.url}/v1/tickets", data=bodies[-1], headers=api, timeout=60)
    made.raise_for_status()
    learned = sum(line["learned"] for line in made.json()["routing"])
    first = answer_of(f"{service.url}/v1/tickets", method="POST", headers=api, body=bodies[-2])
    ceiling = start_ceiling(workdir, {"POST /v1/tickets": first})
    try:
        bare = paced(f"{ceiling.url}/v1/tickets", method="POST", headers=api, body=bodies[:-2],
                     rate=RATE, seconds=SECONDS, worker_pid=ceiling.worker_pid())
    finally:
        ceiling.stop()
    run = _creates(service, key, bodies[:-2])
    print(f"paced creates: {run}; the bare route: {bare}", file=sys.stderr, flush=True)
    return {"create_p99_ms": run.p99_ms, "create_p50_ms": run.p50_ms,
            "create_cpu_ms": 1000 * run.worker_cpu_s / run.requests,
            "create_requests": run.requests, "create_ceiling_p99_ms": bare.p99_ms,
            "create_learned_lines": learned}


def _creates(service, key: str, bodies: list[bytes]):
    """The service's creates of `bodies`, paced at RATE a second for SECONDS."""
    api = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    run = paced(f"{service.url}/v1/tickets", method="POST", headers=api, body=bodies,
                rate=RATE, seconds=SECONDS, worker_pid=service.worker_pid())
    wait_until_idle(service.worker_pid())
    if not run.ok:
        raise RuntimeError(f"paced creates met errors: {run.errors}")
    return run


def rows(lr: dict, number: int) -> list[dict]:
    """The summary table's rows for routing that learns (section `number`)."""
    over = f" over {lr['wordings']:,} wordings" if "wordings" in lr else ""
    section = (f"{number}. Routing that learns (support/routing_corpus.py, "
               f"support/routing_heldout.py; {lr['decisions']:,} decisions{over})")
    share = 100 * lr["corpus"]["right"] / lr["corpus"]["lines"]
    found = [report._fig("learning.corpus", section,
                         f"New lines on the PM's code ({lr['corpus']['right']} of "
                         f"{lr['corpus']['lines']}; written beside the synonym table)", share, "%",
                         None, "≥ 90 %", share >= 90)]
    held = lr.get("held_out")
    if held:
        for name, count, target, ok in (
                ("right", held["right"], "—", None),
                ("wrong suggestion", held["wrong"], "≤ 2 %", held["wrong"] <= 0.02 * held["lines"]),
                ("abstained", held["abstained"], "—", None)):
            found.append(report._fig(f"learning.held_out.{name}", section,
                                     f"Held-out lines {name} ({count} of {held['lines']})",
                                     100 * count / held["lines"], "%", None, target, ok))
    bar = BAR_MS if "wordings" in lr else 50
    found += [
        report._fig("learning.route_ms", section, f"Routing a {lr['lines']}-line ticket from "
                    "scratch (median; ceiling: no decisions)", lr["route_ms"], "ms",
                    lr["bare_ms"], f"≤ {bar} ms", lr["route_ms"] <= bar),
        report._fig("learning.route_slowest_ms", section, f"The same, slowest of {RUNS} runs",
                    lr["route_p99_ms"], "ms", lr["bare_ms"], f"≤ {bar} ms",
                    lr["route_p99_ms"] <= bar)]
    if "route_cpu_ms" in lr:
        found.append(report._fig("learning.route_cpu_ms", section,
                                 "The same, its thread's CPU time (median; what the load does "
                                 "not add)", lr["route_cpu_ms"], "ms", None, "—", None))
    if "paced_route_ms" in lr:
        found += [
            report._fig("learning.paced_route_ms", section, "Routing each paced create's 20 new "
                        "wordings in process, its thread's CPU time (median)",
                        lr["paced_route_ms"], "ms", None, f"≤ {bar} ms", lr["paced_route_ms"] <= bar),
            report._fig("learning.paced_route_slowest_ms", section,
                        f"The same, slowest of {lr['paced_tickets']} tickets",
                        lr["paced_route_slowest_ms"], "ms", None, f"≤ {bar} ms",
                        lr["paced_route_slowest_ms"] <= bar)]
    if "create_p99_ms" in lr:
        found.append(report._fig(
            "learning.create_p99_ms", section,
            f"POST /v1/tickets p99 at {RATE:g}/s, 20 new wordings each ({lr['create_learned_lines']}"
            " of 20 learned in one; ceiling: the bare route)", lr["create_p99_ms"], "ms",
            lr["create_ceiling_p99_ms"], f"≤ {BAR_MS} ms", lr["create_p99_ms"] <= BAR_MS))
    if "create_cpu_ms" in lr:
        found += [
            report._fig("learning.create_unlearned_p99_ms", section,
                        "The same creates for a company with no decisions, p99 (ceiling: the "
                        "bare route)", lr["create_unlearned_p99_ms"], "ms",
                        lr["create_ceiling_p99_ms"], f"≤ {BAR_MS} ms",
                        lr["create_unlearned_p99_ms"] <= BAR_MS),
            report._fig("learning.create_cpu_ms", section,
                        "The worker's CPU time per create (ceiling: with no decisions; what "
                        "the load does not add)", lr["create_cpu_ms"], "ms",
                        lr["create_unlearned_cpu_ms"], "—", None)]
    found += [report._fig("learning.build_ms", section, "Reading the decisions in (first use)",
                          lr["build_ms"], "ms", None, "—", None),
              report._fig("learning.index_mb", section, "Memory the index holds",
                          lr["index_mb"], "MB", None, "≤ 20 MB", lr["index_mb"] <= 20)]
    if "index_tracked" in lr:
        found.append(report._fig(
            "learning.index_tracked", section, "Objects the index adds to each full garbage "
            "collection (a full one walks them all, in whichever request it falls)",
            lr["index_tracked"], "objects", None, "—", None))
    return found


def _quietness(lr: dict) -> str:
    """Whether the machine was quiet while this section ran, from its load average."""
    before, after = lr["load"]
    load = f"load average {before:.1f} before, {after:.1f} after on {os.cpu_count()} cores"
    if max(before, after) < 1.0:
        return f"a quiet run ({load})"
    return f"**not a quiet run:** other work shared the machine ({load})"


def section(lr: dict) -> list[str]:
    """Markdown lines of this section when measured on its own."""
    return [START, "", "## Routing that learns at scale (`python -m bench.learning`)", "",
            f"Measured on its own on {lr['date']}, commit {lr['commit']}, {_quietness(lr)}; each "
            "figure stands beside its ceiling measured in the same run.", "",
            *report.summary_table(rows(lr, 7)), "", END]


def update(lr: dict, path: Path = BENCH / "RESULTS.md") -> None:
    """Replace (or add) this section of RESULTS.md."""
    sections.put(path, section(lr), START, END)


def measure(service, workdir: Path, app, key: str, company: dict, project_id: str,
            template_id: str) -> dict:
    """Every figure of this section against a running service."""
    return {"corpus": corpus(service.url, key, company["projects"]), "held_out": held_out(),
            **speed(app, service, workdir, key, int(company["company_id"]), project_id,
                    template_id)}


def main() -> int:
    """This section alone against a service of its own; written into bench/RESULTS.md."""
    from bench.run import demo_company, in_process_app

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ewt-bench-learning-") as workdir:
        service = start_service(Path(workdir))
        try:
            company = demo_company(service)
            key = company["api_key"]
            project_id = next(p["id"] for p in company["projects"] if p["change_events"])
            app = in_process_app(service)
            template_id = seed.make_template(service.url, key, project_id)
            lr = measure(service, Path(workdir), app, key, company, project_id, template_id)
        finally:
            service.stop()
    sections.kept_result("learning", lr, load_before, "services", "bench/learning.py")
    update(lr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
