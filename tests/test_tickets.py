"""Tickets over the API: validation, amounts, photos, signature, routing, reads and lists."""
from __future__ import annotations

import base64
import datetime as dt
import io
import re
import struct
import uuid
import zlib

import pytest
import time_machine
from PIL import Image

from models import Ticket, TicketPhoto, db
from services.files.storage import file_store
from support.images import data_url, jpeg_bytes, png_bytes
from tests.plugins.storage import stored_names


def ticket_body(project_id: str, **extra) -> dict:
    """A complete, valid ticket body."""
    body = {"project_id": project_id, "description": "Moved the trench 3 m east",
            "reason": "Conflict with an unmarked gas line", "directed_by": "Sam Ortiz (GC super)",
            "captured_by": "Lee Park"}
    body.update(extra)
    return body


def count_rows(app, model) -> int:
    with app.app_context():
        return db.session.query(model).count()


def test_create_ticket_with_every_field(client, acme, app):
    project = acme.project()
    body = ticket_body(
        project["id"],
        labor=[{"trade": "Laborer", "hours": 8, "workers": 3, "rate": 55.5, "costCode": "02-200"}],
        equipment=[{"description": "Mini excavator", "hours": 4, "rate": 95, "costCode": "02-200"}],
        materials=[{"description": "Gravel", "quantity": 3, "unitCost": 41.25}],
        photos=[{"name": "trench.jpg", "data_url": data_url(jpeg_bytes()),
                 "taken_at": "2026-05-04T07:31:00Z", "coords": {"lat": 45.5, "lng": -122.6}}],
        signature={"name": "Sam Ortiz", "role": "Superintendent", "signed_at": "2026-05-04T08:00:00Z",
                   "qualifier": "time and material only", "image": data_url(png_bytes(), "image/png")},
    )
    now = dt.datetime(2026, 5, 4, 8, 5, tzinfo=dt.timezone.utc)
    with time_machine.travel(now, tick=False):
        response = client.post("/v1/tickets", json=body, headers=acme.headers)
    assert response.status_code == 200, response.json
    ticket = response.json
    assert ticket["status"] == "submitted"
    assert ticket["captured_via"] == "api" and ticket["link_token"] is None
    assert ticket["captured_at"].startswith("2026-05-04T08:05:00")
    assert ticket["labor"][0]["amount"] == 1332.0 and ticket["labor"][0]["workers"] == 3
    assert ticket["equipment"][0]["amount"] == 380.0
    assert ticket["materials"][0]["amount"] == 123.75
    assert ticket["total"] == 1835.75
    assert ticket["photo_count"] == 1
    (photo,) = ticket["photos"]
    evidence = f"http://localhost/v1/tickets/{ticket['id']}"
    assert photo == {"id": photo["id"], "name": "trench.jpg", "taken_at": "2026-05-04T07:31:00Z",
                     "coords": {"lat": 45.5, "lng": -122.6, "accuracy_m": None},
                     "url": f"{evidence}/photos/{photo['id']}",
                     "thumbnail_url": f"{evidence}/photos/{photo['id']}/thumbnail"}
    signature = ticket["signature"]
    # A qualifier sent as free text (before the three choices) is kept as the reason.
    assert signature == {"id": signature["id"], "name": "Sam Ortiz", "role": "Superintendent",
                         "signed_at": "2026-05-04T08:00:00Z",
                         "qualifier": None, "qualifier_reason": "time and material only",
                         "content_sha256": signature["content_sha256"], "signed_via": "api",
                         "ip_address": None, "user_agent": None,
                         "url": f"{evidence}/signature", "thumbnail_url": f"{evidence}/signature/thumbnail"}
    assert re.fullmatch(r"[0-9a-f]{64}", signature["content_sha256"])
    assert len(signature["id"]) == 64
    assert ticket["decisions"] == [] and ticket["external"] is None
    # Making the ticket read no codes (this process had none yet): its routing is pending,
    # and the first read works it out.
    assert ticket["routing_pending"] is True
    assert {r["reason"] for r in ticket["routing"]} == {
        "routing is pending: the project's budget codes have not been read yet"}
    read = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert [r["line"] for r in read["routing"]] == [0, 1, 2]
    assert read["routing"][0]["exact"] is True and read["routing"][0]["budget_code"] == "02-200.L"
    assert read["routing_pending"] is False and read["warnings"] == []
    unchanged = ("routing", "routing_pending", "warnings")
    assert {k: v for k, v in read.items() if k not in unchanged} == \
        {k: v for k, v in ticket.items() if k not in unchanged}
    again = client.post("/v1/tickets", headers=acme.headers, json=body).json
    assert again["routing_pending"] is False and again["routing"] == read["routing"]


