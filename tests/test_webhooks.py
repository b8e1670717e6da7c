"""Webhooks: endpoints, signed events from the outbox, retries on a controlled clock, tenancy,
address checks, and a worker killed between store and send."""
from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import time_machine
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from models import WebhookDelivery, db
from services.webhooks import webhook_delivery
from tests.plugins.storage import storage_env
from tests.receiver import Receiver
from tests.test_approval import act, create
from tests.test_record_status import control, propose_on_commitment, sync, written

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def receiver(app) -> Iterator[Receiver]:
    """A receiver on loopback, allowed by configuration as an install on one network would."""
    app.config["WEBHOOK_ALLOW_PRIVATE"] = "127.0.0.1"
    found = Receiver()
    yield found
    found.close()


def register(client, tenant, url: str, **extra) -> dict:
    """Register an endpoint and answer it with its secret."""
    answer = client.post("/v1/webhooks", headers=tenant.headers, json={"url": url, **extra})
    assert answer.status_code == 200, answer.json
    assert answer.json["secret"].startswith("whsec_")
    assert answer.headers["Cache-Control"] == "no-store"
    return answer.json


def send_due(app) -> int:
    """Run the worker once, in this process."""
    return webhook_delivery.run_once(app)


def test_a_ticket_is_told_submitted_then_written_each_verifying(app, client, acme, receiver):
    endpoint = register(client, acme, receiver.url, description="ERP")
    ticket = create(client, acme)
    assert send_due(app) == 1
    written = act(client, acme, ticket["id"], "approve", {"require_exact": True})
    assert written.status_code == 200, written.json
    assert send_due(app) == 1
    first, second = receiver.events(endpoint["secret"])
    assert (first["type"], second["type"]) == ("ticket.submitted", "ticket.written")
    assert first["data"]["id"] == second["data"]["id"] == ticket["id"]
    assert first["data"]["status"] == "submitted" and first["data"]["labor"]
    assert second["data"]["status"] == "written"
    assert second["data"]["external"]["change_event_id"] == written.json["external"]["change_event_id"]
    assert len(set(receiver.ids())) == 2
    assert send_due(app) == 0  # delivered once each
    document = client.get("/v1/openapi.json").json  # each body is as the document says
    for event in (first, second):
        documented = document["webhooks"][event["type"]]["post"]
        schema = {**documented["requestBody"]["content"]["application/json"]["schema"],
                  "components": document["components"]}
        jsonschema.Draft202012Validator(schema).validate(event)
        assert {p["name"] for p in documented["parameters"]} <= set(receiver.requests[0][0])
    headers, body = receiver.requests[0]
    with pytest.raises(WebhookVerificationError):  # a forged body does not verify
        Webhook(endpoint["secret"]).verify(body.replace(b"submitted", b"written"), headers)
    deliveries = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries", headers=acme.headers).json
    assert [d["status"] for d in deliveries["data"]] == ["delivered", "delivered"]
    assert deliveries["data"][0]["attempts"][0]["status_code"] == 200


def test_rejected_and_restored_are_told_and_unsubscribed_events_are_not(app, client, acme, receiver):
    endpoint = register(client, acme, receiver.url, events=["ticket.rejected", "ticket.restored"])
    ticket = create(client, acme)
    assert act(client, acme, ticket["id"], "reject", {"reason": "Not ours"}).status_code == 200
    assert act(client, acme, ticket["id"], "restore").status_code == 200
    send_due(app)
    assert [e["type"] for e in receiver.events(endpoint["secret"])] == \
        ["ticket.rejected", "ticket.restored"]


def test_a_failing_endpoint_gets_the_same_id_until_it_answers(app, client, acme, receiver):
    endpoint = register(client, acme, receiver.url)
    receiver.statuses = [500, 500]
    start = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc)
    with time_machine.travel(start, tick=True) as clock:
        create(client, acme)
        send_due(app)
        with app.app_context():
            delivery = db.session.query(WebhookDelivery).one()
            first_retry = delivery.next_attempt_at - delivery.attempts[0].attempted_at
        assert dt.timedelta(0) < first_retry <= dt.timedelta(seconds=10)
        assert send_due(app) == 0  # not due yet
        clock.shift(first_retry)
        send_due(app)
        with app.app_context():
            delivery = db.session.query(WebhookDelivery).one()
            second_retry = delivery.next_attempt_at - delivery.attempts[-1].attempted_at
        assert dt.timedelta(minutes=4) < second_retry <= dt.timedelta(minutes=5)
        clock.shift(second_retry)
        send_due(app)
        assert len(receiver.events(endpoint["secret"])) == 3
    assert len(set(receiver.ids())) == 1
    listed = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries", headers=acme.headers).json
    assert [a["status_code"] for a in listed["data"][0]["attempts"]] == [500, 500, 200]
    assert listed["data"][0]["status"] == "delivered"


