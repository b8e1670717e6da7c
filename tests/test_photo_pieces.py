"""Photos sent in pieces (Content-Range): a drop costs only the piece on its way, the server says
where to go on from, the photo counts once against the quotas, and unfinished pieces are swept."""
from __future__ import annotations

import datetime as dt
import os
import threading
import uuid

import pytest
import time_machine
from sqlalchemy import select

from models import StagedPhoto, StorageUsage, TicketPhoto, db
from services.capture import evidence
from services.files import photo_uploads, storage
from services.platform.web import token_digest
from support.images import data_url, jpeg_bytes, noise_jpeg

PIECE = photo_uploads.MIN_PIECE_BYTES


def make_link(client, tenant) -> dict:
    return client.post("/v1/links", headers=tenant.headers,
                       json={"project_id": tenant.project()["id"]}).json


def pieces(raw: bytes, size: int = PIECE) -> list[tuple[str, bytes]]:
    """The Content-Range and body of each piece of a photo."""
    return [(f"bytes {at}-{min(at + size, len(raw)) - 1}/{len(raw)}", raw[at:at + size])
            for at in range(0, len(raw), size)]


def put_piece(client, url: str, piece: tuple[str, bytes], **headers):
    return client.put(url, data=piece[1], content_type="image/jpeg",
                      headers={"Content-Range": piece[0], **headers})


def link_bytes(app, token: str) -> int:
    with app.app_context():
        return db.session.scalar(select(StorageUsage.bytes).where(
            StorageUsage.scope == "link", StorageUsage.key == token_digest(token))) or 0


@pytest.fixture
def photo() -> bytes:
    raw = noise_jpeg(420, 320, seed=7)
    assert len(raw) > 3 * PIECE  # at least four pieces
    return raw


def test_a_photo_in_pieces_resumes_where_the_server_holds_and_counts_once(client, acme, app, photo):
    link = make_link(client, acme)
    ref, base = uuid.uuid4().hex, f"/c/{link['token']}/tickets"
    text = client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                                   "directed_by": "Sam", "client_ref": ref, "photos_expected": 1})
    assert text.json["photo_keys"] == [] and text.json["signed"] is False
    url = f"{base}/{ref}/photos/front?name=front.jpg"
    parts = pieces(photo)
    first = put_piece(client, url, parts[0])
    assert first.status_code == 202 and first.json == {"offset": PIECE, "total": len(photo)}
    assert first.headers["Upload-Offset"] == str(PIECE)
    # A phone that lost track (its answer was cut off) is told where to go on from.
    again = put_piece(client, url, parts[0])
    assert again.status_code == 409
    assert again.json["error"]["code"] == "upload_offset_mismatch"
    assert again.json["error"]["details"] == {"offset": PIECE, "total": len(photo)}
    assert again.headers["Upload-Offset"] == str(PIECE)
    assert put_piece(client, url, parts[2]).status_code == 409  # no gap either
    for part in parts[1:-1]:
        assert put_piece(client, url, part).status_code == 202
    last = put_piece(client, url, parts[-1])
    assert last.status_code == 200 and last.json["photo_keys"] == ["front"]
    assert last.json["photo_count"] == 1
    # The last piece again (its answer lost): the photo is held, whatever the piece.
    assert put_piece(client, url, parts[-1]).json["photo_keys"] == ["front"]
    with app.app_context():
        assert storage.file_store().list_pieces("") == []
        (stored,) = db.session.query(TicketPhoto).all()
        assert stored.name == "front.jpg" and stored.client_key == "front"
    # Counted once: the pieces as they came, then only what the stored photo takes beyond them.
    whole_link = make_link(client, acme)
    other_ref = uuid.uuid4().hex
    client.post(f"/c/{whole_link['token']}/tickets", json={
        "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": other_ref, "photos_expected": 1})
    whole = client.put(f"/c/{whole_link['token']}/tickets/{other_ref}/photos/front", data=photo,
                       content_type="image/jpeg")
    assert whole.status_code == 200
    stored_bytes = link_bytes(app, whole_link["token"])
    assert link_bytes(app, link["token"]) == max(len(photo), stored_bytes)