def test_missing_fields_are_listed_all_at_once(client, acme, app):
    response = client.post("/v1/tickets", headers=acme.headers, json={
        "description": "  ", "labor": [{"hours": 2}, {"trade": "x", "hours": -1, "rate": "abc"}],
        "materials": [{"description": "Pipe", "quantity": 1e9}],
    })
    assert response.status_code == 400
    error = response.json["error"]
    assert error["code"] == "validation_failed"
    fields = {d["field"] for d in error["details"]}
    assert {"project_id", "description", "reason", "directed_by", "labor[0].trade",
            "labor[1].hours", "labor[1].rate", "materials[0].quantity"} <= fields
    assert count_rows(app, Ticket) == 0


def test_strings_are_trimmed_and_limited(client, acme):
    response = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], description="  patched slab  ", captured_by="   "))
    assert response.json["description"] == "patched slab"
    assert response.json["captured_by"] is None
    too_long = client.post("/v1/tickets", headers=acme.headers,
                           json=ticket_body(acme.project()["id"], directed_by="x" * 201))
    assert too_long.status_code == 400
    assert too_long.json["error"]["details"][0]["field"] == "directed_by"


def test_unknown_or_other_companys_project_is_404(client, acme, rival, app):
    for project_id in ("123", rival.project()["id"], "not-a-number"):
        response = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project_id))
        assert response.status_code == 404
        assert response.json["error"]["code"] == "project_not_found"
    assert count_rows(app, Ticket) == 0


def test_amounts_are_exact_decimals(client, acme):
    body = ticket_body(acme.project()["id"],
                       labor=[{"trade": "Laborer", "hours": 0.1, "workers": 3, "rate": 10.01},
                              {"trade": "Helper", "hours": 1.005, "rate": 1}],
                       equipment=[{"description": "Pump", "hours": 0.1, "rate": 0.2}],
                       materials=[{"description": "Bolts", "quantity": 3, "unitCost": 0.1},
                                  {"description": "No price", "quantity": 2}])
    ticket = client.post("/v1/tickets", headers=acme.headers, json=body).json
    # Floats would give 3.0029999999999997, 1.0049999999999999 (then 1.0), 0.020000000000000004 ...
    assert [line["amount"] for line in ticket["labor"]] == [3.0, 1.01]
    assert ticket["equipment"][0]["amount"] == 0.02
    assert [m["amount"] for m in ticket["materials"]] == [0.3, 0.0]
    assert ticket["total"] == 4.33
    assert any("No price" in w and "unit cost" in w for w in ticket["warnings"])


def test_line_without_rate_has_zero_amount_and_a_warning(client, acme):
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], labor=[{"trade": "Laborer", "hours": 8}])).json
    line = ticket["labor"][0]
    assert {k: line[k] for k in ("trade", "hours", "workers", "rate", "costCode", "amount")} == \
        {"trade": "Laborer", "hours": 8.0, "workers": 1.0, "rate": None, "costCode": None,
         "amount": 0.0}
    assert line["pricing"]["source"] == "none" and line["pricing"]["needs_office"] is True
    assert ticket["total"] == 0.0
    assert ticket["warnings"][0] == "labor[0] (Laborer) has no rate, so its amount is 0"


def bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A tiny PNG whose header claims a huge canvas."""
    buffer = io.BytesIO()
    Image.new("1", (8, 8)).save(buffer, "PNG")
    raw = bytearray(buffer.getvalue())
    ihdr = struct.pack(">II", width, height) + bytes(raw[24:29])
    raw[16:29] = ihdr
    raw[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return bytes(raw)


@pytest.mark.parametrize("bad, words", [
    ("data:text/plain;base64,aGVsbG8=", "not accepted"),
    ("@@@not base64@@@", "invalid base64"),
    (base64.b64encode(b"just some text, not an image").decode(), "not a JPEG, PNG or WebP"),
    (base64.b64encode(jpeg_bytes(400, 300)[:300]).decode(), "truncated"),
    (base64.b64encode(bomb_png()).decode(), "too large"),
])
def test_bad_photos_are_refused_naming_the_photo(client, acme, app, bad, words):
    body = ticket_body(acme.project()["id"], photos=[
        {"name": "good.jpg", "data_url": data_url(jpeg_bytes())},
        {"name": "bad.jpg", "data_url": bad}])
    response = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert response.status_code == 400
    (detail,) = response.json["error"]["details"]
    assert detail["field"] == "photos[1]"
    assert "photo 2 (bad.jpg)" in detail["message"] and words in detail["message"]
    assert count_rows(app, Ticket) == 0 and count_rows(app, TicketPhoto) == 0


@pytest.mark.both_stores
def test_photos_are_reencoded_without_exif_and_capped(client, acme, app):
    image = Image.new("RGB", (4000, 3000), (10, 200, 30))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate: the stored photo must come out portrait
    gps = exif.get_ifd(0x8825)
    gps[2] = (45.0, 30.0, 0.0)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif, quality=70)
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], photos=[{"data_url": base64.b64encode(buffer.getvalue()).decode()}])).json
    assert ticket["photos"][0]["name"] == "photo-1.jpg"
    with app.app_context():
        photo = db.session.query(TicketPhoto).one()
        stored = (file_store(), photo.image_key, photo.thumb_key, photo.width, photo.height)
    store = stored[0]
    data = store.open(stored[1])
    assert b"Exif" not in data
    with Image.open(io.BytesIO(data)) as out:
        assert out.size == (1536, 2048) == (stored[3], stored[4])
        assert not out.getexif()
    with Image.open(io.BytesIO(store.open(stored[2]))) as thumb:
        assert max(thumb.size) == 320


def test_signature_counts_only_with_an_image(client, acme, app):
    no_image = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], signature={"name": "Sam", "role": "Super"})).json
    assert no_image["signature"] is None
    assert "the signature has no image, so it was not kept" in no_image["warnings"]
    bad = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], signature={"name": "Sam", "image": "data:image/png;base64,AAAA"}))
    assert bad.status_code == 400
    assert bad.json["error"]["details"][0]["field"] == "signature.image"


def test_twelve_photo_limits(client, acme, app):
    photo = {"data_url": data_url(jpeg_bytes())}
    thirteen = client.post("/v1/tickets", headers=acme.headers,
                           json=ticket_body(acme.project()["id"], photos=[photo] * 13))
    assert thirteen.status_code == 400
    assert thirteen.json["error"]["details"][0]["field"] == "photos"
    ticket = client.post("/v1/tickets", headers=acme.headers,
                         json=ticket_body(acme.project()["id"], photos=[photo] * 10)).json
    url = f"/v1/tickets/{ticket['id']}/photos"
    assert client.post(url, headers=acme.headers, json={"photos": []}).status_code == 400
    over = client.post(url, headers=acme.headers, json={"photos": [photo] * 3})
    assert over.status_code == 409 and over.json["error"]["code"] == "photos_full"
    assert "at most 2 more" in over.json["error"]["details"][0]["message"]
    added = client.post(url, headers=acme.headers, json={"photos": [photo, photo]})
    assert added.status_code == 200 and added.json["photo_count"] == 12, added.json
    assert [p["name"] for p in added.json["photos"]][-2:] == ["photo-11.jpg", "photo-12.jpg"]
    full = client.post(url, headers=acme.headers, json={"photos": [photo]})
    assert full.status_code == 409 and full.json["error"]["code"] == "photos_full"
    assert count_rows(app, TicketPhoto) == 12


def test_photos_refused_once_written(client, acme, app):
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(acme.project()["id"])).json
    with app.app_context():
        db.session.get(Ticket, ticket["id"]).status = "written"
        db.session.commit()
    response = client.post(f"/v1/tickets/{ticket['id']}/photos", headers=acme.headers,
                           json={"photos": [{"data_url": data_url(jpeg_bytes())}]})
    assert response.status_code == 409
    assert response.json["error"]["code"] == "ticket_written"


def test_other_companys_ticket_looks_missing(client, acme, rival):
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(acme.project()["id"])).json
    missing = client.get("/v1/tickets/00000000-0000-4000-8000-000000000000", headers=rival.headers)
    foreign = client.get(f"/v1/tickets/{ticket['id']}", headers=rival.headers)
    garbage = client.get("/v1/tickets/../../etc", headers=rival.headers)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json == missing.json
    assert garbage.status_code == 404
    photos = client.post(f"/v1/tickets/{ticket['id']}/photos", headers=rival.headers,
                         json={"photos": [{"data_url": data_url(jpeg_bytes())}]})
    assert photos.status_code == 404 and photos.json == missing.json
    assert client.get("/v1/tickets", headers=rival.headers).json["total"] == 0


def test_list_filters_paging_and_order(client, acme):
    with_tool, without_tool = acme.project(True)["id"], acme.project(False)["id"]
    start = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.timezone.utc)
    ids = []
    with time_machine.travel(start, tick=False) as clock:
        for i in range(5):
            project = with_tool if i % 2 == 0 else without_tool
            ids.append(client.post("/v1/tickets", headers=acme.headers,
                                   json=ticket_body(project, description=f"t{i}")).json["id"])
            if i != 3:
                clock.shift(60)  # tickets 3 and 4 share a timestamp: the id breaks the tie
    page = client.get("/v1/tickets", headers=acme.headers).json
    assert page["total"] == 5 and page["limit"] == 50 and page["offset"] == 0
    assert "routing" not in page["data"][0]
    expected = [ids[0], ids[1], ids[2]] + sorted([ids[3], ids[4]])
    assert [t["id"] for t in page["data"]] == list(reversed(expected))
    second = client.get("/v1/tickets?limit=2&offset=2", headers=acme.headers).json
    assert [t["id"] for t in second["data"]] == [t["id"] for t in page["data"][2:4]]
    only = client.get(f"/v1/tickets?project_id={without_tool}", headers=acme.headers).json
    assert only["total"] == 2
    assert client.get("/v1/tickets?status=written", headers=acme.headers).json["total"] == 0
    assert client.get("/v1/tickets?status=submitted", headers=acme.headers).json["total"] == 5


@pytest.mark.parametrize("query, field", [
    ("limit=abc", "limit"), ("limit=0", "limit"), ("limit=201", "limit"), ("offset=-1", "offset"),
    ("offset=x", "offset"), ("status=approved", "status"),
])
def test_bad_list_parameters_get_400(client, acme, query, field):
    response = client.get(f"/v1/tickets?{query}", headers=acme.headers)
    assert response.status_code == 400
    assert response.json["error"]["details"][0]["field"] == field


def test_routing_reads_use_the_cache(client, acme, app, sandbox_server):
    body = ticket_body(acme.project()["id"], labor=[{"trade": "Laborer", "hours": 1, "rate": 1}])
    ticket = client.post("/v1/tickets", headers=acme.headers, json=body).json
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).status_code == 200
    from services.project_system.connections import client_for
    with app.app_context():
        procore = client_for(acme.company_id)
    before = len(procore.calls)
    for _ in range(5):
        assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).status_code == 200
    assert len(procore.calls) == before


def test_list_totals_follow_creates_and_status_changes(client, acme, rival, app):
    """The list's `total` and the queue's counts per status agree with the tickets after every change."""
    from services.tickets.ticket_queries import ListFilter, list_status_counts

    with_tool, without_tool = acme.project(True)["id"], acme.project(False)["id"]
    ids = [client.post("/v1/tickets", headers=acme.headers,
                       json=ticket_body(with_tool if i < 3 else without_tool)).json["id"]
           for i in range(5)]
    client.post("/v1/tickets", headers=rival.headers, json=ticket_body(rival.project()["id"]))
    base = "/v1/tickets/{}/{}"
    assert client.post(base.format(ids[0], "reject"), headers=acme.headers).status_code == 200
    assert client.post(base.format(ids[1], "reject"), headers=acme.headers).status_code == 200
    assert client.post(base.format(ids[1], "restore"), headers=acme.headers).status_code == 200
    assert client.post(base.format(ids[2], "approve"), headers=acme.headers,
                       json={"allow_unrouted": True}).status_code == 200

    def total(query: str = "") -> int:
        """The list's total for a query string."""
        return client.get(f"/v1/tickets?limit=1{query}", headers=acme.headers).json["total"]

    assert total() == 5
    assert total("&status=submitted") == 3 and total("&status=rejected") == 1
    assert total("&status=written") == 1
    assert total(f"&project_id={with_tool}") == 3
    assert total(f"&project_id={without_tool}&status=submitted") == 2
    assert total("&q=trench") == 5
    with app.app_context():
        counted = {status: db.session.query(Ticket).filter_by(company_id=acme.company_id,
                                                              status=status).count()
                   for status in ("submitted", "written", "rejected")}
        assert list_status_counts(acme.company_id, ListFilter()) == counted == {
            "submitted": 3, "written": 1, "rejected": 1}
        assert list_status_counts(acme.company_id, ListFilter(project_id=with_tool)) == {
            "submitted": 1, "written": 1, "rejected": 1}


