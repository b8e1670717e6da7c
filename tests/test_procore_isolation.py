"""One company's slow Procore holds up nothing else: pages, /v1/me, other companies' approvals."""
from __future__ import annotations

import datetime as dt
import os
import threading
import time

import pytest
import requests
import time_machine

from models import Ticket, db, utcnow
from services.project_system.procore import ProcoreClient
from support.images import data_url, noise_jpeg
from support.servers import free_port
from tests.test_approval import act, control, create, origin_rows, remote
from tests.test_crash import start_server


def test_capture_page_never_waits_on_a_hung_project_system(app, client, acme, sandbox_server):
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    control(sandbox_server, acme).fault(500, count=4, delay_s=6, methods=["GET"])
    started = time.monotonic()
    page = client.get(f"/c/{token}")
    assert page.status_code == 200 and 'name="description"' in page.get_data(as_text=True)
    assert time.monotonic() - started < 2.0


def test_a_second_approval_of_a_company_waits_briefly_then_is_told_busy(app, client, acme, rival,
                                                                        monkeypatch):
    # A 1 s wait for the company's write slot (5 s in production) shows the same wait, then busy.
    app.config["PROJECT_SYSTEM_WRITE_SLOT_WAIT_S"] = 1.0
    first, second = create(client, acme), create(client, acme)
    theirs = create(client, rival)
    inside, release = threading.Event(), threading.Event()
    real_create = ProcoreClient.create_change_event

    def slow_for_acme(self, project_id, draft):
        if self.company_id == acme.remote_company_id:
            inside.set()
            release.wait(20)
        return real_create(self, project_id, draft)

    monkeypatch.setattr(ProcoreClient, "create_change_event", slow_for_acme)
    answers = {}
    writer = threading.Thread(target=lambda: answers.setdefault(
        "first", act(app.test_client(), acme, first["id"], "approve")))
    writer.start()
    try:
        assert inside.wait(20)
        started = time.monotonic()
        busy = act(client, acme, second["id"], "approve")
        assert busy.status_code == 503 and busy.json["error"]["code"] == "project_system_busy"
        waited = time.monotonic() - started
        assert app.config["PROJECT_SYSTEM_WRITE_SLOT_WAIT_S"] <= waited < \
            app.config["PROJECT_SYSTEM_WRITE_SLOT_WAIT_S"] + 2
        assert busy.headers["Retry-After"]
        other = act(client, rival, theirs["id"], "approve")  # another company is not held up
        assert other.status_code == 200, other.json
    finally:
        release.set()
        writer.join(30)
    assert answers["first"].status_code == 200
    again = act(client, acme, second["id"], "approve")  # the refused one went back to approvable
    assert again.status_code == 200, again.json


def test_a_slow_write_keeps_its_claim_and_is_never_joined(app, client, acme, sandbox_server, monkeypatch):
    app.config.update(APPROVAL_CLAIM_TTL_S=2, APPROVAL_CLAIM_RENEW_S=0.1)
    photos = [{"name": f"p{i}.jpg", "data_url": data_url(noise_jpeg(64, 48, seed=i))} for i in range(3)]
    ticket = create(client, acme, photos=photos)
    inside, release = threading.Event(), threading.Event()
    real_attach = ProcoreClient.attach_files
    blocked = []

    def slow_first_attach(self, *args, **kwargs):
        if not blocked:
            blocked.append(1)
            inside.set()
            release.wait(20)
        return real_attach(self, *args, **kwargs)

    monkeypatch.setattr(ProcoreClient, "attach_files", slow_first_attach)
    answers = {}
    writer = threading.Thread(target=lambda: answers.setdefault(
        "first", act(app.test_client(), acme, ticket["id"], "approve")))
    writer.start()
    try:
        assert inside.wait(20)
        later = utcnow() + dt.timedelta(seconds=30)  # long past the claim's 2 s
        with time_machine.travel(later):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the claim is renewed while the write goes on
                with app.app_context():
                    claimed_at = db.session.get(Ticket, ticket["id"]).approval_claimed_at
                if claimed_at is not None and claimed_at >= later - dt.timedelta(seconds=1):
                    break
                time.sleep(0.05)
            second = act(client, acme, ticket["id"], "approve")
        assert second.status_code == 409 and second.json["error"]["code"] == "approval_in_progress"
    finally:
        release.set()
        writer.join(30)
    assert answers["first"].status_code == 200, answers["first"].json
    (event,) = origin_rows(sandbox_server, "change_events", ticket["id"])
    attached = remote(app, acme).get_change_event(int(ticket["project_id"]), event["id"])
    assert len(attached["attachments"]) == len(photos) + 1  # each photo and the document once


@pytest.mark.live
@pytest.mark.alone  # measures how long others wait: nothing else may load the machine
def test_a_hung_project_system_does_not_slow_another_companys_me(app, acme, rival, sandbox_server,
                                                                 tmp_path):
    port = free_port()
    # Acme's hung reads give up after 5 s (8 s in production): still long past the 2.5 s the
    # other company may wait, should it ever queue behind them.
    server = start_server(app, sandbox_server, tmp_path, port, EWT_PROJECT_SYSTEM_READ_RETRIES="0",
                          EWT_PROJECT_SYSTEM_READ_TIMEOUT_S="5")
    base = f"http://127.0.0.1:{port}"
    try:
        control(sandbox_server, acme).fault(500, count=40, delay_s=10, methods=["GET"])
        answers = []

        def busy_acme() -> None:
            try:
                answers.append(requests.get(f"{base}/v1/projects", headers=acme.headers,
                                            timeout=40).status_code)
            except requests.RequestException as error:
                answers.append(type(error).__name__)

        crowd = [threading.Thread(target=busy_acme) for _ in range(12)]
        for thread in crowd:
            thread.start()
        time.sleep(0.5)  # let acme's requests take the server's threads, as they would
        waits = []
        for _ in range(4):
            started = time.monotonic()
            assert requests.get(f"{base}/v1/me", headers=rival.headers, timeout=60).status_code == 200
            waits.append(time.monotonic() - started)
        for thread in crowd:
            thread.join(60)
        assert max(waits) < 2.5, waits
        assert answers.count(503) >= 6, answers  # acme's extra requests were told busy at once
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