def test_pieces_sent_ahead_and_after_the_text_are_one_photo(client, acme, app, photo):
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    parts = pieces(photo)
    drafts = f"/c/{link['token']}/drafts/{ref}/photos/p1?name=site.jpg"
    assert put_piece(client, drafts, parts[0]).status_code == 202
    # The crew pressed Send: the text goes, and the photo goes on where it was.
    text = client.post(f"/c/{link['token']}/tickets", json={
        "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": ref, "photos_expected": 1, "photo_keys": ["p1"]})
    assert text.json["photo_keys"] == []
    url = f"/c/{link['token']}/tickets/{ref}/photos/p1?name=site.jpg"
    assert put_piece(client, url, parts[0]).json["error"]["details"]["offset"] == PIECE
    for part in parts[1:]:
        answer = put_piece(client, url, part)
    assert answer.status_code == 200 and answer.json["photo_keys"] == ["p1"]


def test_later_pieces_do_not_count_against_the_links_limit(client, acme, app, photo):
    app.config["CAPTURE_RATE_LIMIT"] = "2 per minute"
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    with time_machine.travel("2026-07-01T10:00:00Z", tick=False):
        client.post(f"/c/{link['token']}/tickets", json={
            "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
            "client_ref": ref, "photos_expected": 2})
        url = f"/c/{link['token']}/tickets/{ref}/photos/p1"
        answers = [put_piece(client, url, part).status_code for part in pieces(photo)]
        assert answers == [202] * (len(answers) - 1) + [200]
        # A new photo's first piece counts: the limit (text and one photo) is reached.
        refused = put_piece(client, f"/c/{link['token']}/tickets/{ref}/photos/p2", pieces(photo)[0])
        assert refused.status_code == 429


@pytest.mark.parametrize("header, body, problem", [
    ("bytes=0-9/10", b"x" * 10, "write it as"),
    ("bytes 5-2/10", b"x" * 4, "at most LAST"),
    ("bytes 0-9/9", b"x" * 10, "at most LAST"),
    ("bytes 0-9/99999999", b"x" * 10, "at most 2097152 bytes"),
    ("bytes 0-9/100000", b"x" * 5, "the body has 5 bytes"),
    ("bytes 0-9/100000", b"x" * 10, "at least 16384 bytes"),
])
def test_a_wrong_content_range_is_a_plain_400(client, acme, header, body, problem):
    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
        "directed_by": "Sam"}).json
    refused = client.put(f"/v1/tickets/{made['id']}/photo-uploads/front", data=body,
                         headers={**acme.headers, "Content-Range": header,
                                  "Content-Type": "application/octet-stream"})
    assert refused.status_code == 400 and refused.json["error"]["code"] == "validation_failed"
    assert refused.json["error"]["details"][0]["field"] == "Content-Range"
    assert problem in refused.json["error"]["details"][0]["message"]


def test_the_api_takes_a_photo_in_pieces(client, acme, app, photo):
    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
        "directed_by": "Sam", "photos_expected": 1}).json
    url = f"/v1/tickets/{made['id']}/photo-uploads/front?name=front.jpg"
    parts = pieces(photo, 3 * PIECE)
    first = put_piece(client, url, parts[0], **acme.headers)
    assert first.status_code == 202 and first.json == {"offset": 3 * PIECE, "total": len(photo)}
    wrong = put_piece(client, url, parts[0], **acme.headers)
    assert wrong.status_code == 409 and wrong.json["error"]["details"]["offset"] == 3 * PIECE
    for part in parts[1:]:
        done = put_piece(client, url, part, **acme.headers)
    assert done.status_code == 200 and done.json["photo_count"] == 1
    assert done.json["photos"][0]["name"] == "front.jpg"
    document = client.get("/v1/openapi.json").json
    operation = document["paths"]["/tickets/{ticket_id}/photo-uploads/{key}"]["put"]
    assert any(p["in"] == "header" and p["name"] == "Content-Range" for p in operation["parameters"])
    assert "Upload-Offset" in operation["responses"]["202"]["headers"]
    assert "upload_offset_mismatch" in operation["responses"]["409"]["x-error-codes"]
    assert "Upload-Offset" in operation["responses"]["409"]["headers"]


def test_a_whole_photo_still_needs_no_header(client, acme):
    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
        "directed_by": "Sam"}).json
    sent = client.put(f"/v1/tickets/{made['id']}/photo-uploads/front", headers=acme.headers,
                      data=jpeg_bytes(), content_type="image/jpeg")
    assert sent.status_code == 200 and sent.json["photo_count"] == 1