def test_ticket_reads_even_when_the_project_system_is_not_connected(client, acme, app):
    """Without a connection the ticket still reads; every line is flagged for a person."""
    from models import ProjectSystemConnection

    body = ticket_body(acme.project()["id"], labor=[{"trade": "Laborer", "hours": 1, "rate": 1}])
    ticket = client.post("/v1/tickets", headers=acme.headers, json=body).json
    with app.app_context():
        db.session.query(ProjectSystemConnection).delete()
        db.session.commit()
    app.extensions.pop("project_system_caches", None)
    read = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers)
    assert read.status_code == 200
    assert read.json["routing"][0]["needs_review"] is True
    assert any(w.startswith("routing is unavailable") for w in read.json["warnings"])


def test_every_problem_at_once_shape_photos_and_signature(client, acme, app):
    """A body with a wrong field, a bad photo and a bad signature gets all three in one 400."""
    body = ticket_body(acme.project()["id"], photos=[
        {"data_url": data_url(jpeg_bytes())},
        {"name": "nope.jpg", "data_url": base64.b64encode(b"not an image").decode()},
        {"name": "no data"},
        {"data_url": "@@@"}],
        signature={"name": "Sam", "signed_at": "yesterday", "image": "data:image/png;base64,AAAA"})
    body["labor"] = [{"trade": "Laborer", "hours": -1}]
    response = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert response.status_code == 400
    details = {d["field"]: d["message"] for d in response.json["error"]["details"]}
    assert set(details) == {"labor[0].hours", "photos[2].data_url", "signature.signed_at",
                            "photos[1]", "photos[3]", "signature.image"}
    assert details["photos[1]"].startswith("photo 2 (nope.jpg):")
    assert details["photos[3]"].startswith("photo 4:")
    assert details["signature.image"].startswith("signature:")
    assert count_rows(app, Ticket) == 0 and count_rows(app, TicketPhoto) == 0
    assert stored_names(app) == []
    attach = client.post(f"/v1/tickets/{uuid.uuid4()}/photos", headers=acme.headers, json={
        "photos": [{"data_url": "@@@", "taken_at": "never"}, {"data_url": data_url(jpeg_bytes())}]})
    assert attach.status_code == 400
    assert {d["field"] for d in attach.json["error"]["details"]} == \
        {"photos[0].taken_at", "photos[0]"}


