"""The sub or crew a ticket came from: named by a program or taken from a capture link's label,
returned, filtered by in the list and the queue."""
from __future__ import annotations

import pytest

from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live


def test_a_program_names_the_sub_and_lists_and_the_queue_filter_by_it(app, client, acme):
    project = acme.project()
    body = {"project_id": project["id"], "description": "Patched a wall", "reason": "r",
            "directed_by": "Sam"}
    named = client.post("/v1/tickets", headers=acme.headers, json={**body, "sub": " Summit Framing "})
    other = client.post("/v1/tickets", headers=acme.headers, json={**body, "sub": "Bolt Electric"})
    plain = client.post("/v1/tickets", headers=acme.headers, json=body)
    assert named.json["sub"] == "Summit Framing" and plain.json["sub"] is None
    token = client.post("/v1/links", headers=acme.headers, json={
        "project_id": project["id"], "label": "Summit Framing"}).json["token"]
    crew = client.post(f"/c/{token}/tickets", json={"description": "Framed", "reason": "r",
                                                       "directed_by": "Sam"}).json
    assert client.get(f"/v1/tickets/{crew['id']}", headers=acme.headers).json["sub"] == \
        "Summit Framing"  # a capture link's label

    listed = client.get("/v1/tickets?sub=summit%20framing", headers=acme.headers).json
    assert {t["id"] for t in listed["data"]} == {named.json["id"], crew["id"]}
    assert listed["total"] == 2
    exported = client.get("/v1/tickets/export.csv?sub=Bolt%20Electric", headers=acme.headers)
    assert other.json["id"] in exported.get_data(as_text=True)
    assert named.json["id"] not in exported.get_data(as_text=True)
    too_long = client.get("/v1/tickets?sub=" + "x" * 121, headers=acme.headers)
    assert too_long.status_code == 400

    browser = sign_in(app, client, acme)
    queue = browser.get("/queue").get_data(as_text=True)
    assert "<option>Bolt Electric</option>" in queue  # a program's sub is offered beside labels
    filtered = browser.get("/queue?sub=Bolt+Electric").get_data(as_text=True)
    assert other.json["id"] in filtered and named.json["id"] not in filtered