def test_an_endpoint_failing_three_days_is_disabled_and_its_admins_told(app, client, acme, receiver,
                                                                        monkeypatch):
    sent: list[tuple[str, str]] = []
    bodies: list[str] = []
    monkeypatch.setattr("services.platform.mail.send", lambda to, subject, body: (
        sent.append((to, subject)), bodies.append(body)))
    from services.accounts import reviewers
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "boss@example.com", "a long pass phrase 1",
                                  is_admin=True)
    endpoint = register(client, acme, receiver.url)
    receiver.statuses = [503] * 100
    with time_machine.travel(dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.timezone.utc),
                             tick=True) as clock:
        create(client, acme)
        for _ in range(20):
            send_due(app)
            with app.app_context():
                delivery = db.session.query(WebhookDelivery).one()
                if delivery.next_attempt_at is None:
                    break
                clock.move_to(delivery.next_attempt_at + dt.timedelta(seconds=1))
    with app.app_context():
        delivery = db.session.query(WebhookDelivery).one()
        assert delivery.status == "failed"
        spent = delivery.attempts[-1].attempted_at - delivery.attempts[0].attempted_at
        assert dt.timedelta(hours=60) < spent <= dt.timedelta(days=3)
    shown = client.get(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers).json
    assert shown["enabled"] is False and shown["disabled_reason"]
    assert sent == [("boss@example.com", "A webhook endpoint was disabled")]
    assert f"(endpoint {endpoint['id']})" in bodies[0]
    assert not any(word in bodies[0] for word in ("{", "PATCH", "/v1/", "enabled true"))
    assert client.patch(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers,
                        json={"enabled": True}).json["disabled_reason"] is None


def test_another_companys_ticket_never_reaches_the_endpoint(app, client, acme, rival, receiver):
    register(client, acme, receiver.url)
    create(client, rival)
    assert send_due(app) == 0
    assert receiver.requests == []
    assert client.get("/v1/webhooks", headers=rival.headers).json == {"data": []}
    with app.app_context():
        assert db.session.query(WebhookDelivery).count() == 0


@pytest.mark.parametrize("url", ["http://10.1.2.3/hook", "http://169.254.169.254/latest",
                                 "http://[::1]/hook", "https://127.0.0.1/hook",
                                 "https://[::ffff:192.168.1.1]/x", "https://localhost/x",
                                 "http://hooks.example.com/plain-http", "ftp://example.com/x",
                                 "https://user:pw@example.com/x"])
def test_a_private_or_plain_address_is_refused_when_registered(client, tenant, url):
    answer = client.post("/v1/webhooks", headers=tenant.headers, json={"url": url})
    assert answer.status_code == 400
    assert answer.json["error"]["code"] == "webhook_url_refused"
    assert answer.json["error"]["details"][0]["field"] == "url"


def test_a_name_resolving_to_a_private_address_is_refused_at_send_time(app, client, acme, receiver,
                                                                       monkeypatch):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = ""
    endpoint = register(client, acme, "https://hooks.example.com/in")
    real = socket.getaddrinfo
    port = receiver.server.server_port

    def resolve(host, *args, **kwargs):
        if host == "hooks.example.com":  # a name that turned to point at the box itself
            return real("127.0.0.1", port, type=socket.SOCK_STREAM)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    create(client, acme)
    send_due(app)
    assert receiver.requests == []
    attempt = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries",
                         headers=acme.headers).json["data"][0]["attempts"][0]
    assert attempt["ok"] is False and attempt["error"] == "the host resolves to a private address"
    # The same loopback receiver, once allowed, is sent to.
    app.config["WEBHOOK_ALLOW_PRIVATE"] = "127.0.0.1"
    assert client.patch(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers,
                        json={"url": receiver.url}).status_code == 200
    delivery_id = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries",
                             headers=acme.headers).json["data"][0]["id"]
    replayed = client.post(f"/v1/webhooks/{endpoint['id']}/deliveries/{delivery_id}/replay",
                           headers=acme.headers)
    assert replayed.status_code == 200 and replayed.json["status"] == "pending"
    send_due(app)
    assert receiver.ids() == [delivery_id]


