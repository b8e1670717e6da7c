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
