"""A ticket's text first, then each photo and the signature on its own, each safe to repeat."""
from __future__ import annotations

import uuid

import pytest

from support.images import jpeg_bytes, png_bytes


def make_link(client, tenant) -> dict:
    return client.post("/v1/links", headers=tenant.headers,
                       json={"project_id": tenant.project()["id"]}).json


def test_text_first_then_each_photo_once(client, acme):
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    base = f"/c/{link['token']}/tickets"
    early = client.put(f"{base}/{ref}/photos/p1", data=jpeg_bytes(), content_type="image/jpeg")
    assert early.status_code == 404  # the text goes first
    text = client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                                   "directed_by": "Sam", "client_ref": ref, "photos_expected": 3})
    assert text.status_code == 200 and text.json["photo_count"] == 0
    ticket_id = text.json["id"]
    shown = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json
    assert shown["photos_expected"] == 3 and shown["photo_count"] == 0
    for key, color in (("p1", (200, 0, 0)), ("p2", (0, 200, 0))):
        sent = client.put(f"{base}/{ref}/photos/{key}?name={key}.jpg&taken_at=2026-11-20T14:05:00-08:00"
                          "&lat=37.775&lng=-122.42", data=jpeg_bytes(color=color),
                          content_type="image/jpeg")
        assert sent.status_code == 200 and sent.json["created"] is True
    again = client.put(f"{base}/{ref}/photos/p1", data=jpeg_bytes(), content_type="image/jpeg")
    assert again.status_code == 200 and again.json["created"] is False
    assert again.json["photo_count"] == 2 and again.json["photos_expected"] == 3
    bad = client.put(f"{base}/{ref}/photos/p3", data=b"not an image", content_type="image/jpeg")
    assert bad.status_code == 400
    signed = client.put(f"{base}/{ref}/signature?name=Sam%20Ortiz", data=png_bytes(),
                        content_type="image/png")
    assert signed.status_code == 200 and signed.json["signed"] is True
    resigned = client.put(f"{base}/{ref}/signature?name=Someone", data=png_bytes(),
                          content_type="image/png")
    assert resigned.json["created"] is False
    ticket = client.get(f"/v1/tickets/{ticket_id}", headers=acme.headers).json
    assert ticket["photo_count"] == 2 and ticket["signature"]["name"] == "Sam Ortiz"
    first = next(p for p in ticket["photos"] if p["name"] == "p1.jpg")
    assert first["taken_at"] == "2026-11-20T14:05:00-08:00"
    assert first["coords"]["lat"] == 37.775


def test_the_api_takes_photos_one_by_one_too(client, acme):
    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
        "directed_by": "Sam", "photos_expected": 2}).json
    url = f"/v1/tickets/{made['id']}/photo-uploads/front"
    first = client.put(url, headers=acme.headers, data=jpeg_bytes(), content_type="image/jpeg")
    assert first.status_code == 200 and first.json["photo_count"] == 1
    second = client.put(url, headers=acme.headers, data=jpeg_bytes(), content_type="image/jpeg")
    assert second.status_code == 200 and second.json["photo_count"] == 1
    assert client.put(f"/v1/tickets/{made['id']}/photos/bad%20key", headers=acme.headers,
                      data=jpeg_bytes(), content_type="image/jpeg").status_code == 404
    assert client.put(url, data=jpeg_bytes(), content_type="image/jpeg").status_code == 401


def test_the_pm_sees_photos_arriving(app, client, acme):
    from tests.test_review_pages import sign_in

    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
        "directed_by": "Sam", "photos_expected": 12}).json
    for key in ("a", "b", "c", "d", "e", "f", "g"):
        client.put(f"/v1/tickets/{made['id']}/photo-uploads/{key}", headers=acme.headers,
                   data=jpeg_bytes(), content_type="image/jpeg")
    browser = sign_in(app, client, acme)
    html = browser.get(f"/tickets/{made['id']}").get_data(as_text=True)
    assert "photos arriving: 7 of 12" in html


@pytest.mark.both_stores
def test_photos_taken_while_writing_join_their_ticket_when_its_text_arrives(client, acme, app):
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    drafts = f"/c/{link['token']}/drafts/{ref}/photos"
    for key, color in (("a", (200, 0, 0)), ("b", (0, 200, 0)), ("c", (0, 0, 200))):
        kept = client.put(f"{drafts}/{key}?name={key}.jpg", data=jpeg_bytes(color=color),
                          content_type="image/jpeg")
        assert kept.status_code == 200 and kept.json == {"kept": True, "created": True}
    again = client.put(f"{drafts}/a", data=jpeg_bytes(), content_type="image/jpeg")
    assert again.json["created"] is False
    # The crew removed photo b before sending: only a and c join, in the phone's order.
    text = client.post(f"/c/{link['token']}/tickets", json={
        "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": ref, "photos_expected": 2, "photo_keys": ["c", "a"]})
    assert text.status_code == 200 and text.json["photo_count"] == 2
    ticket = client.get(f"/v1/tickets/{text.json['id']}", headers=acme.headers).json
    assert [p["name"] for p in ticket["photos"]] == ["c.jpg", "a.jpg"]
    # Sending a staged photo again after the text changes nothing.
    late = client.put(f"/c/{link['token']}/tickets/{ref}/photos/a", data=jpeg_bytes(),
                      content_type="image/jpeg")
    assert late.json["created"] is False and late.json["photo_count"] == 2
    with app.app_context():
        from models import StagedPhoto, db
        assert db.session.query(StagedPhoto).count() == 0


@pytest.mark.parametrize("written", ["before its photo is read", "while its photo is kept"])
def test_a_photo_still_arriving_when_its_ticket_is_written_joins_that_ticket(
        client, acme, app, monkeypatch, written):
    # The phone sends the ticket's text while a photo taken for it is still going up as a
    # draft's: whichever finishes last, the photo ends on the ticket, not kept for nothing.
    from services.capture import capture, evidence

    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    text = {"description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
            "client_ref": ref, "photos_expected": 2, "photo_keys": ["a", "b"]}
    sent = []

    def send_text() -> None:
        sent.append(app.test_client().post(f"/c/{link['token']}/tickets", json=text))

    if written == "before its photo is read":
        read = capture.photo_from_upload
        monkeypatch.setattr(capture, "photo_from_upload",
                            lambda *a: (send_text(), read(*a))[1])
    else:
        keep = evidence.stage_photo
        monkeypatch.setattr(evidence, "stage_photo", lambda *a, **k: (send_text(), keep(*a, **k))[1])
    drafts = f"/c/{link['token']}/drafts/{ref}/photos"
    kept = client.put(f"{drafts}/b?name=b.jpg", data=jpeg_bytes(), content_type="image/jpeg")
    assert kept.status_code == 200 and kept.json["kept"] is True
    assert sent[0].status_code == 200 and sent[0].json["photo_count"] == 0  # written without it
    ticket = client.get(f"/v1/tickets/{sent[0].json['id']}", headers=acme.headers).json
    assert [p["name"] for p in ticket["photos"]] == ["b.jpg"]
    with app.app_context():
        from models import StagedPhoto, db
        assert db.session.query(StagedPhoto).count() == 0
