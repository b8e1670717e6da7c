"""Routing that learns: how often it lands where the PM would, and what it costs.

The corpus (tests/routing_corpus.py) is replayed through the live service as a PM would (each
ticket created, then approved on the PM's codes), and then its new lines are sent: the share
that lands on the PM's code is the figure. Speed and memory are measured in this process on
the service's own database: a company with 50,000 past decisions, a 20-line ticket routed
from scratch (no answer kept from before), against the same ticket with no decisions.
"""
from __future__ import annotations

import datetime as dt
import random
import statistics
import time
import tracemalloc

import requests

from tests.routing_corpus import HISTORY, NEW

DECISIONS = 50_000
LINES = 20
RUNS = 30
COST_TYPE = {"labor": "labor", "equipment": "equipment", "materials": "materials"}


def _line(kind: str, said: str) -> dict:
    """A line of a kind as a crew sends it, without a cost code."""
    if kind == "labor":
        return {"trade": said, "hours": 4, "rate": 60}
    if kind == "equipment":
        return {"description": said, "hours": 2, "rate": 90}
    return {"description": said, "quantity": 3, "unitCost": 12}


def _send(api, headers, sub, project_id, description, lines):
    """POST a ticket; the ticket and each given line's index in its routing."""
    body = {"project_id": str(project_id), "description": description, "reason": "Not ours",
            "directed_by": "Sam Ortiz", "sub": sub, "labor": [], "equipment": [],
            "materials": []}
    places = []
    for kind, said in lines:
        body[kind].append(_line(kind, said))
        places.append((kind, len(body[kind]) - 1))
    made = requests.post(f"{api}/tickets", json=body, headers=headers, timeout=60)
    made.raise_for_status()
    offsets = {"labor": 0, "equipment": len(body["labor"]),
               "materials": len(body["labor"]) + len(body["equipment"])}
    return made.json(), [offsets[kind] + i for kind, i in places]


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
                  for place, (kind, _, code) in zip(places, lines)}
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


def _decisions(company_id: int, project_id: str, count: int) -> list[dict]:
    """`count` made-up decisions of one company: 2,000 wordings from 30 subs on 20 codes."""
    rng = random.Random(7)
    trades = ["framer", "carpenter", "laborer", "electrician", "plumber", "ironworker",
              "finisher", "drywall hanger", "taper", "painter", "operator", "welder", "helper",
              "foreman", "pipe fitter", "mason", "roofer", "glazier", "insulator", "flagger"]
    things = ["scissor lift", "boom lift", "dumpster", "excavator", "skid steer", "generator",
              "rebar", "plywood", "studs", "conduit", "wire", "pipe", "grout", "concrete",
              "lumber", "drywall", "paint", "sealant", "anchors", "fasteners"]
    words = ["", "apprentice", "journeyman", "lead", "night", "extra", "second", "temp",
             "general", "finish", "rough", "site", "crew", "shift", "north", "south",
             "east", "west", "upper", "lower", "ot", "weekend", "standby", "cleanup", "layout"]
    codes = ["01-740", "02-410", "03-100", "03-200", "03-300", "05-120", "05-500", "06-100",
             "07-210", "08-110", "09-250", "09-900", "22-100", "26-050", "31-230", "02-200",
             "01-310", "09-650", "07-900", "04-200"]
    wordings = []
    for n in range(2_000):
        kind = rng.choice(["labor", "labor", "equipment", "materials"])
        base = rng.choice(trades if kind == "labor" else things)
        wordings.append((kind, f"{words[n % len(words)]} {base} {n % 97}".strip(),
                         rng.choice(codes)))
    subs = [f"Sub {n:02d}" for n in range(30)]
    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for n in range(count):
        kind, text, code = wordings[rng.randrange(len(wordings))]
        rows.append({"company_id": company_id, "project_id": project_id,
                     "ticket_id": f"bench-{n:08d}", "line": 0, "kind": kind, "text": text,
                     "description": "Extra work on the north wing", "sub": rng.choice(subs),
                     "crew_cost_code": None, "cost_code": code, "cost_type": COST_TYPE[kind],
                     "budget_code_id": None, "budget_code": f"{code}.L", "how": "chosen",
                     "decided_at": start + dt.timedelta(minutes=n)})
    return rows


def speed(app, company_id: int, project_id: str, template_id: str) -> dict:
    """Routing a 20-line ticket for a company with 50,000 past decisions, from scratch, against
    the same with none; building those decisions' index, and the memory it holds."""
    from sqlalchemy import delete, insert

    from models import RoutingDecision, Ticket, db
    from services import learning, projects
    from services.ticket_shapes import Wait, routing_of

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
                    index._answers.clear()  # nothing kept from the run before
                start = time.perf_counter()
                routing_of(ticket, Wait.YES)
                found.append((time.perf_counter() - start) * 1000)
            return found

        bare = route_ms()
        rows = _decisions(company_id, project_id, DECISIONS)
        for chunk in range(0, len(rows), 5_000):
            db.session.execute(insert(RoutingDecision), rows[chunk:chunk + 5_000])
        db.session.commit()
        app.extensions.pop("routing_decisions", None)
        start = time.perf_counter()
        learning.index_for(company_id)
        build_ms = (time.perf_counter() - start) * 1000
        app.extensions.pop("routing_decisions", None)
        tracemalloc.start()  # read again to count what it holds (tracing slows it down)
        index = learning.index_for(company_id)
        held, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        learned = route_ms()
        db.session.execute(delete(RoutingDecision).where(RoutingDecision.company_id == company_id))
        db.session.commit()
        app.extensions.pop("routing_decisions", None)
        db.session.remove()
    return {"decisions": index.size, "lines": LINES,
            "route_ms": statistics.median(learned), "route_p99_ms": max(learned),
            "bare_ms": statistics.median(bare), "build_ms": build_ms, "index_mb": held / 1e6}
