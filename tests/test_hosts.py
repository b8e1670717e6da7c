"""Links and URLs are built on the public base URL, never on a Host header a client sent."""
from __future__ import annotations

import json
import os

import pytest
import requests

from app import create_app
from support.images import data_url, jpeg_bytes
from support.servers import free_port
from tests.conftest import app_config, connect_tenant
from tests.test_crash import start_server
from tests.test_tickets import ticket_body
from webapp import trusted_hosts

FORGED = {"Host": "evil.example"}


def test_a_forged_host_is_refused_before_anything_runs(client, acme):
    made = client.post("/v1/links", headers={**acme.headers, **FORGED},
                       json={"project_id": acme.project()["id"]})
    assert made.status_code == 400 and made.json["error"]["code"] == "host_not_served"
    assert "evil.example" not in made.get_data(as_text=True)
    assert client.get("/v1/links", headers=acme.headers).json["data"] == []  # nothing stored
    page = client.get("/login", headers=FORGED)
    assert page.status_code == 400 and "evil.example" not in page.get_data(as_text=True)
    assert client.get("/healthz", headers={"Host": "127.0.0.1:5000"}).status_code == 200


def test_links_and_photo_urls_use_the_public_base_url(tmp_path, migrated_template, sandbox_server):
    app = create_app(app_config(tmp_path, migrated_template, SANDBOX_URL=sandbox_server.url,
                                SANDBOX_DB_PATH=str(sandbox_server.db_path),
                                PHOTO_DIR=str(tmp_path / "photos"),
                                PUBLIC_BASE_URL="https://tickets.example.com"))
    acme = connect_tenant(app)
    client = app.test_client()
    for host in ("evil.example", "evil.example:443", "tickets.example.com.evil.example"):
        refused = client.post("/v1/links", headers={**acme.headers, "Host": host},
                              json={"project_id": acme.project()["id"]})
        assert refused.status_code == 400, host
    # Served on loopback (the box itself) and on its public name, links name only the latter.
    for host in ("localhost", "tickets.example.com", "127.0.0.1:5000"):
        link = client.post("/v1/links", headers={**acme.headers, "Host": host},
                           json={"project_id": acme.project()["id"]}).json
        for url in (link["url"], *link["urls"].values(), link["qr_svg_url"], link["poster_url"]):
            assert url.startswith("https://tickets.example.com/"), url
    ticket = client.post("/v1/tickets", headers={**acme.headers, "Host": "tickets.example.com"},
                         json=ticket_body(acme.project()["id"],
                                          photos=[{"data_url": data_url(jpeg_bytes())}])).json
    assert ticket["photos"][0]["url"].startswith("https://tickets.example.com/v1/tickets/")
    assert "evil" not in json.dumps(ticket)
    with app.app_context():
        from models import db
        db.engine.dispose()


def test_trusted_hosts_are_the_public_name_and_loopback():
    assert trusted_hosts(None) == ["localhost", "127.0.0.1"]
    assert trusted_hosts("https://tickets.example.com/") == ["tickets.example.com", "localhost",
                                                             "127.0.0.1"]


@pytest.mark.live
def test_a_forged_host_never_reaches_a_link_on_the_served_app(app, acme, sandbox_server, tmp_path):
    """Over loopback against the app as make run serves it (its base URL from HOST and PORT)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(app, sandbox_server, tmp_path, port, EWT_PUBLIC_BASE_URL=base)
    try:
        forged = requests.post(f"{base}/v1/links", headers={**acme.headers, **FORGED}, timeout=10,
                               json={"project_id": acme.project()["id"]})
        assert forged.status_code == 400 and "evil" not in forged.text
        token = requests.post(f"{base}/v1/links", headers=acme.headers, timeout=10,
                              json={"project_id": acme.project()["id"]}).json()["token"]
        sent = requests.post(f"{base}/c/{token}/tickets", headers=FORGED, timeout=30, json={
            "description": "d", "reason": "r", "directed_by": "s",
            "photos": [{"data_url": data_url(jpeg_bytes())}]})
        assert sent.status_code == 400 and "evil" not in sent.text
        for path in ("/v1/links", "/v1/tickets"):
            listed = requests.get(f"{base}{path}", headers=acme.headers, timeout=10)
            assert listed.status_code == 200 and "evil" not in listed.text
            assert f"{base}/" in listed.text or path == "/v1/tickets"
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