def stored_pieces(app) -> list[str]:
    """The names of every piece waiting in the store."""
    with app.app_context():
        return [entry.name for entry in storage.file_store().list_pieces("")]


def test_the_sweep_drops_pieces_left_unfinished(client, acme, app, photo):
    link = make_link(client, acme)
    parts = pieces(photo)
    with time_machine.travel("2026-07-01T04:00:00Z", tick=False):
        put_piece(client, f"/c/{link['token']}/drafts/{uuid.uuid4().hex}/photos/old", parts[0])
    with time_machine.travel("2026-07-01T09:00:00Z", tick=False):
        put_piece(client, f"/c/{link['token']}/drafts/{uuid.uuid4().hex}/photos/new", parts[0])
    runner = app.test_cli_runner()
    with time_machine.travel("2026-07-01T12:00:00Z", tick=False):
        listed = runner.invoke(args=["photos", "orphans"])
        assert "found 1 photo(s) sent in part and left unfinished over 6 hours" in listed.output
        assert len(stored_pieces(app)) == 2
        removed = runner.invoke(args=["photos", "orphans", "--remove"])
        assert "dropped 1 photo(s) sent in part" in removed.output
    (left,) = stored_pieces(app)
    assert left.endswith(f"-{int(dt.datetime(2026, 7, 1, 9, tzinfo=dt.timezone.utc).timestamp())}")


def test_a_correction_takes_the_photos_sent_ahead_of_it(client, acme, app):
    link = make_link(client, acme)
    base = f"/c/{link['token']}/tickets"
    first_ref, second_ref = uuid.uuid4().hex, uuid.uuid4().hex
    sent = client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                                   "directed_by": "Sam", "client_ref": first_ref}).json
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers,
                json={"reason": "Add the photos"})
    # Photos taken while correcting go ahead under the correction's own reference ...
    for key in ("n1", "n2"):
        staged = client.put(f"/c/{link['token']}/drafts/{second_ref}/photos/{key}?name={key}.jpg",
                            data=jpeg_bytes(), content_type="image/jpeg")
        assert staged.status_code == 200
    corrected = client.post(base, json={
        "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": second_ref, "revises": first_ref, "photos_expected": 2,
        "photo_keys": ["n1", "n2"]})
    # ... and the corrected ticket holds them, as its answer says.
    assert corrected.status_code == 200 and corrected.json["id"] == sent["id"]
    assert corrected.json["photo_keys"] == ["n1", "n2"] and corrected.json["photo_count"] == 2
    ticket = client.get(f"/v1/tickets/{sent['id']}", headers=acme.headers).json
    assert ticket["status"] == "submitted" and ticket["photo_count"] == 2
    assert [p["name"] for p in ticket["photos"]] == ["n1.jpg", "n2.jpg"]


def test_dropping_stale_pieces_counts_uploads_not_pieces(app, acme, client, photo):
    link = make_link(client, acme)
    url = f"/c/{link['token']}/drafts/{uuid.uuid4().hex}/photos/p1"
    with time_machine.travel("2026-07-01T10:00:00Z", tick=False):
        for part in pieces(photo)[:2]:
            assert put_piece(client, url, part).status_code == 202
    assert len(stored_pieces(app)) == 2
    with time_machine.travel("2026-07-01T17:00:00Z", tick=False), app.app_context():
        assert photo_uploads.drop_stale(False) == 1
        assert photo_uploads.drop_stale(True) == 1
    assert stored_pieces(app) == []


