"""A NUL character anywhere a caller can put text is refused before anything reads or stores it
(PostgreSQL cannot hold one in text, so it would otherwise fail mid-request)."""
from __future__ import annotations

from models import CaptureLink, Ticket, db


def count(app, model) -> int:
    with app.app_context():
        return db.session.query(model).count()


def test_a_nul_in_a_path_or_query_is_refused(client, acme):
    assert client.get("/c/a%00b").status_code == 404
    revoked = client.post("/v1/links/a%00b/revoke", headers=acme.headers)
    assert revoked.status_code == 404 and revoked.json["error"]["code"] == "not_found"
    searched = client.get("/v1/tickets?q=%00", headers=acme.headers)
    assert searched.status_code == 400 and searched.json["error"]["code"] == "validation_failed"
    assert searched.json["error"]["details"] == [
        {"field": "q", "message": "must not contain a NUL character"}]


def test_a_nul_in_a_body_stores_nothing(app, client, acme):
    token = client.post("/v1/links", headers=acme.headers,
                        json={"project_id": acme.project()["id"]}).json["token"]
    body = {"description": "Moved trench", "reason": "Gas line", "directed_by": "Sam",
            "client_ref": "nul-ref-0001", "labor": [{"trade": "x\u0000", "hours": 1, "rate": 5}]}
    for path in (f"/c/{token}/tickets", "/v1/tickets"):
        sent = client.post(path, headers=acme.headers if path.startswith("/v1") else None,
                           json={**body, "project_id": acme.project()["id"]})
        assert sent.status_code == 400 and sent.json["error"]["code"] == "invalid_body", path
    mine = client.post(f"/c/{token}/mine", json={"client_refs": ["abc\u0000def"]})
    assert mine.status_code == 400
    form = client.post(f"/c/{token}/tickets", data={"description": "Moved\u0000trench",
                                                    "reason": "Gas", "directed_by": "Sam"})
    assert form.status_code == 400 and "NUL character" in form.get_data(as_text=True)
    links = count(app, CaptureLink)
    assert client.post("/links", data={"label": "Gate\u0000", "project_id": "1"}).status_code in (
        400, 302)  # refused, or sent to sign in first: never stored
    assert count(app, Ticket) == 0 and count(app, CaptureLink) == links
    login = client.post("/login", data={"email": "pm\u0000@acme.example", "password": "x"})
    assert login.status_code == 400
