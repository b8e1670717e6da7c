"""Not-to-exceed: tickets count against a GC directive's authorised amount, with a warning at
80 % and a refusal to approve past 100 % unless the PM confirms."""
from __future__ import annotations

import pytest

from tests.test_approval import act, create, origin_rows
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live


def authorize(client, tenant, project_id: str, reference: str = "CD-014", amount: float = 3000,
              **extra) -> dict:
    response = client.post(f"/v1/projects/{project_id}/authorizations", headers=tenant.headers,
                           json={"reference": reference, "amount": amount,
                                 "title": "Reroute trench around gas line", **extra})
    assert response.status_code == 200, response.json
    return response.json


def claim(client, tenant, amount_hours: float, ref: str | None = "cd-014") -> dict:
    """A ticket of one labor line at 100 an hour against the directive."""
    return create(client, tenant, authorization_ref=ref, equipment=[], materials=[],
                  labor=[{"trade": "Laborer", "hours": amount_hours, "rate": 100,
                          "costCode": "02-200"}])


def test_running_total_warns_at_80_and_refuses_past_100_unless_confirmed(client, acme,
                                                                          sandbox_server):
    project = acme.project()["id"]
    directive = authorize(client, acme, project)
    assert (directive["authorized"], directive["used"], directive["level"]) == (3000.0, 0.0, "ok")
    first = claim(client, acme, 12)   # 1200
    assert first["nte"]["reference"] == "CD-014" and first["nte"]["level"] == "ok"
    assert first["authorization_ref"] == "cd-014"
    assert act(client, acme, first["id"], "approve").status_code == 200
    second = claim(client, acme, 12)  # 2400 of 3000 = 80 %
    assert second["nte"]["level"] == "warning" and second["nte"]["percent"] == 80.0
    assert second["nte"]["written"] == 1200.0 and second["nte"]["open"] == 1200.0
    assert "$600.00 is left" in second["nte"]["message"]
    third = claim(client, acme, 9)    # 3300: past the amount while open
    assert third["nte"]["level"] == "over" and third["nte"]["remaining"] == -300.0
    listed = client.get("/v1/tickets", headers=acme.headers).json["data"]
    read = [client.get(f"/v1/tickets/{t['id']}", headers=acme.headers).json for t in listed]
    assert {t["nte"]["used"] for t in read if t["nte"]} == {3300.0}
    # Written 1200 + 1200 = 2400: still within, so this one goes through.
    assert act(client, acme, second["id"], "approve").status_code == 200
    refused = act(client, acme, third["id"], "approve")
    assert refused.status_code == 409
    error = refused.json["error"]
    assert error["code"] == "nte_exceeded"
    assert error["details"]["after"] == "3300.00" and error["details"]["authorized"] == "3000.00"
    assert origin_rows(sandbox_server, "change_events", third["id"]) == []
    assert client.get(f"/v1/tickets/{third['id']}", headers=acme.headers).json["status"] == "submitted"
    confirmed = act(client, acme, third["id"], "approve", {"confirm_over_nte": True})
    assert confirmed.status_code == 200, confirmed.json
    assert confirmed.json["nte"]["written"] == 3300.0 and confirmed.json["nte"]["level"] == "over"
    got = client.get(f"/v1/authorizations/{directive['id']}", headers=acme.headers).json
    assert got["used"] == 3300.0 and got["open"] == 0.0


def test_rejected_tickets_do_not_count_and_links_can_change(client, acme, rival):
    project = acme.project()["id"]
    directive = authorize(client, acme, project, amount=1000)
    ticket = claim(client, acme, 5)
    assert client.post(f"/v1/tickets/{ticket['id']}/reject", headers=acme.headers).status_code == 200
    assert client.get(f"/v1/authorizations/{directive['id']}",
                      headers=acme.headers).json["used"] == 0.0
    loose = claim(client, acme, 1, ref="CD-999")
    assert loose["nte"] is None
    assert any("'CD-999' is not listed for this project" in w for w in loose["warnings"])
    linked = client.post(f"/v1/tickets/{loose['id']}/authorization", headers=acme.headers,
                         json={"authorization_id": directive["id"]})
    assert linked.status_code == 200 and linked.json["nte"]["used"] == 100.0
    theirs = authorize(client, rival, rival.project()["id"], reference="X-1")
    foreign = client.post(f"/v1/tickets/{loose['id']}/authorization", headers=acme.headers,
                          json={"authorization_id": theirs["id"]})
    assert foreign.status_code == 409 and foreign.json["error"]["code"] == "authorization_not_found"
    assert foreign.json["error"]["details"][0]["field"] == "authorization_id"
    assert client.get(f"/v1/authorizations/{theirs['id']}", headers=acme.headers).status_code == 404
    dup = client.post(f"/v1/projects/{project}/authorizations", headers=acme.headers,
                      json={"reference": "CD-014", "amount": 5})
    assert dup.status_code == 409 and dup.json["error"]["code"] == "authorization_exists"
    unlinked = client.post(f"/v1/tickets/{loose['id']}/authorization", headers=acme.headers,
                           json={"authorization_id": None})
    assert unlinked.json["nte"] is None