def _database_bytes(app) -> int:
    """The SQLite file and its write-ahead log, in bytes."""
    path = app.config["SQLALCHEMY_DATABASE_URI"].removeprefix("sqlite:///")
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def test_500_unfinished_uploads_through_one_link_stay_out_of_the_database_and_expire(
        app, acme, client, photo):
    """A poster link flooded with photos begun and never finished: the pieces are files of
    the store, at most PHOTO_UPLOADS_OPEN_PER_LINK of them open (the rest told to come back
    later), the database barely grows, and the running service sweeps them after the expiry."""
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite:///"):
        pytest.skip("measures the SQLite file")
    link = make_link(client, acme)
    first = pieces(photo)[0]
    before = _database_bytes(app)
    cap = app.config["PHOTO_UPLOADS_OPEN_PER_LINK"]
    statuses = []
    start = dt.datetime(2026, 7, 1, 10, tzinfo=dt.timezone.utc)
    with time_machine.travel(start, tick=False) as clock:
        for n in range(500):  # one every 3 s, within the link's submission limit: 25 minutes
            clock.move_to(start + dt.timedelta(seconds=3 * n))
            answer = put_piece(client, f"/c/{link['token']}/drafts/{uuid.uuid4().hex}/photos/p{n}", first)
            statuses.append(answer.status_code)
            if answer.status_code == 429:
                assert answer.json["error"]["code"] == "too_many_uploads"
                assert int(answer.headers["Retry-After"]) > 0
    assert statuses[:cap] == [202] * cap and set(statuses[cap:]) == {429}
    assert len(stored_pieces(app)) == cap
    assert _database_bytes(app) - before < 10 * 1024 * 1024
    # Hours later a piece of any other upload makes the service sweep: the unfinished are gone.
    other = make_link(client, acme)
    with time_machine.travel("2026-07-01T16:30:00Z", tick=False):
        assert put_piece(client, f"/c/{other['token']}/drafts/{uuid.uuid4().hex}/photos/x",
                         first).status_code == 202
    assert len(stored_pieces(app)) == 1
    # The flooded link takes new photos again.
    with time_machine.travel("2026-07-01T16:31:00Z", tick=False):
        assert put_piece(client, f"/c/{link['token']}/drafts/{uuid.uuid4().hex}/photos/y",
                         first).status_code == 202


def test_a_correction_keeps_the_photos_it_still_lists_and_drops_the_others(client, acme, app):
    link = make_link(client, acme)
    base = f"/c/{link['token']}/tickets"
    first_ref, second_ref = uuid.uuid4().hex, uuid.uuid4().hex
    sent = client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                                   "directed_by": "Sam", "client_ref": first_ref,
                                   "photos_expected": 3, "photo_keys": ["a1", "b2", "c3"]}).json
    for key in ("a1", "b2", "c3"):
        assert client.put(f"/c/{link['token']}/tickets/{first_ref}/photos/{key}?name={key}.jpg",
                          data=jpeg_bytes(), content_type="image/jpeg").status_code == 200
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers,
                json={"reason": "Drop the blurry one, add the sleeve"})
    # The phone learns which photos the office holds, by their keys ...
    mine = client.post(f"/c/{link['token']}/mine", json={"client_refs": [first_ref]}).json
    assert mine["data"][0]["photo_keys"] == ["a1", "b2", "c3"]
    staged = client.put(f"/c/{link['token']}/drafts/{second_ref}/photos/d4?name=d4.jpg",
                        data=jpeg_bytes(), content_type="image/jpeg")
    assert staged.status_code == 200
    # ... and its correction lists those it keeps: they stay without being sent again.
    corrected = client.post(base, json={
        "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": second_ref, "revises": first_ref, "photos_expected": 3,
        "photo_keys": ["c3", "a1", "d4"]})
    assert corrected.status_code == 200 and corrected.json["id"] == sent["id"]
    assert corrected.json["photo_keys"] == ["c3", "a1", "d4"]
    ticket = client.get(f"/v1/tickets/{sent['id']}", headers=acme.headers).json
    assert ticket["photo_count"] == 3
    assert [p["name"] for p in ticket["photos"]] == ["c3.jpg", "a1.jpg", "d4.jpg"]


def test_a_correction_that_would_hold_more_than_12_photos_is_refused_and_changes_nothing(
        client, acme):
    link = make_link(client, acme)
    base = f"/c/{link['token']}/tickets"
    first_ref, second_ref = uuid.uuid4().hex, uuid.uuid4().hex
    keys = [f"k{n}" for n in range(12)]
    sent = client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                                   "directed_by": "Sam", "client_ref": first_ref,
                                   "photos_expected": 12, "photo_keys": keys}).json
    for key in keys:
        assert client.put(f"/c/{link['token']}/tickets/{first_ref}/photos/{key}?name={key}.jpg",
                          data=jpeg_bytes(), content_type="image/jpeg").status_code == 200
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers,
                json={"reason": "Add the sleeve"})
    refused = client.post(base, json={
        "description": "Patched slab, sleeve added", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": second_ref, "revises": first_ref, "photo_keys": keys,
        "photos": [{"name": "sleeve.jpg", "data_url": data_url(jpeg_bytes())}]})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "photos_full", \
        refused.json
    ticket = client.get(f"/v1/tickets/{sent['id']}", headers=acme.headers).json
    assert ticket["status"] == "rejected" and ticket["photo_count"] == 12
    assert ticket["description"] == "Patched slab"