def test_a_rotated_secret_signs_beside_the_new_one_for_a_day(app, client, acme, receiver):
    endpoint = register(client, acme, receiver.url)
    rotated = client.post(f"/v1/webhooks/{endpoint['id']}/rotate-secret", headers=acme.headers).json
    assert rotated["secret"] != endpoint["secret"]
    create(client, acme)
    send_due(app)
    assert receiver.events(endpoint["secret"]) == receiver.events(rotated["secret"])
    with time_machine.travel(dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=25)):
        create(client, acme)
        send_due(app)
        headers, body = receiver.requests[-1]
        Webhook(rotated["secret"]).verify(body, headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(endpoint["secret"]).verify(body, headers)


def test_endpoints_are_read_changed_and_removed_by_their_company_only(client, acme, rival):
    endpoint = register(client, acme, "https://erp.example.com/hooks", events=["ticket.written"])
    assert "secret" not in client.get("/v1/webhooks", headers=acme.headers).json["data"][0]
    assert client.get(f"/v1/webhooks/{endpoint['id']}", headers=rival.headers).status_code == 404
    assert client.delete(f"/v1/webhooks/{endpoint['id']}", headers=rival.headers).status_code == 404
    changed = client.patch(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers,
                           json={"events": ["ticket.submitted", "ticket.signed"], "enabled": False})
    assert changed.json["events"] == ["ticket.submitted", "ticket.signed"]
    assert changed.json["enabled"] is False
    refused = client.patch(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers,
                           json={"url": "http://169.254.169.254/"})
    assert refused.json["error"]["code"] == "webhook_url_refused"
    assert client.delete(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers).status_code == 200
    assert client.get(f"/v1/webhooks/{endpoint['id']}", headers=acme.headers).status_code == 404


def start_worker(app, tmp_path, **env: str) -> subprocess.Popen:
    """`flask webhooks work` on the test's database, as its own process group."""
    environment = dict(os.environ, DATABASE_URL=app.config["SQLALCHEMY_DATABASE_URI"],
                       EWT_INSTANCE_PATH=str(tmp_path / "instance"), EWT_SECRET_KEY="worker-test",
                       EWT_WEBHOOK_ALLOW_PRIVATE="127.0.0.1", EWT_WEBHOOK_POLL_S="0.1",
                       **storage_env(app), **env)
    log = (tmp_path / "worker.log").open("a")
    worker = subprocess.Popen([sys.executable, "-m", "flask", "--app", "app", "webhooks", "work"],
                              cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    log.close()
    return worker


def wait_for(condition, seconds: float = 30) -> None:
    """Wait, bounded, for something another process does."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_worker_killed_between_store_and_send_delivers_once_it_is_back(app, client, acme,
                                                                          receiver, tmp_path):
    endpoint = register(client, acme, receiver.url)
    receiver.hold.set()  # the first send is taken in, never answered
    worker = start_worker(app, tmp_path, EWT_WEBHOOK_CLAIM_TTL_S="2")
    try:
        ticket = create(client, acme)
        assert receiver.held.wait(30)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
        receiver.hold.clear()
        with app.app_context():
            assert db.session.query(WebhookDelivery).one().status == "pending"
        worker = start_worker(app, tmp_path, EWT_WEBHOOK_CLAIM_TTL_S="2")
        wait_for(lambda: receiver.requests)
        wait_for(lambda: client.get(f"/v1/webhooks/{endpoint['id']}/deliveries",
                                    headers=acme.headers).json["data"][0]["status"] == "delivered")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(20)
    [event] = receiver.events(endpoint["secret"])
    assert event["type"] == "ticket.submitted" and event["data"]["id"] == ticket["id"]


def test_one_companys_slow_endpoint_never_delays_anothers(app, client, acme, rival, receiver):
    slow = Receiver()
    try:
        register(client, acme, slow.url)
        register(client, rival, receiver.url)
        slow.hold.set()
        create(client, acme)
        stop = threading.Event()
        worker = threading.Thread(target=webhook_delivery.work, args=(app, stop), daemon=True)
        app.config["WEBHOOK_POLL_S"] = 0.05
        worker.start()
        assert slow.held.wait(30)
        create(client, rival)
        wait_for(lambda: receiver.requests, seconds=5)  # while the slow one still holds
        assert slow.hold.is_set()
        slow.hold.clear()
        stop.set()
        worker.join(30)
    finally:
        slow.close()


def test_the_timeout_and_the_answer_size_are_bounded(app, client, acme, receiver):
    app.config["WEBHOOK_TIMEOUT_S"] = 0.5
    endpoint = register(client, acme, receiver.url)
    receiver.hold.set()
    create(client, acme)
    started = time.monotonic()
    send_due(app)
    assert time.monotonic() - started < 5
    receiver.hold.clear()
    attempt = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries",
                         headers=acme.headers).json["data"][0]["attempts"][0]
    assert attempt["error"] == "no answer in time" and attempt["duration_ms"] < 2000


def test_the_keys_page_lists_endpoints_and_deliveries_and_admins_send_one_again(
        app, client, acme, receiver):
    from services.accounts import reviewers
    from tests.test_review_pages import PASSWORD, sign_in

    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "boss@acme.example", PASSWORD, is_admin=True)
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", PASSWORD)
    endpoint = register(client, acme, receiver.url, description="ERP sync")
    ticket = create(client, acme)
    send_due(app)
    [delivery_id] = receiver.ids()
    replay = f"/keys/webhooks/{endpoint['id']}/deliveries/{delivery_id}/replay"
    pm = sign_in(app, app.test_client(), acme, email="pm@acme.example")
    seen = pm.get("/keys").get_data(as_text=True)
    assert receiver.url.replace("&", "&amp;") in seen and "ERP sync" in seen
    assert "submitted" in seen and "received" in seen and f"/tickets/{ticket['id']}" in seen
    assert replay not in seen
    assert pm.post(replay, htmx=True).status_code == 403
    boss = sign_in(app, app.test_client(), acme, email="boss@acme.example")
    assert replay in boss.get("/keys").get_data(as_text=True)
    panel = boss.post(replay, htmx=True)
    assert panel.status_code == 200 and "waiting to be sent" in panel.get_data(as_text=True)
    send_due(app)
    assert receiver.ids() == [delivery_id, delivery_id]


def test_a_crews_ticket_is_told_signed_then_sent_back(app, client, acme, receiver):
    from models.schemas import SignatureIn, TicketInput
    from services.capture import evidence, links, tickets
    from support.images import data_url, png_bytes
    from tests.test_approval import ticket_body

    endpoint = register(client, acme, receiver.url,
                        events=["ticket.signed", "ticket.sent_back", "ticket.rejected"])
    project = acme.project()
    with app.app_context():
        token = links.create_link_for_known_project(acme.company_id, project["id"],
                                                    project["name"], "North crew").token
        ticket, _ = tickets.create_ticket(acme.company_id,
                                          TicketInput.model_validate(ticket_body(project["id"])),
                                          captured_via="link", link_token=token,
                                          project_checked=True)
        evidence.put_signature(acme.company_id, ticket.id, SignatureIn(
            name="Gene Carter", role="GC super", image=data_url(png_bytes(), "image/png")))
    assert act(client, acme, ticket.id, "reject", {"reason": "Wrong day"}).status_code == 200
    send_due(app)
    signed, sent_back = receiver.events(endpoint["secret"])
    assert (signed["type"], sent_back["type"]) == ("ticket.signed", "ticket.sent_back")
    assert signed["data"]["signed"] is True and sent_back["data"]["status"] == "rejected"


def test_a_redirect_is_not_followed_and_a_long_answer_is_not_read(app, client, acme, receiver):
    endpoint = register(client, acme, receiver.url)
    receiver.statuses = [307]
    receiver.location = receiver.url.replace("/hooks", "/elsewhere")
    create(client, acme)
    send_due(app)
    assert [headers.get("host") for headers, _ in receiver.requests] == \
        [f"127.0.0.1:{receiver.server.server_port}"]
    listed = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries", headers=acme.headers).json
    assert listed["data"][0]["attempts"][0]["error"] == "answered with status 307"
    receiver.location, receiver.answer_bytes, receiver.written = None, 256 * 1024 * 1024, 0
    replay = f"/v1/webhooks/{endpoint['id']}/deliveries/{listed['data'][0]['id']}/replay"
    assert client.post(replay, headers=acme.headers).status_code == 200
    started = time.monotonic()
    send_due(app)  # a quarter of a gigabyte offered: 64 KiB read, then the connection closed
    assert time.monotonic() - started < 5
    assert receiver.written < 16 * 1024 * 1024  # what socket buffers hold, at most
    attempts = client.get(f"/v1/webhooks/{endpoint['id']}/deliveries",
                          headers=acme.headers).json["data"][0]["attempts"]
    assert [a["status_code"] for a in attempts] == [307, 200]


def test_an_endpoint_is_claimed_by_one_worker_at_a_time_and_old_attempts_are_forgotten(
        app, client, acme, rival, receiver):
    first = register(client, acme, receiver.url)
    second = register(client, acme, receiver.url + "&second")
    third = register(client, rival, receiver.url)
    create(client, acme)
    create(client, rival)
    with app.app_context():
        app.config["WEBHOOK_PER_COMPANY"] = 1
        one = webhook_delivery.claim_endpoints(10)
        assert webhook_delivery.claim_endpoints(10) == []  # another worker, meanwhile: nothing
        assert {e for e, _ in one} in ({first["id"], third["id"]}, {second["id"], third["id"]})
        for endpoint_id, claim_id in one:
            webhook_delivery.drain(endpoint_id, claim_id)
        [(last, claim_id)] = webhook_delivery.claim_endpoints(10)  # the company's other one
        assert last in {first["id"], second["id"]} - {e for e, _ in one}
        webhook_delivery.drain(last, claim_id)
        assert db.session.query(WebhookDelivery).filter_by(status="delivered").count() == 3
        webhook_delivery.sweep(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=29))
        assert db.session.query(WebhookDelivery).count() == 3
        webhook_delivery.sweep(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=31))
        assert db.session.query(WebhookDelivery).count() == 0
    assert len(receiver.requests) == 3


def test_two_workers_send_each_delivery_once(app, client, acme, rival, receiver):
    for tenant, count in ((acme, 3), (rival, 2)):
        for n in range(count):
            register(client, tenant, f"{receiver.url}&endpoint={n}")
    for _ in range(3):
        create(client, acme)
        create(client, rival)
    app.config["WEBHOOK_POLL_S"] = 0.02
    stops = [threading.Event(), threading.Event()]
    workers = [threading.Thread(target=webhook_delivery.work, args=(app, stop), daemon=True)
               for stop in stops]
    for worker in workers:
        worker.start()
    try:
        wait_for(lambda: len(receiver.requests) >= 3 * 3 + 3 * 2)
    finally:
        for stop in stops:
            stop.set()
        for worker in workers:
            worker.join(30)
    # Both workers ran to the end of what they had taken: a second send would be here.
    assert len(receiver.ids()) == len(set(receiver.ids())) == 15
    with app.app_context():
        assert {d.status for d in db.session.query(WebhookDelivery)} == {"delivered"}


def test_a_change_in_procore_read_back_is_told_once(app, client, acme, receiver, sandbox_server):
    """Programs hear when a written record's status or change orders change in Procore, not
    when it is read back unchanged, nor on the first read of an event still open on none."""
    endpoint = register(client, acme, receiver.url, events=["ticket.record_changed"])
    ticket = written(client, acme)
    assert sync(client, acme, ticket["id"]).status_code == 200
    assert send_due(app) == 0
    procore = control(sandbox_server, acme)
    propose_on_commitment(sandbox_server, ticket, "Apex Concrete, Inc.")
    procore.put_on_change_orders(ticket["external"]["change_event_id"], "commitment", "pending")
    assert sync(client, acme, ticket["id"]).status_code == 200
    assert sync(client, acme, ticket["id"]).status_code == 200  # unchanged: nothing more
    procore.put_on_change_orders(ticket["external"]["change_event_id"], "commitment", "approved")
    assert sync(client, acme, ticket["id"]).status_code == 200
    procore.close()
    assert send_due(app) == 2
    events = receiver.events(endpoint["secret"])
    assert [e["type"] for e in events] == ["ticket.record_changed"] * 2
    assert [[o["status"] for o in e["data"]["external"]["change_orders"]] for e in events] == \
        [["pending"], ["approved"]]
