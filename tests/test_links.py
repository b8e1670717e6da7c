"""Capture links: the API, the public capture page and submissions through it."""
from __future__ import annotations

import re
import uuid
from xml.etree import ElementTree

import pytest
import time_machine

from models import Ticket, db
from support.images import data_url, jpeg_bytes


def make_link(client, tenant, label="North trailer", change_events=True):
    response = client.post("/v1/links", headers=tenant.headers,
                           json={"project_id": tenant.project(change_events)["id"], "label": label})
    assert response.status_code == 200, response.json
    return response.json


def test_create_list_revoke_links(client, acme, rival):
    link = make_link(client, acme)
    token = link["token"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", token)  # 192 random bits, URL-safe
    assert link["url"].endswith(f"/c/{token}")
    assert link["urls"] == {"plain": link["url"], "qr": link["url"] + "/q", "sms": link["url"] + "/s"}
    assert link["label"] == "North trailer" and link["revoked_at"] is None and link["ticket_count"] == 0
    assert link["sms_href"].startswith("sms:?&body=")
    listed = client.get("/v1/links", headers=acme.headers).json["data"]
    assert [line["token"] for line in listed] == [token]
    assert client.get("/v1/links", headers=rival.headers).json["data"] == []

    foreign = client.post(f"/v1/links/{token}/revoke", headers=rival.headers)
    unknown = client.post("/v1/links/nope/revoke", headers=rival.headers)
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json == unknown.json
    revoked = client.post(f"/v1/links/{token}/revoke", headers=acme.headers).json
    assert revoked["revoked_at"] is not None
    again = client.post(f"/v1/links/{token}/revoke", headers=acme.headers).json
    assert again["revoked_at"] == revoked["revoked_at"]


def test_link_needs_a_project_of_the_company(client, acme, rival):
    missing = client.post("/v1/links", headers=acme.headers, json={"label": "x"})
    assert missing.status_code == 400
    foreign = client.post("/v1/links", headers=acme.headers, json={"project_id": rival.project()["id"]})
    assert foreign.status_code == 404 and foreign.json["error"]["code"] == "project_not_found"


def test_tokens_are_unique(client, acme):
    tokens = {make_link(client, acme, label=str(i))["token"] for i in range(5)}
    assert len(tokens) == 5


def test_capture_page_renders_form_with_headers(client, acme):
    link = make_link(client, acme)
    # The pick list comes from cost codes read before: the page itself never waits on them.
    client.get(f"/v1/projects/{link['project_id']}/cost-codes", headers=acme.headers)
    page = client.get(f"/c/{link['token']}/q")
    assert page.status_code == 200
    assert page.headers["Referrer-Policy"] == "no-referrer"
    html = page.get_data(as_text=True)
    for name in ("description", "reason", "directed_by", "captured_by", "labor[0].trade",
                 "equipment[0].hours", "materials[0].unitCost", "photo_files", "signature.name"):
        assert f'name="{name}"' in html, name
    assert 'value="qr"' in html
    assert "signature_pad-5.1.4" in html and "idb-keyval-6.3.0" in html
    # "+ Add line" copies a row on the phone: no htmx and no server round trip on one bar.
    assert "htmx" not in html and "hx-get" not in html
    assert client.get(f"/c/{link['token']}/rows/labor").status_code == 404
    assert '<option value="02-200">' in html  # the cost-code pick list
    assert "<script>" not in html             # no inline script


def capture_body(**extra):
    body = {"description": "Patched slab the plumber cut", "reason": "Not our scope",
            "directed_by": "Pat (GC)"}
    body.update(extra)
    return body


@pytest.mark.parametrize("suffix, via", [("", "link"), ("/q", "qr"), ("/s", "sms")])
def test_json_submission_records_via_and_link(client, acme, app, suffix, via):
    link = make_link(client, acme)
    response = client.post(f"/c/{link['token']}/tickets?via={via}", json=capture_body(
        labor=[{"trade": "Plumber", "hours": "2", "rate": "80"}],
        photos=[{"name": "slab.jpg", "data_url": data_url(jpeg_bytes())}]))
    assert response.status_code == 200, response.json
    assert response.headers["Referrer-Policy"] == "no-referrer"
    result = response.json
    assert re.fullmatch(r"T-[0-9A-F]{8}", result["reference"]) and result["created"] is True
    ticket = client.get(f"/v1/tickets/{result['id']}", headers=acme.headers).json
    assert ticket["captured_via"] == via and ticket["link_token"] == link["token"]
    assert ticket["project_id"] == link["project_id"] and ticket["photo_count"] == 1
    assert ticket["total"] == 160.0
    listed = client.get("/v1/links", headers=acme.headers).json["data"][0]
    assert listed["ticket_count"] == 1


def test_resend_with_the_same_client_ref_makes_one_ticket(client, acme, app):
    link = make_link(client, acme)
    ref = str(uuid.uuid4())
    first = client.post(f"/c/{link['token']}/tickets", json=capture_body(client_ref=ref)).json
    second = client.post(f"/c/{link['token']}/tickets", json=capture_body(client_ref=ref)).json
    assert first["id"] == second["id"] and second["created"] is False
    with app.app_context():
        assert db.session.query(Ticket).count() == 1


def test_api_client_ref_is_idempotent_too(client, acme, app):
    body = {"project_id": acme.project()["id"], **capture_body(client_ref="erp-sync-0001")}
    first = client.post("/v1/tickets", headers=acme.headers, json=body).json
    second = client.post("/v1/tickets", headers=acme.headers, json=body).json
    assert first["id"] == second["id"]
    bad = client.post("/v1/tickets", headers=acme.headers, json={**body, "client_ref": "x y"})
    assert bad.status_code == 400 and bad.json["error"]["details"][0]["field"] == "client_ref"


def test_submission_errors_come_from_the_shared_validator(client, acme, app):
    link = make_link(client, acme)
    response = client.post(f"/c/{link['token']}/tickets", json={
        "description": "", "labor": [{"trade": "Carpenter", "hours": "many"}]})
    assert response.status_code == 400
    fields = {d["field"] for d in response.json["error"]["details"]}
    assert {"description", "reason", "directed_by", "labor[0].hours"} <= fields
    with app.app_context():
        assert db.session.query(Ticket).count() == 0


def test_plain_form_without_javascript(client, acme, app):
    link = make_link(client, acme)
    form = {"via": "sms", "description": "Moved trench", "reason": "Gas line", "directed_by": "Sam",
            "captured_by": "", "labor[0].trade": "Laborer", "labor[0].hours": "3",
            "labor[0].workers": "2", "labor[0].rate": "50", "labor[0].costCode": "02-200",
            "equipment[0].description": "", "equipment[0].hours": "",
            "materials[0].description": "", "materials[0].quantity": ""}
    done = client.post(f"/c/{link['token']}/tickets", data=form)
    assert done.status_code == 200
    assert re.search(r"Reference <strong>T-[0-9A-F]{8}</strong>", done.get_data(as_text=True))
    listed = client.get("/v1/tickets", headers=acme.headers).json["data"][0]
    ticket = client.get(f"/v1/tickets/{listed['id']}", headers=acme.headers).json
    assert ticket["captured_via"] == "sms" and ticket["total"] == 300.0
    assert ticket["equipment"] == [] and ticket["materials"] == []

    bad = client.post(f"/c/{link['token']}/tickets", data={**form, "reason": "", "labor[0].hours": "-2"})
    assert bad.status_code == 400
    html = bad.get_data(as_text=True)
    assert 'data-error-for="labor[0].hours">Must be 0 or more.' in html
    assert 'data-error-for="reason">Please fill this in.' in html
    assert 'value="Moved trench"' not in html or "Moved trench" in html  # text kept for correction
    assert "Moved trench" in html


@pytest.mark.parametrize("state", ["revoked", "unknown"])
def test_revoked_or_unknown_link_stores_nothing(client, acme, app, state):
    link = make_link(client, acme)
    token = link["token"]
    if state == "revoked":
        client.post(f"/v1/links/{token}/revoke", headers=acme.headers)
    else:
        token = "x" * 32
    expected = 410 if state == "revoked" else 404
    page = client.get(f"/c/{token}")
    assert page.status_code == expected
    assert "This link no longer works" in page.get_data(as_text=True)
    assert "Ask your project manager for a new one." in page.get_data(as_text=True)
    posted = client.post(f"/c/{token}/tickets", json=capture_body())
    assert posted.status_code == expected
    form = client.post(f"/c/{token}/tickets", data=capture_body())
    assert form.status_code == expected
    with app.app_context():
        assert db.session.query(Ticket).count() == 0


def test_submissions_are_rate_limited_per_token(client, acme, app):
    app.config["CAPTURE_RATE_LIMIT"] = "3 per minute"
    first, second = make_link(client, acme)["token"], make_link(client, acme, "b")["token"]
    with time_machine.travel("2026-07-01T10:00:00Z", tick=False) as clock:
        for _ in range(3):
            assert client.post(f"/c/{first}/tickets", json=capture_body()).status_code == 200
        assert client.post(f"/c/{first}/tickets", json=capture_body()).status_code == 429
        assert client.post(f"/c/{second}/tickets", json=capture_body()).status_code == 200
        clock.shift(61)
        assert client.post(f"/c/{first}/tickets", json=capture_body()).status_code == 200


def test_status_look_ups_are_rate_limited_per_token(client, acme, app):
    app.config["CAPTURE_STATUS_RATE_LIMIT"] = "3 per minute"
    first, second = make_link(client, acme)["token"], make_link(client, acme, "b")["token"]

    def mine(token):
        return client.post(f"/c/{token}/mine", json={"client_refs": ["phone-ref-0001"] * 100})

    with time_machine.travel("2026-07-01T10:00:00Z", tick=False) as clock:
        assert [mine(first).status_code for _ in range(3)] == [200, 200, 200]
        limited = mine(first)
        assert limited.status_code == 429 and limited.json["error"]["code"] == "rate_limited"
        assert int(limited.headers["Retry-After"]) >= 1
        assert mine(second).status_code == 200
        # Made-up tokens share one bucket per address; sending tickets keeps its own limit.
        assert [mine(f"{'m' * 30}{i:02d}").status_code for i in range(4)] == [404] * 3 + [429]
        assert client.post(f"/c/{first}/tickets", json=capture_body()).status_code == 200
        clock.shift(61)
        assert mine(first).status_code == 200


def test_qr_and_poster(client, acme):
    link = make_link(client, acme)
    svg = client.get(f"/c/{link['token']}/qr.svg")
    assert svg.status_code == 200 and svg.mimetype == "image/svg+xml"
    assert svg.get_data(as_text=True).startswith("<svg")
    # A standalone SVG file: the root element is in the SVG namespace and has a size.
    root = ElementTree.fromstring(svg.get_data())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert int(root.get("width")) > 0 and int(root.get("height")) > 0
    # The API's qr_svg_url answers the same image.
    path = link["qr_svg_url"].split("://", 1)[1].split("/", 1)[1]
    assert client.get("/" + path).get_data() == svg.get_data()
    poster = client.get(f"/c/{link['token']}/poster").get_data(as_text=True)
    assert acme.project()["name"] in poster and "<svg" in poster
    assert poster.count("<li>") == 3
    assert link["urls"]["qr"] in poster


def test_service_worker_is_served_for_the_capture_scope(client):
    response = client.get("/c/sw.js")
    assert response.status_code == 200
    assert response.headers["Service-Worker-Allowed"] == "/c/"
    assert response.headers["Cache-Control"] == "no-cache"
    assert b"send-tickets" in response.data and b"capture-pages-v1" in response.data
    # The browser checks for a new worker on every visit: an unchanged one costs a 304.
    again = client.get("/c/sw.js", headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304


@pytest.mark.parametrize("accept, encoding", [("gzip, deflate, br", "br"), ("gzip", "gzip")])
def test_capture_page_and_its_scripts_come_compressed(client, acme, accept, encoding):
    """A phone that accepts compression gets the page and its files compressed; 304 still works."""
    import gzip

    import brotli

    decode = brotli.decompress if encoding == "br" else gzip.decompress
    link = make_link(client, acme)
    plain_page = client.get(f"/c/{link['token']}")
    page = client.get(f"/c/{link['token']}", headers={"Accept-Encoding": accept})
    assert plain_page.headers.get("Content-Encoding") is None
    assert page.headers["Content-Encoding"] == encoding and "Accept-Encoding" in page.headers["Vary"]
    assert b"ticket-form" in decode(page.data) and len(page.data) < len(plain_page.data) / 2
    with client.get("/static/capture.js") as plain:  # send_file's handle closes with the answer
        plain_script = plain.data
    script = client.get("/static/capture.js", headers={"Accept-Encoding": accept})
    assert script.headers["Content-Encoding"] == encoding and "Accept-Ranges" not in script.headers
    # Minified once before compression: the same script without its comments and spacing.
    import rjsmin
    assert decode(script.data) == rjsmin.jsmin(plain_script.decode(), keep_bang_comments=True).encode()
    assert b"/* Capture page" in plain_script and b"/* Capture page" not in decode(script.data)
    assert len(decode(script.data)) < 0.8 * len(plain_script)
    worker = client.get("/c/sw.js", headers={"Accept-Encoding": accept})
    assert worker.headers["Content-Encoding"] == encoding and b"/*" not in decode(worker.data)
    assert script.headers["ETag"] != plain.headers["ETag"]
    again = client.get("/static/capture.js", headers={"Accept-Encoding": accept,
                                                       "If-None-Match": script.headers["ETag"]})
    assert again.status_code == 304 and again.data == b""
    assert client.get("/v1/openapi.json", headers={"Accept-Encoding": accept}).headers.get(
        "Content-Encoding") is None


@pytest.mark.parametrize("clash", [
    {"description.x": "bar"},
    {"labor[0]": "x", "labor[0].hours": "2"},
    {"labor.x.trade": "b"},
    {"labor[0].trade.x": "b", "labor[0].trade": "Laborer"},
])
def test_a_plain_form_with_clashing_names_is_refused_not_a_crash(client, acme, app, clash):
    from models import Ticket, db

    link = make_link(client, acme)
    form = {"description": "Moved trench", "reason": "Gas line", "directed_by": "Sam",
            "labor[0].trade": "Laborer", "labor[0].hours": "3", "labor[0].rate": "50", **clash}
    answer = client.post(f"/c/{link['token']}/tickets", data=form)
    assert answer.status_code in (200, 400), answer.get_data(as_text=True)[:300]
    with app.app_context():
        assert db.session.query(Ticket).count() == (1 if answer.status_code == 200 else 0)


def assert_error_shape(response, status: int, code: str) -> None:
    """The spec's JSON error shape, as the capture page's script reads it."""
    assert response.status_code == status and response.mimetype == "application/json", \
        response.get_data(as_text=True)[:200]
    assert response.json["error"]["code"] == code and response.json["error"]["message"]


def test_the_capture_script_gets_json_errors_and_the_plain_form_html(client, acme, app):
    token = make_link(client, acme)["token"]
    ref = uuid.uuid4().hex
    assert client.post(f"/c/{token}/tickets", json=capture_body(client_ref=ref)).status_code == 200
    too_big = {"environ_overrides": {"CONTENT_LENGTH": str(app.config["MAX_CONTENT_LENGTH"] + 1)}}
    for path in ("mine", "tickets"):
        assert_error_shape(client.post(f"/c/{token}/{path}", data=b"{}",
                                       content_type="application/json", **too_big),
                           413, "payload_too_large")
    assert_error_shape(client.put(f"/c/{token}/tickets/{ref}/photos/..%2fx", data=jpeg_bytes(),
                                  content_type="image/jpeg"), 404, "not_found")
    assert_error_shape(client.put(f"/c/{'u' * 32}/tickets/{ref}/photos/a", data=jpeg_bytes(),
                                  content_type="image/jpeg"), 404, "link_not_found")
    form = client.post(f"/c/{token}/tickets", data=capture_body(), **too_big)
    assert form.status_code == 413 and form.mimetype == "text/html"
    app.config["CAPTURE_RATE_LIMIT"] = "1 per minute"
    with time_machine.travel("2026-07-01T10:00:00Z", tick=False):
        client.put(f"/c/{token}/tickets/{ref}/photos/a", data=jpeg_bytes(), content_type="image/jpeg")
        for part, content_type in (("photos/b", "image/jpeg"), ("signature", "image/png")):
            assert_error_shape(client.put(f"/c/{token}/tickets/{ref}/{part}", data=jpeg_bytes(),
                                          content_type=content_type), 429, "rate_limited")
        form = client.post(f"/c/{token}/tickets", data=capture_body())
        assert form.status_code == 429 and form.mimetype == "text/html"