def test_a_last_piece_whose_earlier_pieces_went_meanwhile_is_told_where_to_go_on(
        client, acme, app, photo, monkeypatch):
    link = make_link(client, acme)
    ref, base = uuid.uuid4().hex, f"/c/{link['token']}/tickets"
    client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                            "directed_by": "Sam", "client_ref": ref, "photos_expected": 1})
    url = f"{base}/{ref}/photos/front?name=front.jpg"
    parts = pieces(photo)
    for part in parts[:-1]:
        assert put_piece(client, url, part).status_code == 202
    # Another sender's last piece joins the photo and drops its pieces while this one reads them.
    def gone(store, name):
        raise KeyError(name)

    with app.app_context():
        kind = type(storage.file_store())
    monkeypatch.setattr(kind, "read_piece", gone)
    late = put_piece(client, url, parts[-1])
    assert late.status_code == 409 and late.json["error"]["code"] == "upload_offset_mismatch"


def test_the_last_piece_holding_the_photo_is_told_so_when_another_request_took_it(
        client, acme, app, photo, monkeypatch):
    link = make_link(client, acme)
    ref, base = uuid.uuid4().hex, f"/c/{link['token']}/tickets"
    client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                            "directed_by": "Sam", "client_ref": ref, "photos_expected": 1})
    url = f"{base}/{ref}/photos/front?name=front.jpg"
    parts = pieces(photo)
    for part in parts[:-1]:
        assert put_piece(client, url, part).status_code == 202
    # The same photo, sent whole by another request of the phone, is kept while this last
    # piece is joined; its pieces are gone by the time they are read.
    def kept_elsewhere_then_gone(store, name):
        whole = app.test_client().put(url, data=photo, content_type="image/jpeg")
        assert whole.status_code == 200
        raise KeyError(name)

    with app.app_context():
        kind = type(storage.file_store())
    monkeypatch.setattr(kind, "read_piece", kept_elsewhere_then_gone)
    late = put_piece(client, url, parts[-1])
    assert late.status_code == 200, late.json
    assert late.json["photo_keys"] == ["front"] and late.json["photo_count"] == 1


def overlapping(app, url: str, piece: tuple[str, bytes]) -> tuple[threading.Thread, list]:
    """A request sending `piece` to `url` from a thread of its own; its answer lands in the list."""
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(put_piece(app.test_client(), url, piece)))
    thread.start()
    return thread, answers


def test_a_piece_of_a_photo_the_server_holds_whole_is_answered_with_the_photo(
        client, acme, app, photo, hold):
    link = make_link(client, acme)
    ref, base = uuid.uuid4().hex, f"/c/{link['token']}/tickets"
    client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                            "directed_by": "Sam", "client_ref": ref, "photos_expected": 1})
    url = f"{base}/{ref}/photos/front?name=front.jpg"
    parts = pieces(photo)
    for part in parts[:-1]:
        assert put_piece(client, url, part).status_code == 202
    # The last piece came and its photo is being made (slowly, on a loaded server); its answer
    # is lost, so the phone sends the last piece again.
    held = hold(evidence, "put_photo")
    first, first_answers = overlapping(app, url, parts[-1])
    assert held.entered.wait(30)
    again = put_piece(client, url, parts[-1])
    assert again.status_code == 200, again.json
    assert again.json["photo_keys"] == ["front"]
    held.wait_until_done()
    first.join(30)
    assert first_answers[0].status_code == 200 and first_answers[0].json["photo_keys"] == ["front"]
    with app.app_context():
        assert storage.file_store().list_pieces("") == []
        assert [p.client_key for p in db.session.query(TicketPhoto).all()] == ["front"]


