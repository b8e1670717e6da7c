"""Many writers, approvers and readers at once against the served app, on SQLite."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import requests

from models import Ticket, db
from support.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
CREATORS, PER_CREATOR, APPROVERS, LISTERS = 50, 3, 4, 4


def ticket_body(project_id: str, n: int) -> dict:
    return {"project_id": project_id, "description": f"concurrent ticket {n}", "reason": "r",
            "directed_by": "d", "labor": [{"trade": "Laborer", "hours": 1, "rate": 10, "costCode": "02-200"}]}


# Its creators, approvers and listers are threads written inside it, whose loops McCabe counts
# into it (C901).
def drive(base: str, tenant) -> tuple[list[str], Counter, list[str]]:  # noqa: C901
    """Run the mixed load; return acknowledged ticket ids, status counts and server errors."""
    acknowledged: list[str] = []
    statuses: Counter = Counter()
    errors: list[str] = []
    lock = threading.Lock()
    creating = threading.Event()
    creating.set()
    project_id = tenant.project()["id"]

    def record(response: requests.Response) -> None:
        with lock:
            statuses[response.status_code] += 1
            if response.status_code >= 500 or "database is locked" in response.text:
                errors.append(f"{response.status_code} {response.text[:200]}")

    def creator(worker: int) -> None:
        session = requests.Session()
        for i in range(PER_CREATOR):
            response = session.post(f"{base}/v1/tickets", json=ticket_body(project_id, worker * 100 + i),
                                    headers=tenant.headers, timeout=60)
            record(response)
            if response.status_code == 200:
                with lock:
                    acknowledged.append(response.json()["id"])

    def approver() -> None:
        session = requests.Session()
        while creating.is_set():
            page = session.get(f"{base}/v1/tickets?status=submitted&limit=5", headers=tenant.headers,
                               timeout=60)
            record(page)
            for ticket in page.json().get("data", []) if page.status_code == 200 else []:
                record(session.post(f"{base}/v1/tickets/{ticket['id']}/approve", json={},
                                    headers=tenant.headers, timeout=60))

    def lister() -> None:
        session = requests.Session()
        while creating.is_set():
            record(session.get(f"{base}/v1/tickets?limit=50", headers=tenant.headers, timeout=60))

    creators = [threading.Thread(target=creator, args=(n,)) for n in range(CREATORS)]
    others = [threading.Thread(target=approver) for _ in range(APPROVERS)] + \
             [threading.Thread(target=lister) for _ in range(LISTERS)]
    for thread in others + creators:
        thread.start()
    for thread in creators:
        thread.join(timeout=300)
    creating.clear()
    for thread in others:
        thread.join(timeout=300)
    return acknowledged, statuses, errors


def assert_outcome(app, tenant, acknowledged, statuses, errors) -> None:
    """Zero 5xx, zero locked database, every acknowledged ticket stored, written ones written once."""
    assert errors == []
    assert len(acknowledged) == CREATORS * PER_CREATOR
    assert set(statuses) <= {200, 409}, statuses
    with app.app_context():
        db.session.expire_all()
        stored = {t.id: t for t in db.session.query(Ticket).filter(Ticket.company_id == tenant.company_id)}
        assert set(acknowledged) <= set(stored)
        written = [t for t in stored.values() if t.status == "written"]
        assert written, "no approval went through"
        for ticket in written:
            assert [d.action for d in ticket.decisions].count("approved") == 1
        from services.project_system.connections import client_for
        procore = client_for(tenant.company_id)
        seen = Counter()
        for ticket in written:
            record = procore.find_change_event(int(ticket.project_id), f"ewt-ticket-{ticket.id}")
            assert record is not None and record.id == ticket.external["change_event_id"]
            # the signed ticket document is attached exactly once
            assert record.attachment_filenames == (f"ticket-T-{ticket.id[:8].upper()}.pdf",)
            seen[record.id] += 1
        assert all(count == 1 for count in seen.values())


@pytest.mark.live
def test_threaded_server_under_mixed_load(app, acme, live_server):
    app.config["API_RATE_LIMIT"] = "100000 per minute"
    # The sandbox answers from this same process, so under fifty client threads its calls are
    # many times slower than Procore's and an approval may queue past the write slot's 5 s; the
    # slot's refusal is checked on its own in test_procore_isolation. The same holds for reads
    # (the project list and codes a create or an approval waits for).
    app.config["PROJECT_SYSTEM_WRITE_SLOT_WAIT_S"] = 120
    app.config["PROJECT_SYSTEM_SLOT_WAIT_S"] = 120
    acknowledged, statuses, errors = drive(live_server.url, acme)
    assert_outcome(app, acme, acknowledged, statuses, errors)


@pytest.mark.live
def test_four_gunicorn_workers_on_sqlite(app, acme, sandbox_server, tmp_path):
    port = free_port()
    database = app.config["SQLALCHEMY_DATABASE_URI"]
    env = dict(os.environ, DATABASE_URL=database, EWT_INSTANCE_PATH=str(tmp_path / "instance"),
               EWT_SANDBOX_URL=sandbox_server.url, EWT_API_RATE_LIMIT='"100000 per minute"',
               EWT_PROJECT_SYSTEM_WRITE_SLOT_WAIT_S="120", EWT_PROJECT_SYSTEM_SLOT_WAIT_S="120",
               EWT_SECRET_KEY="concurrency-test", EWT_PHOTO_DIR=str(tmp_path / "photos"))
    log_path = tmp_path / "server.log"
    log = log_path.open("w")  # a file, not a pipe: a full pipe would stall the workers
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--workers", "4", "--threads", "4", "--bind",
         f"127.0.0.1:{port}", "--log-level", "warning", "app:create_app()"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):  # bounded wait for the workers to bind
            try:
                if requests.get(f"{base}/v1/openapi.json", timeout=10).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.05)
        acknowledged, statuses, errors = drive(base, acme)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()
    output = log_path.read_text()
    assert "database is locked" not in output
    assert "Traceback" not in output, output[-3000:]
    assert_outcome(app, acme, acknowledged, statuses, errors)