def test_evidence_is_reachable_with_the_key_and_only_by_its_company(client, acme, rival, app):
    ticket = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], photos=[{"data_url": data_url(jpeg_bytes(900, 600))}],
        signature={"name": "Sam", "image": data_url(png_bytes(800, 300), "image/png")})).json
    photo, signature = ticket["photos"][0], ticket["signature"]
    sizes = {}
    for url, media_type in ((photo["url"], "image/jpeg"), (photo["thumbnail_url"], "image/jpeg"),
                            (signature["url"], "image/png"),
                            (signature["thumbnail_url"], "image/png")):
        path = url.removeprefix("http://localhost")
        answer = client.get(path, headers=acme.headers)
        assert answer.status_code == 200 and answer.mimetype == media_type, path
        assert "RateLimit-Remaining" in answer.headers
        with Image.open(io.BytesIO(answer.data)) as image:
            sizes[url] = image.size
        assert client.get(path).status_code == 401
        foreign = client.get(path, headers=rival.headers)
        assert foreign.status_code == 404
        assert foreign.json["error"]["code"] == "ticket_not_found"
    as_bytes = client.get(photo["url"].removeprefix("http://localhost"),
                          headers={**acme.headers, "Accept": "application/octet-stream"})
    assert as_bytes.mimetype == "application/octet-stream" and as_bytes.data[:2] == b"\xff\xd8"
    assert sizes[photo["url"]] == (900, 600) and max(sizes[photo["thumbnail_url"]]) == 320
    assert sizes[signature["url"]] == (800, 300) and max(sizes[signature["thumbnail_url"]]) == 320
    other = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        acme.project()["id"], photos=[{"data_url": data_url(jpeg_bytes())}])).json
    crossed = client.get(f"/v1/tickets/{other['id']}/photos/{photo['id']}", headers=acme.headers)
    assert crossed.status_code == 404 and crossed.json["error"]["code"] == "photo_not_found"
    huge = client.get(f"/v1/tickets/{ticket['id']}/photos/{10**30}", headers=acme.headers)
    assert huge.status_code == 404
    unsigned = client.get(f"/v1/tickets/{other['id']}/signature", headers=acme.headers)
    assert unsigned.status_code == 404 and unsigned.json["error"]["code"] == "signature_not_found"