def test_a_different_photo_under_a_held_key_is_told_where_the_bytes_end(
        client, acme, app, photo, hold):
    link = make_link(client, acme)
    ref, base = uuid.uuid4().hex, f"/c/{link['token']}/tickets"
    client.post(base, json={"description": "Patched slab", "reason": "Not ours",
                            "directed_by": "Sam", "client_ref": ref, "photos_expected": 1})
    url = f"{base}/{ref}/photos/front?name=front.jpg"
    parts = pieces(photo)
    for part in parts[:-1]:
        assert put_piece(client, url, part).status_code == 202
    held = hold(evidence, "put_photo")
    first, _ = overlapping(app, url, parts[-1])
    assert held.entered.wait(30)
    other = put_piece(client, url, (parts[0][0], bytes(reversed(parts[0][1]))))
    assert other.status_code == 409 and other.json["error"]["code"] == "upload_offset_mismatch"
    assert other.json["error"]["details"] == {"offset": len(photo), "total": len(photo)}
    held.wait_until_done()
    first.join(30)


def test_the_tickets_upload_takes_over_the_drafts_upload_of_the_same_photo(
        client, acme, app, photo, hold):
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    parts = pieces(photo)
    drafts = f"/c/{link['token']}/drafts/{ref}/photos/p1?name=site.jpg"
    for part in parts[:-1]:
        assert put_piece(client, drafts, part).status_code == 202
    # The draft's last piece came and its photo is being kept while the crew's page reloads
    # and sends the ticket: its text, then the same photo on the ticket's path.
    held = hold(evidence, "stage_photo")
    draft, draft_answers = overlapping(app, drafts, parts[-1])
    assert held.entered.wait(30)
    text = client.post(f"/c/{link['token']}/tickets", json={
        "description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
        "client_ref": ref, "photos_expected": 1, "photo_keys": ["p1"]})
    assert text.json["photo_keys"] == []
    url = f"/c/{link['token']}/tickets/{ref}/photos/p1?name=site.jpg"
    answer = put_piece(client, url, parts[-1])
    assert answer.status_code == 200, answer.json
    assert answer.json["photo_keys"] == ["p1"]
    held.wait_until_done()
    draft.join(30)
    assert draft_answers[0].status_code == 200 and draft_answers[0].json["kept"] is True
    with app.app_context():
        assert db.session.query(StagedPhoto).count() == 0
        assert [p.client_key for p in db.session.query(TicketPhoto).all()] == ["p1"]
        assert storage.file_store().list_pieces("") == []


def test_the_api_answers_a_piece_of_a_photo_it_holds_whole_or_made_meanwhile_with_it(
        client, acme, app, photo, hold, monkeypatch):
    made = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "Moved trench", "reason": "Gas line",
        "directed_by": "Sam", "photos_expected": 2}).json
    parts = pieces(photo)

    def url(key: str) -> str:
        return f"/v1/tickets/{made['id']}/photo-uploads/{key}?name={key}.jpg"

    for part in parts[:-1]:
        assert put_piece(client, url("front"), part, **acme.headers).status_code == 202
    held = hold(evidence, "put_photo")
    answers: list = []
    first = threading.Thread(target=lambda: answers.append(
        put_piece(app.test_client(), url("front"), parts[-1], **acme.headers)))
    first.start()
    assert held.entered.wait(30)
    again = put_piece(client, url("front"), parts[-1], **acme.headers)
    assert again.status_code == 200 and again.json["photo_count"] == 1
    held.wait_until_done()
    first.join(30)
    assert answers[0].status_code == 200 and answers[0].json["photo_count"] == 1
    # The last piece of another photo, whose pieces a whole upload of it made and dropped
    # while this one read them.
    for part in parts[:-1]:
        assert put_piece(client, url("back"), part, **acme.headers).status_code == 202

    def kept_elsewhere_then_gone(store, name):
        whole = app.test_client().put(url("back"), data=photo, content_type="image/jpeg",
                                      headers=acme.headers)
        assert whole.status_code == 200
        raise KeyError(name)

    with app.app_context():
        kind = type(storage.file_store())
    monkeypatch.setattr(kind, "read_piece", kept_elsewhere_then_gone)
    late = put_piece(client, url("back"), parts[-1], **acme.headers)
    assert late.status_code == 200, late.json
    assert late.json["photo_count"] == 2
    document = client.get("/v1/openapi.json").json
    operation = document["paths"]["/tickets/{ticket_id}/photo-uploads/{key}"]["put"]
    (header,) = [p for p in operation["parameters"] if p["name"] == "Content-Range"]
    assert "holds whole already" in header["description"]
