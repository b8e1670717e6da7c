"""Request logs: one JSON line per request, and no secret in any log line."""
from __future__ import annotations

import io
import json
import logging
import os
import re
import threading

from services.accounts import reviewers
from services.platform.logs import JsonLines, redact
from support.images import data_url, jpeg_bytes


def formatted(caplog) -> list[str]:
    """Every captured record as the JSON line production would write."""
    formatter = JsonLines()
    return [formatter.format(record) for record in caplog.records]


def test_request_lines_carry_route_status_company_and_prefix(app, client, acme, caplog):
    caplog.set_level(logging.INFO)
    response = client.get("/v1/me", headers={**acme.headers, "X-Request-Id": "trace-12345678"})
    assert response.headers["X-Request-Id"] == "trace-12345678"
    lines = [json.loads(line) for line in formatted(caplog) if '"logger": "ewt.requests"' in line]
    entry = lines[-1]
    assert entry["route"] == "/v1/me" and entry["status"] == 200 and entry["method"] == "GET"
    assert entry["company_id"] == acme.company_id and entry["key_prefix"] == acme.prefix
    assert entry["request_id"] == "trace-12345678" and entry["duration_ms"] >= 0
    generated = client.get("/v1/me", headers={"X-Request-Id": "bad id with spaces"})
    assert re.fullmatch(r"[0-9a-f]{16}", generated.headers["X-Request-Id"])


def test_generated_request_ids_differ_across_requests_and_forked_workers(client):
    """Generated ids are random in every request and every forked worker: no two collide."""
    def ids(count: int) -> list[str]:
        return [client.get("/healthz").headers["X-Request-Id"] for _ in range(count)]

    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(writer, " ".join(ids(50)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    mine = ids(50)
    with os.fdopen(reader) as pipe:
        theirs = pipe.read().split()
    os.waitpid(child, 0)
    assert len(theirs) == 50 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in mine + theirs)
    assert len(set(mine) | set(theirs)) == 100


def test_no_secret_reaches_any_log_line(app, client, acme, caplog):
    caplog.set_level(logging.DEBUG)
    password = "a reviewer password 9"
    with app.app_context():
        reviewers.create_reviewer(acme.company_id, "pm@acme.example", password)
    link = client.post("/v1/links", headers=acme.headers, json={"project_id": acme.project()["id"]}).json
    client.get(link["url"])
    app.config["CAPTURE_RATE_LIMIT"] = "1 per minute"
    ticket = client.post(f"/c/{link['token']}/tickets?via=qr", json={
        "description": "d", "reason": "r", "directed_by": "x",
        "labor": [{"trade": "Laborer", "hours": 1, "rate": 1, "costCode": "02-200"}],
        "photos": [{"data_url": data_url(jpeg_bytes())}]}).json
    refused = client.post(f"/c/{link['token']}/tickets", json={"description": "again"})
    assert refused.status_code == 429  # Flask-Limiter logs the breach with the link's bucket
    client.get("/v1/projects", headers={"X-API-Key": acme.key})
    client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})
    client.get("/v1/me", headers={"Authorization": "Bearer ewt_" + "Z" * 43})  # an unknown key
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    client.post("/login", data={"csrf_token": token, "email": "pm@acme.example", "password": password})
    lines = formatted(caplog)
    assert len(lines) >= 8
    everything = "\n".join(lines)
    for secret in (acme.key, "ewt_" + "Z" * 43, link["token"], acme.client_secret, password):
        assert secret not in everything
    assert "Bearer " not in everything


def test_redact_blanks_every_secret_shape():
    text = ("GET /c/AbCdEfGhIjKlMnOpQrStUvWxYz012345/q Authorization: Bearer abc.def "
            "key ewt_" + "k" * 43 + " client_secret=s3cr3t"
            " ratelimit 1 per 1 minute (link:ZyXwVuTsRqPoNmLkJiHg98765) exceeded"
            " GET /s/" + "S" * 43 + " GET /login/link/eyJyIjoxfQ.aGVsbG8.c2lnbmVk"
            " secret whsec_" + "W" * 32)
    cleaned = redact(text)
    assert "eyJyIjoxfQ" not in cleaned and "W" * 16 not in cleaned
    assert "AbCdEf" not in cleaned and "abc.def" not in cleaned and "k" * 43 not in cleaned
    assert "s3cr3t" not in cleaned and "ZyXwVu" not in cleaned and "S" * 16 not in cleaned
    assert cleaned.count("[redacted]") == 8


def test_production_logging_is_the_standard_stream_handler_writing_json_lines(
        tmp_path, migrated_template):
    """Outside tests every line is written at once by logging's own StreamHandler, no thread."""
    from app import create_app
    from tests.conftest import app_config

    root = logging.getLogger()
    kept_handlers, kept_level = list(root.handlers), root.level
    threads_before = set(threading.enumerate())
    try:
        app = create_app(app_config(tmp_path, migrated_template, TESTING=False))
        ours = [h for h in root.handlers if isinstance(h.formatter, JsonLines)]
        assert len(ours) == 1 and type(ours[0]) is logging.StreamHandler
        stream = io.StringIO()
        ours[0].setStream(stream)
        app.test_client().get("/healthz", headers={"X-Request-Id": "check-line-1234"})
        line = json.loads(stream.getvalue().strip().splitlines()[-1])
        assert line["request_id"] == "check-line-1234" and line["route"] == "/healthz"
        assert set(threading.enumerate()) - threads_before == set()  # none started (others may end)
        with app.app_context():
            from models import db
            db.engine.dispose()
    finally:
        root.handlers[:] = kept_handlers
        root.setLevel(kept_level)
