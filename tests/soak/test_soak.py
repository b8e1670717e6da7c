"""Longer, randomised runs of the reliability checks (`make soak`), with their figures recorded."""
from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, settings

from models import Ticket, db
from support.servers import free_port
from tests.test_approval import origin_rows
from tests.test_concurrency import drive
from tests.test_crash import start_server
from tests.test_schemathesis import assert_codes_documented, current, linked_calls, schema

pytestmark = pytest.mark.soak
FIGURES = Path(__file__).resolve().parents[2] / "bench" / "soak.json"


def record(name: str, figures: dict) -> None:
    """Add one soak's figures to bench/out/soak.json for the report."""
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    data[name] = dict(figures, recorded_at=time.strftime("%Y-%m-%d %H:%M:%S"))
    FIGURES.write_text(json.dumps(data, indent=2))


CASES: Counter = Counter()


@schema.parametrize()
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_schemathesis_randomised(case, app):
    """Many more random cases per operation than CI runs, with a fresh seed each time."""
    from tests.conftest import connect_tenant

    if current.app is not app:
        app.config["API_RATE_LIMIT"] = "1000000 per minute"
        current.app = app
        app.extensions["soak_tenant"] = connect_tenant(app)
    tenant = app.extensions["soak_tenant"]
    response = case.call_and_validate(headers=dict(tenant.headers))
    assert_codes_documented(case, response)
    CASES[case.operation.label] += 1
    record("schemathesis", {"cases": sum(CASES.values()), "operations": len(CASES), "failures": 0})


def test_schemathesis_linked_randomised(app):
    """Many more and longer chains of calls along the document's links than CI runs, freshly seeded."""
    app.config["API_RATE_LIMIT"] = "1000000 per minute"
    current.app = app
    steps: Counter = Counter()

    class Counted(linked_calls(app)):
        def after_call(self, response, case):
            super().after_call(response, case)
            steps[case.operation.label] += 1

    Counted.run(settings=settings(max_examples=200, stateful_step_count=25, deadline=None,
                                  suppress_health_check=list(HealthCheck)))
    record("schemathesis_linked", {"steps": sum(steps.values()), "operations": len(steps), "failures": 0})


def test_mixed_load_rounds(app, acme, live_server):
    """Five rounds of 50 creators, 4 approvers and 4 listers."""
    app.config["API_RATE_LIMIT"] = "1000000 per minute"
    totals: Counter = Counter()
    started = time.perf_counter()
    for _ in range(5):
        acknowledged, statuses, errors = drive(live_server.url, acme)
        assert errors == []
        totals.update(statuses)
        totals["acknowledged"] += len(acknowledged)
    with app.app_context():
        stored = db.session.query(Ticket).filter(Ticket.company_id == acme.company_id).count()
    assert stored == totals["acknowledged"]
    record("mixed_load", {"rounds": 5, "requests": sum(v for k, v in totals.items() if k != "acknowledged"),
                          "status_5xx": sum(v for k, v in totals.items() if isinstance(k, int) and k >= 500),
                          "acknowledged": totals["acknowledged"], "stored": stored,
                          "seconds": round(time.perf_counter() - started, 1)})


def test_repeated_crashes(app, acme, sandbox_server, tmp_path):
    """Ten SIGKILLs in a row under create-and-approve load; count losses and duplicates."""
    acknowledged, approved = [], []
    for round_number in range(10):
        port = free_port()
        server = start_server(app, sandbox_server, tmp_path, port, EWT_APPROVAL_CLAIM_TTL_S="0")
        base = f"http://127.0.0.1:{port}"
        session = requests.Session()
        deadline = time.monotonic() + 1.0 + round_number * 0.1
        while time.monotonic() < deadline:
            answer = session.post(f"{base}/v1/tickets", headers=acme.headers, timeout=30, json={
                "project_id": acme.project()["id"], "description": "soak", "reason": "r", "directed_by": "d",
                "labor": [{"trade": "Laborer", "hours": 1, "rate": 1, "costCode": "02-200"}]})
            if answer.status_code == 200:
                acknowledged.append(answer.json()["id"])
                approved.append(answer.json()["id"])
                try:
                    session.post(f"{base}/v1/tickets/{approved[-1]}/approve", headers=acme.headers,
                                 json={}, timeout=0.05)
                except requests.RequestException:
                    pass  # killed or still writing: the next round finishes it
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port, EWT_APPROVAL_CLAIM_TTL_S="0")
    try:
        for ticket_id in approved:
            answer = requests.post(f"http://127.0.0.1:{port}/v1/tickets/{ticket_id}/approve",
                                   headers=acme.headers, json={}, timeout=60)
            assert answer.status_code == 200, answer.text
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    with app.app_context():
        db.session.expire_all()
        stored = {t.id for t in db.session.query(Ticket)}
    lost = len(set(acknowledged) - stored)
    duplicates = sum(1 for t in approved if len(origin_rows(sandbox_server, "change_events", t)) != 1)
    record("crashes", {"kills": 10, "acknowledged": len(acknowledged), "lost": lost,
                       "approvals": len(approved), "not_exactly_once": duplicates})
    assert lost == 0 and duplicates == 0
