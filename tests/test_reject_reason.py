"""A rejection's reason: kept with the decision, returned by the API, optional there."""
from __future__ import annotations

from tests.test_review_pages import new_ticket


def test_api_reject_takes_an_optional_reason(client, acme):
    with_reason = new_ticket(client, acme)
    answer = client.post(f"/v1/tickets/{with_reason['id']}/reject", headers=acme.headers,
                         json={"reason": "  Already claimed on T-1234  "})
    assert answer.status_code == 200
    assert answer.json["decisions"][-1]["reason"] == "Already claimed on T-1234"
    without = new_ticket(client, acme)
    bare = client.post(f"/v1/tickets/{without['id']}/reject", headers=acme.headers)
    assert bare.status_code == 200 and bare.json["decisions"][-1]["reason"] is None
    read = client.get(f"/v1/tickets/{with_reason['id']}", headers=acme.headers).json
    assert [(d["action"], d["reason"]) for d in read["decisions"]] == [
        ("rejected", "Already claimed on T-1234")]
    too_long = client.post(f"/v1/tickets/{without['id']}/restore", headers=acme.headers)
    assert too_long.status_code == 200
    refused = client.post(f"/v1/tickets/{without['id']}/reject", headers=acme.headers,
                          json={"reason": "x" * 501})
    assert refused.status_code == 400


def capture_body(client_ref, **extra):
    body = {"description": "Moved trench", "reason": "Gas line", "directed_by": "Sam",
            "captured_by": "Lee", "client_ref": client_ref,
            "labor": [{"trade": "Laborer", "hours": 2, "rate": 50, "costCode": "02-200"}]}
    body.update(extra)
    return body


def test_a_phone_sees_only_its_own_tickets_and_corrects_only_sent_back_ones(client, acme):
    make = lambda label: client.post("/v1/links", headers=acme.headers, json={  # noqa: E731
        "project_id": acme.project()["id"], "label": label}).json["token"]
    token, other_token = make("Gate 3"), make("Gate 4")
    sent = client.post(f"/c/{token}/tickets", json=capture_body("phone-one-0001")).json
    client.post(f"/c/{token}/tickets", json=capture_body("phone-two-0001"))
    mine = client.post(f"/c/{token}/mine", json={"client_refs": ["phone-one-0001"]}).json["data"]
    assert [(t["reference"], t["state"]) for t in mine] == [(sent["reference"], "with the project manager")]
    assert client.post(f"/c/{other_token}/mine", json={"client_refs": ["phone-one-0001"]}).json["data"] == []
    # Only a ticket sent back can be corrected, and only through its own link.
    early = client.post(f"/c/{token}/tickets", json=capture_body("phone-one-0002", revises="phone-one-0001"))
    assert early.status_code == 409
    client.post(f"/v1/tickets/{sent['id']}/reject", headers=acme.headers, json={"reason": "No"})
    assert client.post(f"/c/{token}/mine", json={"client_refs": ["phone-one-0001"]}).json["data"][0][
        "state"] == "sent back: No"
    elsewhere = client.post(f"/c/{other_token}/tickets",
                            json=capture_body("phone-one-0003", revises="phone-one-0001"))
    assert elsewhere.status_code == 404
    fixed = client.post(f"/c/{token}/tickets", json=capture_body("phone-one-0004", revises="phone-one-0001",
                                                                 description="Moved trench 2 m"))
    assert fixed.status_code == 200 and fixed.json["id"] == sent["id"]
    again = client.post(f"/c/{token}/tickets", json=capture_body("phone-one-0004", revises="phone-one-0001"))
    assert again.json["id"] == sent["id"]  # a resend of the correction changes nothing
    ticket = client.get(f"/v1/tickets/{sent['id']}", headers=acme.headers).json
    assert ticket["description"] == "Moved trench 2 m" and ticket["status"] == "submitted"
    assert [d["action"] for d in ticket["decisions"]] == ["rejected", "resubmitted"]