def test_creating_never_waits_on_the_project_system(client, acme, app, monkeypatch):
    """Tickets are taken for known projects while the project system is away; routing waits."""
    from services.project_system import projects as project_service

    project = acme.project()["id"]
    reachable = app.config["SANDBOX_URL"]
    app.config.update(SANDBOX_URL="http://127.0.0.1:9",  # nothing listens on the discard port
                      PROJECT_SYSTEM_CONNECT_TIMEOUT_S=1, PROJECT_SYSTEM_READ_RETRIES=0)
    never_listed = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(project))
    assert never_listed.status_code == 502  # no project list was ever read for this company
    assert never_listed.json["error"]["code"] == "project_system_unavailable"

    app.config["SANDBOX_URL"] = reachable
    link = client.post("/v1/links", headers=acme.headers, json={"project_id": project}).json
    app.extensions.pop("project_system_caches", None)  # a new process: nothing cached
    app.config["SANDBOX_URL"] = "http://127.0.0.1:9"
    calls = []
    real_client_for = project_service.client_for
    monkeypatch.setattr(project_service, "client_for",
                        lambda company_id: calls.append(company_id) or real_client_for(company_id))
    made = client.post("/v1/tickets", headers=acme.headers, json=ticket_body(
        project, labor=[{"trade": "Laborer", "hours": 8, "rate": 50, "costCode": "02-200"}]))
    captured = client.post(f"/c/{link['token']}/tickets", json={
        "description": "Patched the slab", "reason": "Owner's damage", "directed_by": "Sam",
        "labor": [{"trade": "Laborer", "hours": 1, "rate": 50, "costCode": "02-200"}]})
    assert made.status_code == 200 and captured.status_code == 200, (made.json, captured.json)
    assert calls == []  # neither waited on the project system
    ticket = made.json
    assert ticket["routing_pending"] is True
    assert [(r["budget_code"], r["exact"], r["needs_review"]) for r in ticket["routing"]] == \
        [(None, False, True)]
    listed = client.get("/v1/tickets", headers=acme.headers).json["data"]
    assert [t["routing_pending"] for t in listed] == [True, True]
    while_away = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert while_away["routing_pending"] is True and while_away["routing"][0]["budget_code"] is None
    assert while_away["warnings"][0].startswith("routing is pending")
    refused = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})
    assert refused.status_code == 502
    unknown = client.post("/v1/tickets", headers=acme.headers, json=ticket_body("999999"))
    assert unknown.status_code == 404 and unknown.json["error"]["code"] == "project_not_found"

    app.config["SANDBOX_URL"] = reachable  # the project system answers again
    read = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert read["routing_pending"] is False and read["warnings"] == []
    assert (read["routing"][0]["budget_code"], read["routing"][0]["exact"]) == ("02-200.L", True)
    listed = client.get("/v1/tickets", headers=acme.headers).json["data"]
    # Once the project's codes are read, every ticket of the project is routed on them.
    assert [t["routing_pending"] for t in listed] == [False, False]
    assert count_rows(app, Ticket) == 2


