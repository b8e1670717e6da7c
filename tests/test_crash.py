"""SIGKILL during a create-and-approve load: nothing acknowledged is lost, nothing written twice;
and the served app's image workers hold what images need, not the app."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from models import Ticket, db
from support.images import data_url, jpeg_bytes
from support.servers import free_port
from tests.plugins.storage import storage_env
from tests.test_approval import control, origin_rows, ticket_body
from tests.test_faults import attachments

ROOT = Path(__file__).resolve().parents[1]


def start_server(app, sandbox_server, tmp_path, port: int, **extra_env: str) -> subprocess.Popen:
    """The app as `make run` serves it (waitress) on the test's database, as its own process group."""
    env = dict(os.environ, DATABASE_URL=app.config["SQLALCHEMY_DATABASE_URI"],
               EWT_INSTANCE_PATH=str(tmp_path / "instance"), EWT_SANDBOX_URL=sandbox_server.url,
               EWT_API_RATE_LIMIT='"100000 per minute"', EWT_SECRET_KEY="crash-test",
               **storage_env(app), **extra_env)
    log = (tmp_path / f"server-{port}.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "server", "127.0.0.1", str(port), "8"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()  # the child holds its own copy of the file
    for _ in range(600):  # bounded wait for the worker to answer
        try:
            if requests.get(f"http://127.0.0.1:{port}/v1/openapi.json", timeout=5).status_code == 200:
                return server
        except requests.RequestException:
            time.sleep(0.05)
    raise AssertionError("server did not start")


@pytest.mark.live
def test_sigkill_mid_load_loses_nothing_and_duplicates_nothing(app, acme, sandbox_server, tmp_path):
    # About a kill, not Procore's limits: the served processes wait for those in real time.
    control(sandbox_server, acme).set_spike_limit(None)
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    created: list[str] = []
    approve_sent: list[str] = []
    lock = threading.Lock()
    killed = threading.Event()

    def work(worker: int) -> None:
        session = requests.Session()
        for i in range(40):
            if killed.is_set():
                return
            try:
                answer = session.post(f"{base}/v1/tickets", headers=acme.headers, timeout=30, json={
                    "project_id": acme.project()["id"], "description": f"w{worker} t{i}", "reason": "r",
                    "directed_by": "d",
                    "labor": [{"trade": "Laborer", "hours": 1, "rate": 10, "costCode": "02-200"}]})
                if answer.status_code != 200:
                    continue
                with lock:
                    created.append(answer.json()["id"])
                if i % 2 == 0:
                    with lock:
                        approve_sent.append(answer.json()["id"])
                    session.post(f"{base}/v1/tickets/{answer.json()['id']}/approve",
                                 headers=acme.headers, json={}, timeout=30)
            except requests.RequestException:
                return  # the server died under us

    workers = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in workers:
        thread.start()
    while len(approve_sent) < 12 and any(t.is_alive() for t in workers):
        time.sleep(0.01)
    os.killpg(server.pid, signal.SIGKILL)
    killed.set()
    server.wait(timeout=30)
    for thread in workers:
        thread.join(timeout=60)
    assert len(created) >= 12

    # Restart. A claim left by the killed process expires at once here, as it would after its TTL.
    restarted = start_server(app, sandbox_server, tmp_path, free_port(), EWT_APPROVAL_CLAIM_TTL_S="0")
    port2 = restarted.args[-2]
    try:
        with app.app_context():
            db.session.expire_all()
            stored = {t.id: t.status for t in db.session.query(Ticket)}
        assert set(created) <= set(stored), "an acknowledged ticket was lost"
        for ticket_id in approve_sent:
            assert len(origin_rows(sandbox_server, "change_events", ticket_id)) <= 1
            answer = requests.post(f"http://127.0.0.1:{port2}/v1/tickets/{ticket_id}/approve",
                                   headers=acme.headers, json={}, timeout=60)
            assert answer.status_code == 200, answer.text
            (event,) = origin_rows(sandbox_server, "change_events", ticket_id)
            # the signed ticket document is attached exactly once, whatever the kill cut short
            assert attachments(sandbox_server, event["id"]) == \
                [f"ticket-T-{ticket_id[:8].upper()}.pdf"]
            del answer  # its kept-alive connection would hold the stopping worker for 2 s
    finally:
        os.killpg(restarted.pid, signal.SIGTERM)
        restarted.wait(timeout=30)
    with app.app_context():
        db.session.expire_all()
        for ticket_id in approve_sent:
            ticket = db.session.get(Ticket, ticket_id)
            assert ticket.status == "written"
            assert [d.action for d in ticket.decisions].count("approved") == 1


@pytest.mark.live
def test_the_image_workers_of_the_served_app_do_not_load_the_app(app, acme, sandbox_server, tmp_path):
    port = free_port()
    server = start_server(app, sandbox_server, tmp_path, port)
    try:
        body = ticket_body(acme.project()["id"],
                           photos=[{"name": "a.jpg", "data_url": data_url(jpeg_bytes())}])
        answer = requests.post(f"http://127.0.0.1:{port}/v1/tickets", headers=acme.headers, json=body,
                               timeout=60)
        assert answer.status_code == 200, answer.text
        # The photo was read in a worker from the fork server. A worker that imported the
        # served module again with the app (as multiprocessing does with __main__) maps
        # SQLAlchemy's compiled parts; one that holds only what images need does not.
        workers = [pid for pid in os.listdir("/proc") if pid.isdigit() and pid != str(server.pid)
                   and _group_of(int(pid)) == server.pid
                   and b"multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        maps = {pid: Path(f"/proc/{pid}/maps").read_text() for pid in workers}
        assert any("PIL" in text for text in maps.values()), workers  # a worker read the photo
        assert not [pid for pid, text in maps.items() if "sqlalchemy" in text], workers
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _group_of(pid: int) -> int | None:
    """The process group of `pid`, None once it is gone."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
