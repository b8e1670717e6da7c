"""A capture link reaches only the tickets sent through it: a poster's holder cannot sign,
add photos to, or read another ticket by knowing its client reference."""
from __future__ import annotations

import uuid

from models import Ticket, db
from support.images import jpeg_bytes, png_bytes
from tests.plugins.storage import stored_names
from tests.test_approval import act


def make_link(client, tenant, project: dict | None = None) -> str:
    project = project or tenant.project()
    return client.post("/v1/links", headers=tenant.headers,
                       json={"project_id": project["id"], "label": "Gate"}).json["token"]


def text(ref: str, **extra) -> dict:
    return {"description": "Patched slab", "reason": "Not ours", "directed_by": "Sam",
            "client_ref": ref, "labor": [{"trade": "Laborer", "hours": 2, "rate": 50,
                                          "costCode": "02-200"}], **extra}


def stored(app, ticket_id: str) -> Ticket:
    with app.app_context():
        db.session.expire_all()
        return db.session.get(Ticket, ticket_id)


def test_another_links_ticket_is_out_of_reach(app, client, acme):
    mine, poster = make_link(client, acme), make_link(client, acme)
    ref = "ERP-" + uuid.uuid4().hex[:8]
    api_ticket = client.post("/v1/tickets", headers=acme.headers,
                             json={**text(ref), "project_id": acme.project()["id"]}).json
    crew_ref = uuid.uuid4().hex
    crew_ticket = client.post(f"/c/{mine}/tickets", json=text(crew_ref)).json
    for target, ticket_id in ((ref, api_ticket["id"]), (crew_ref, crew_ticket["id"])):
        signed = client.put(f"/c/{poster}/tickets/{target}/signature?name=Forged&qualifier=verified",
                            data=png_bytes(), content_type="image/png")
        assert signed.status_code == 404 and signed.json["error"]["code"] == "ticket_not_found"
        photo = client.put(f"/c/{poster}/tickets/{target}/photos/p1", data=jpeg_bytes(),
                           content_type="image/jpeg")
        assert photo.status_code == 404
        client.put(f"/c/{poster}/drafts/{target}/photos/p2", data=jpeg_bytes(),
                   content_type="image/jpeg")
        # A resend under the same reference through the poster neither finds nor shows it.
        resent = client.post(f"/c/{poster}/tickets", json=text(target))
        assert resent.status_code == 409 and resent.json["error"]["code"] == "client_ref_in_use"
        assert ticket_id not in resent.get_data(as_text=True)
        record = stored(app, ticket_id)
        assert record.signature is None and record.photo_count == 0
    with app.app_context():
        assert db.session.query(Ticket).count() == 2
    # Its own link still reaches it.
    own = client.put(f"/c/{mine}/tickets/{crew_ref}/photos/p1", data=jpeg_bytes(),
                     content_type="image/jpeg")
    assert own.status_code == 200 and own.json["photo_count"] == 1


def test_a_written_ticket_takes_no_signature_from_the_phone(app, client, acme, sandbox_server):
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    ticket = client.post(f"/c/{link}/tickets", json=text(ref)).json
    assert act(client, acme, ticket["id"], "approve", {}).status_code == 200
    late = client.put(f"/c/{link}/tickets/{ref}/signature?name=Sam&qualifier=verified",
                      data=png_bytes(), content_type="image/png")
    assert late.status_code == 409 and late.json["error"]["code"] == "ticket_written"
    assert stored(app, ticket["id"]).signature is None


def test_a_refused_correction_stores_no_photo(app, client, acme):
    link = make_link(client, acme)
    ref = uuid.uuid4().hex
    client.post(f"/c/{link}/tickets", json=text(ref))
    before = stored_names(app)
    photos = [{"name": f"p{n}.jpg", "data_url": "data:image/jpeg;base64,"
               + __import__("base64").b64encode(jpeg_bytes(color=(n * 20, 0, 0))).decode()}
              for n in range(3)]
    refused = client.post(f"/c/{link}/tickets", json=text(uuid.uuid4().hex, revises=ref,
                                                          photos=photos))
    assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_not_sent_back"
    assert stored_names(app) == before
