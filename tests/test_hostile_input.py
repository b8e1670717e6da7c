"""Hostile input: every attempt gets a clear 4xx in the error shape and stores nothing."""
from __future__ import annotations

import base64
import io
import json
import struct
import zlib

import pytest
from PIL import Image

from models import Ticket, TicketPhoto, db
from support.images import data_url, jpeg_bytes
from tests.plugins.storage import stored_names


def bomb_png() -> str:
    """A tiny PNG whose header claims 40000 x 40000 pixels."""
    buffer = io.BytesIO()
    Image.new("1", (8, 8)).save(buffer, "PNG")
    raw = bytearray(buffer.getvalue())
    ihdr = struct.pack(">II", 40_000, 40_000) + bytes(raw[24:29])
    raw[16:29] = ihdr
    raw[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(bytes(raw)).decode()


def base(project_id: str, **extra) -> dict:
    body = {"project_id": project_id, "description": "d", "reason": "r", "directed_by": "x"}
    body.update(extra)
    return body


def stored_state(app) -> tuple[int, int, int]:
    """Tickets, photo rows and image files: all must stay put after a refusal."""
    with app.app_context():
        tickets = db.session.query(Ticket).count()
        photos = db.session.query(TicketPhoto).count()
    return tickets, photos, len(stored_names(app))


GOOD_PHOTO = {"name": "ok.jpg", "data_url": None}


def hostile_bodies(project_id: str):
    """(label, raw body or JSON, content type, expected status, expected code)."""
    good = data_url(jpeg_bytes())
    yield "malformed JSON", '{"project_id": ', "application/json", 400, "invalid_json"
    yield "deeply nested JSON", "[" * 100_000 + "]" * 100_000, "application/json", 400, "invalid_json"
    yield "nested objects", '{"a":' * 5000 + "1" + "}" * 5000, "application/json", 400, "invalid_json"
    yield "not an object", "[1,2,3]", "application/json", 400, "invalid_body"
    yield "NaN", json.dumps(base(project_id)).replace('"d"', "NaN"), "application/json", 400, "invalid_json"
    yield "Infinity", '{"project_id": "1", "labor": [{"trade": "x", "hours": Infinity}]}', \
        "application/json", 400, "invalid_json"
    yield "huge string", base(project_id, description="x" * 100_000), None, 400, "validation_failed"
    yield "negative hours", base(project_id, labor=[{"trade": "x", "hours": -1}]), None, 400, \
        "validation_failed"
    yield "absurd rate", base(project_id, labor=[{"trade": "x", "hours": 1, "rate": 1e300}]), None, 400, \
        "validation_failed"
    yield "absurd workers", base(project_id, labor=[{"trade": "x", "hours": 1, "workers": 10**9}]), \
        None, 400, "validation_failed"
    yield "boolean number", base(project_id, materials=[{"description": "x", "quantity": True}]), None, 400, \
        "validation_failed"
    yield "13 photos", base(project_id, photos=[{"data_url": good}] * 13), None, 400, "validation_failed"
    pdf = base64.b64encode(b"%PDF-1.4").decode()
    yield "non-image photo", base(project_id, photos=[{"data_url": good}, {"data_url": pdf}]), \
        None, 400, "validation_failed"
    yield "truncated photo", base(project_id, photos=[{"data_url": good}, {
        "data_url": base64.b64encode(jpeg_bytes(300, 200)[:200]).decode()}]), None, 400, "validation_failed"
    yield "decompression bomb", base(project_id, photos=[{"data_url": good}, {"data_url": bomb_png()}]), \
        None, 400, "validation_failed"
    yield "invalid base64", base(project_id, photos=[{"data_url": good}, {"data_url": "%%%%"}]), None, 400, \
        "validation_failed"
    yield "bad signature", base(project_id, photos=[{"data_url": good}],
                                signature={"image": "data:image/png;base64,iVBORw0KGgo="}), None, 400, \
        "validation_failed"
    yield "oversized body", base(project_id, description="x" * (40 * 1024 * 1024)), None, 413, \
        "payload_too_large"
    yield "form body", "project_id=1", "application/x-www-form-urlencoded", 415, "unsupported_media_type"
    yield "unknown project", base("9999999"), None, 404, "project_not_found"
    yield "SQL in project id", base("1' OR '1'='1"), None, 404, "project_not_found"


def test_each_hostile_ticket_is_refused_and_nothing_is_stored(app, client, acme):
    project_id = acme.project()["id"]
    before = stored_state(app)
    seen = []
    for label, body, content_type, status, code in hostile_bodies(project_id):
        if isinstance(body, dict):
            response = client.post("/v1/tickets", headers=acme.headers, json=body)
        else:
            response = client.post("/v1/tickets", headers=acme.headers, data=body,
                                   content_type=content_type)
        assert response.status_code == status, (label, response.status_code, response.data[:300])
        error = response.json["error"]
        assert error["code"] == code, label
        assert error["message"], label
        assert stored_state(app) == before, label
        seen.append(label)
    assert len(seen) == 21


def test_a_huge_integer_is_refused_as_too_large_in_plain_words(app, client, acme):
    huge = '{"project_id": "1", "description": "d", "reason": "r", "directed_by": "x", ' \
           '"labor": [{"trade": "x", "hours": ' + "9" * 4400 + '}]}'
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    before = stored_state(app)
    for path, headers in (("/v1/tickets", acme.headers), (f"/c/{token}/tickets", {})):
        response = client.post(path, headers=headers, data=huge, content_type="application/json")
        assert response.status_code == 400, (path, response.data[:300])
        error = response.json["error"]
        assert error["code"] == "invalid_json" and error["message"].startswith("number too large")
        assert "sys." not in error["message"] and "4300" not in error["message"]
        assert stored_state(app) == before


def test_hostile_photo_attachments_store_nothing(app, client, acme):
    ticket = client.post("/v1/tickets", headers=acme.headers, json=base(acme.project()["id"])).json
    before = stored_state(app)
    good = {"data_url": data_url(jpeg_bytes(20, 20))}
    for photos in ([good, {"data_url": bomb_png()}], [good] * 13, [good, {"data_url": "AAAA"}]):
        response = client.post(f"/v1/tickets/{ticket['id']}/photos", headers=acme.headers,
                               json={"photos": photos})
        assert response.status_code == 400 and response.json["error"]["code"] == "validation_failed"
        assert stored_state(app) == before


def test_path_tricks_sql_and_template_syntax_are_kept_as_plain_text(app, client, acme):
    tricky = {
        "description": "'; DROP TABLE tickets; --",
        "reason": "{{ config.SECRET_KEY }} {% for x in range(9) %}x{% endfor %}",
        "directed_by": "../../../../etc/passwd",
        "captured_by": "%00\\..\\..\\windows",
        "photos": [{"name": "../../../instance/secret_key", "data_url": data_url(jpeg_bytes())}],
    }
    ticket = client.post("/v1/tickets", headers=acme.headers, json=base(acme.project()["id"], **tricky)).json
    read = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    for field in ("description", "reason", "directed_by", "captured_by"):
        assert read[field] == tricky[field]
    assert read["photos"][0]["name"] == "../../../instance/secret_key"
    stored = stored_names(app)
    assert stored and all(len(name) == 68 and name.endswith(".jpg") for name in stored)
    assert client.get("/v1/tickets?q=%27%3B%20DROP", headers=acme.headers).json["total"] == 1
    # % is literal: "%%" is in no field (a wildcard would match every ticket); "%" alone is in
    # captured_by, which the search covers.
    assert client.get("/v1/tickets?q=%25%25", headers=acme.headers).json["total"] == 0
    assert client.get("/v1/tickets?q=%2500", headers=acme.headers).json["total"] == 1
    with app.app_context():
        assert db.session.query(Ticket).count() == 1


@pytest.mark.parametrize("path", ["/v1/tickets/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/v1/tickets/..%5c..%5c",
                                  "/v1/links/..%2f..%2f/revoke", "/v1/projects/%00/capability"])
def test_path_tricks_in_urls_are_plain_404s(client, acme, path):
    method = client.post if path.endswith("revoke") else client.get
    response = method(path, headers=acme.headers)
    assert response.status_code == 404
    assert set(response.json["error"]) >= {"code", "message"}
