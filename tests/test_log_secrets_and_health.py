"""No secret in any log line, whatever the handler; /healthz detail only to loopback or a key."""
from __future__ import annotations

import io
import logging
import re

import pytest

from support.images import data_url, jpeg_bytes, png_bytes


@pytest.fixture
def plain_handler():
    """A handler with logging's default formatter on the root logger, as gunicorn or journald use."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


def test_flask_limiter_lines_never_carry_a_link_token(app, client, acme, plain_handler):
    app.config["CAPTURE_RATE_LIMIT"] = "1 per minute"
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    body = {"description": "d", "reason": "r", "directed_by": "s",
            "photos": [{"data_url": data_url(jpeg_bytes())}]}
    client.post(f"/c/{token}/tickets", json=body)
    refused = client.post(f"/c/{token}/tickets", json=body)
    assert refused.status_code == 429
    written = plain_handler.getvalue()
    assert "rate limit" in written and "exceeded" in written  # the line is there ...
    assert token not in written                               # ... without the credential


def test_limit_storage_holds_no_link_token(app, client, acme):
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    client.post(f"/c/{token}/tickets", json={"description": "d", "reason": "r", "directed_by": "s"})
    from services.accounts.ratelimit import limiter

    storage = limiter.storage
    if hasattr(storage, "events"):  # memory://: counters and moving-window events by key
        keys = [*storage.storage.keys(), *storage.events.keys()]
    else:  # Redis (make test-scale): every key in its database
        keys = [key.decode() for key in storage.storage.keys("*")]
    assert keys  # the submission was counted
    assert not any(token in key for key in keys)


def test_no_signing_token_reaches_any_log_line(app, client, acme, plain_handler, caplog):
    from tests.test_logs import formatted

    caplog.set_level(logging.DEBUG)
    ticket = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "d", "reason": "r", "directed_by": "x",
        "photos": [{"data_url": data_url(jpeg_bytes())}]}).json
    # Mail settings pointing nowhere: the failed e-mail is logged, without the link.
    app.config.update(MAIL_SERVER="127.0.0.1", MAIL_PORT=9, MAIL_TIMEOUT_S=2)
    asked = client.post(f"/v1/tickets/{ticket['id']}/signature-requests", headers=acme.headers,
                        json={"name": "Sam", "email": "sam@gc.example"}).json
    assert asked["emailed_at"] is None
    token = asked["url"].rsplit("/s/", 1)[1]
    app.config["SIGNING_RATE_LIMIT"] = "2 per minute"
    page = client.get(f"/s/{token}").get_data(as_text=True)
    client.get(f"/s/{token}/photos/{ticket['photos'][0]['id']}")
    digest = re.search(r'name="content_sha256" value="([0-9a-f]{64})"', page).group(1)
    client.post(f"/s/{token}", data={"content_sha256": digest, "name": "Sam", "qualifier": "verified",
                                     "image": data_url(png_bytes(), "image/png")})
    assert client.get(f"/s/{token}").status_code == 429  # the limiter logs the breach
    client.get(f"/s/{token[:-1]}x")
    everything = plain_handler.getvalue() + "\n".join(formatted(caplog))
    assert "/s/<token>" in everything and "exceeded" in everything
    assert "e-mail to the SMTP server" in everything
    assert token not in everything and token[:16] not in everything


def test_healthz_shows_detail_to_loopback_only(app, client):
    local = client.get("/healthz")
    assert "checks" in local.json
    outside = app.test_client()
    outside.environ_base["REMOTE_ADDR"] = "203.0.113.9"
    answer = outside.get("/healthz")
    assert answer.status_code == 200 and answer.json == {"status": "ok"}
    forwarded = client.get("/healthz", headers={"X-Forwarded-For": "203.0.113.9"})
    assert forwarded.json == {"status": "ok"}  # through a proxy the app was not told to trust


def test_healthz_detail_with_the_key(app):
    app.config["HEALTHZ_KEY"] = "monitor-key-0123456789"
    outside = app.test_client()
    outside.environ_base["REMOTE_ADDR"] = "203.0.113.9"
    assert "checks" not in outside.get("/healthz", headers={"X-Health-Key": "wrong"}).json
    assert "checks" in outside.get("/healthz", headers={"X-Health-Key": "monitor-key-0123456789"}).json


def test_healthz_says_degraded_to_others_without_detail(app, monkeypatch):
    from services import health

    monkeypatch.setattr(health, "MIN_FREE_BYTES", 2**62)
    outside = app.test_client()
    outside.environ_base["REMOTE_ADDR"] = "203.0.113.9"
    answer = outside.get("/healthz")
    assert answer.status_code == 503 and answer.json == {"status": "degraded"}