def test_pages_show_the_running_total_and_ask_for_confirmation(app, client, acme):
    project = acme.project()["id"]
    authorize(client, acme, project, amount=1000)
    browser = sign_in(app, client, acme)
    ticket = claim(client, acme, 11)
    queue = browser.get("/queue").get_data(as_text=True)
    assert 'class="nte over"' in queue and "CD-014: 110.0 % of $1,000" in queue
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Not-to-exceed: $1,100.00 of the $1,000.00 authorised by directive CD-014" in page
    assert 'name="confirm_over_nte"' in page
    refused = browser.post(f"/tickets/{ticket['id']}/approve", {"destination": "change_event"})
    assert refused.status_code == 422
    assert "past its not-to-exceed amount of $1,000.00" in refused.get_data(as_text=True)
    approved = browser.post(f"/tickets/{ticket['id']}/approve",
                            {"destination": "change_event", "confirm_over_nte": "on"})
    assert approved.status_code == 200
    assert "Written to Procore." in approved.get_data(as_text=True)
    rates = browser.get(f"/rates?project_id={project}").get_data(as_text=True)
    assert "CD-014" in rates and "110.0 %" in rates
    made = browser.post("/rates/authorizations", {"project_id": project, "reference": "COR-7",
                                                  "kind": "change_order_request", "amount": "lots"})
    assert made.status_code == 422 and "Authorised amount:" in made.get_data(as_text=True)
    made = browser.post("/rates/authorizations", {"project_id": project, "reference": "COR-7",
                                                  "kind": "change_order_request", "amount": "2500"})
    assert "COR-7 recorded: not to exceed $2,500.00." in made.get_data(as_text=True)


@pytest.mark.parametrize("second", ["CD-020", "cd-020"])
def test_the_same_reference_created_at_once_answers_409_not_500(app, client, acme, monkeypatch, second):
    """Two creates both past the look-up (the race): the database's unique reference decides,
    whatever the case, as the look-up compares."""
    from services.pricing import authorizations

    project = acme.project()["id"]
    authorize(client, acme, project, reference="CD-020")
    monkeypatch.setattr(authorizations, "find_by_reference", lambda *args: None)
    again = client.post(f"/v1/projects/{project}/authorizations", headers=acme.headers,
                        json={"reference": second, "amount": 10})
    assert again.status_code == 409 and again.json["error"]["code"] == "authorization_exists"
    other = client.post(f"/v1/projects/{project}/authorizations", headers=acme.headers,
                        json={"reference": "CD-0200", "amount": 10})
    assert other.status_code == 200


def test_concurrent_creates_of_one_reference_make_one(app, acme):
    """Six creates of one reference in different cases at the same instant: one 200, five 409."""
    import threading

    project = acme.project()["id"]
    start, statuses = threading.Barrier(6), []

    def create_one(reference: str) -> None:
        worker = app.test_client()
        start.wait()
        statuses.append(worker.post(f"/v1/projects/{project}/authorizations", headers=acme.headers,
                                    json={"reference": reference, "amount": 10}).status_code)

    threads = [threading.Thread(target=create_one, args=(reference,))
               for reference in ("CD-021", "cd-021", "Cd-021", "cD-021", "CD-021", "cd-021")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [409] * 5


def test_the_migration_keeps_references_told_apart_by_case_alone(app, client, acme):
    """Two references only a race could make (differing in case alone) survive the migration to
    one reference per project whatever its case: the first as it was, the later one numbered."""
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import select, text

    from models import Authorization, db

    project = acme.project()["id"]
    first = authorize(client, acme, project, reference="CD-030")
    with app.app_context():
        db.session.remove()
        downgrade(revision="0025")  # references unique as written
        with db.engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO authorizations (company_id, project_id, reference, kind, amount, created_at) "
                "SELECT company_id, project_id, 'cd-030', kind, amount, created_at FROM authorizations "
                "WHERE id = :id"), {"id": first["id"]})
        upgrade()
        references = list(db.session.scalars(select(Authorization.reference).order_by(Authorization.id)))
        db.session.remove()
    assert references[0] == "CD-030" and references[1].startswith("cd-030 (")
    again = client.post(f"/v1/projects/{project}/authorizations", headers=acme.headers,
                        json={"reference": "Cd-030", "amount": 5})
    assert again.status_code == 409 and again.json["error"]["code"] == "authorization_exists"