def test_a_resent_ticket_is_answered_without_waiting_either(client, acme, app, monkeypatch):
    from services.project_system import projects as project_service

    body = ticket_body(acme.project()["id"], client_ref="phone-ref-0001")
    first = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert first.status_code == 200
    app.extensions.pop("project_system_caches", None)
    calls = []
    monkeypatch.setattr(project_service, "client_for", lambda company_id: calls.append(1))
    again = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert again.status_code == 200 and again.json["id"] == first.json["id"]
    assert calls == [] and again.json["routing_pending"] is True
    assert count_rows(app, Ticket) == 1


def test_integers_of_a_body_are_json_integers(client, acme):
    """`false` or "3" where the document says integer is refused, not read as 0 or 3."""
    project = acme.project()["id"]
    for wrong in (False, True, "3"):
        sent = client.post("/v1/tickets", headers=acme.headers,
                           json={**ticket_body(project), "photos_expected": wrong})
        assert sent.status_code == 400, wrong
        assert [d["field"] for d in sent.json["error"]["details"]] == ["photos_expected"]
        made = client.post(f"/v1/projects/{project}/budget-codes", headers=acme.headers,
                           json={"cost_code_item_id": wrong})
        assert made.status_code == 400 and made.json["error"]["details"][0]["field"] == "cost_code_item_id"


def test_number_bounds_hold_for_the_number_as_sent(client, acme):
    """-0.0000001 hours is below the documented minimum of 0 even though it rounds to 0 at six
    places; -0.0 is 0."""
    project = acme.project()["id"]
    for hours, status in ((-0.0000001, 400), (1000.0000004, 400), (-0.0, 200), (999.9999996, 200)):
        sent = client.post("/v1/tickets", headers=acme.headers, json={
            **ticket_body(project), "labor": [{"trade": "Laborer", "hours": hours, "rate": 10}]})
        assert sent.status_code == status, (hours, sent.json)
        if status == 200:
            hours = sent.json["labor"][0]["hours"]
            assert hours in (0.0, 1000.0) and str(hours)[0] != "-"
