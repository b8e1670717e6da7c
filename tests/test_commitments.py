"""A ticket's sub on its commitment in the live sandbox: matched, confirmed once, written on every
line of an out-of-scope change event with the project's type and reason, read back."""
from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from sqlalchemy.orm import Session

from models import ProjectSettings, SubCommitment
from services.project_system import projects
from tests.test_approval import act, actor, budget_code_id, create, origin_rows, remote
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live


def commitments_of(client, tenant, project_id: str) -> dict:
    answer = client.get(f"/v1/projects/{project_id}/commitments", headers=tenant.headers)
    assert answer.status_code == 200, answer.json
    return answer.json


def commitment_of(client, tenant, project_id: str, number_or_vendor: str) -> dict:
    """A commitment of the project by its number, or the first of a vendor's."""
    return next(c for c in commitments_of(client, tenant, project_id)["data"]
                if number_or_vendor in (c["number"], c["vendor_name"]))


def written_items(app, tenant, project_id: str, ticket: dict) -> list[dict]:
    """The change event's line items as the sandbox's change event detail shows them."""
    event = remote(app, tenant).get_change_event(int(project_id),
                                                 ticket["external"]["change_event_id"])
    return event["change_items"]


def parties(items: list[dict]) -> list[tuple]:
    """Each line item's proposed vendor and commitment ids."""
    return [(((item["cost_impact"]["vendor"] or {}).get("proposed") or {}).get("id"),
             ((item["cost_impact"]["contract"] or {}).get("proposed") or {}).get("id"))
            for item in items]


def test_an_exact_sub_writes_every_line_on_its_vendor_and_commitment_out_of_scope(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    markup = {"kind": "overhead", "percent": 10, "applies_to": ["labor"], "compound": False,
              "budget_code_id": budget_code_id(client, acme, project, "01-310.O")}
    assert client.put(f"/v1/projects/{project}/markups", headers=acme.headers,
                      json={"markups": [markup]}).status_code == 200
    ticket = create(client, acme, sub="Apex Concrete")
    found = ticket["commitment"]
    assert found["exact"] is True and found["vendor_name"] == "Apex Concrete, Inc."
    subcontract = commitment_of(client, acme, project, "Apex Concrete, Inc.")
    assert (found["contract_id"], found["contract_number"]) == \
        (subcontract["id"], subcontract["number"])

    approved = act(client, acme, ticket["id"], "approve", {"require_exact": True})
    assert approved.status_code == 200, approved.json
    items = written_items(app, acme, project, approved.json)
    assert len(items) == 4  # three cost lines and the markup line
    assert parties(items) == [(found["vendor_id"], found["contract_id"])] * 4
    [event] = origin_rows(sandbox_server, "change_events", ticket["id"])
    assert (event["scope"], event["event_type"], event["change_reason_id"]) == \
        ("out_of_scope", "tbd", None)
    assert approved.json["commitment"] == found  # the written ticket keeps what it was written on


def test_a_near_name_is_a_suggestion_until_confirmed_then_kept_for_the_next_tickets(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    first = create(client, acme, sub="Cedar Framing")
    assert first["commitment"]["exact"] is False
    assert first["commitment"]["reason"] == "closest name in the directory: Cedar Framing & Trim"
    refused = act(client, acme, first["id"], "approve")
    assert refused.status_code == 409 and refused.json["error"]["code"] == \
        "commitment_needs_confirmation"
    assert origin_rows(sandbox_server, "change_events", first["id"]) == []  # nothing written

    cedar = commitment_of(client, acme, project, "Cedar Framing & Trim")
    kept = client.put(f"/v1/projects/{project}/commitments", headers=acme.headers,
                      json={"sub": "cedar framing", "contract_id": cedar["id"]})
    assert kept.status_code == 200, kept.json
    assert kept.json["commitment"]["exact"] is True
    assert commitments_of(client, acme, project)["confirmed"] == [kept.json]
    second = create(client, acme, sub="Cedar Framing")
    assert (second["commitment"]["contract_id"], second["commitment"]["exact"]) == (cedar["id"], True)
    assert second["commitment"]["reason"] == f"confirmed by {actor(acme)} for cedar framing"
    for ticket in (first, second):
        approved = act(client, acme, ticket["id"], "approve")
        assert approved.status_code == 200, approved.json
        assert set(parties(written_items(app, acme, project, approved.json))) == \
            {(cedar["vendor_id"], cedar["id"])}
    # Confirmed on one project only: the other project's tickets of the sub still ask.
    other = next(p for p in acme.projects if p["change_events"] and str(p["id"]) != project)
    elsewhere = create(client, acme, project=dict(other, id=str(other["id"])), sub="Cedar Framing")
    assert elsewhere["commitment"]["exact"] is False


def test_an_unknown_sub_and_a_vendor_without_a_commitment_write_lines_without_one_saying_why(
        client, acme, app):
    project = acme.project()["id"]
    for sub, reason in (
            ("Delta Drywall", "Delta Drywall is not in this project's directory in Procore"),
            ("Bayside Rentals", "Bayside Rentals has no commitment on this project in Procore")):
        ticket = create(client, acme, sub=sub)
        assert ticket["commitment"]["contract_id"] is None
        assert ticket["commitment"]["reason"] == reason
        approved = act(client, acme, ticket["id"], "approve")
        assert approved.status_code == 200, approved.json
        assert set(parties(written_items(app, acme, project, approved.json))) == {(None, None)}
        assert approved.json["commitment"]["reason"] == reason
    unnamed = create(client, acme)
    assert unnamed["commitment"] is None


def test_contract_id_overrides_the_sub_and_one_the_project_lacks_is_refused(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    other = next(p for p in acme.projects if p["change_events"] and str(p["id"]) != project)
    foreign = commitment_of(client, acme, str(other["id"]), "Apex Concrete, Inc.")
    ticket = create(client, acme, sub="Bolt Electric")
    assert ticket["commitment"]["reason"] == "Bolt Electric LLC has 2 commitments on this project"
    for contract_id in (foreign["id"], 9_999_999):
        refused = act(client, acme, ticket["id"], "approve", {"contract_id": contract_id})
        assert refused.status_code == 409, refused.json
        assert refused.json["error"]["code"] == "contract_not_found"
        assert refused.json["error"]["details"][0]["field"] == "contract_id"
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    order = next(c for c in commitments_of(client, acme, project)["data"]
                 if c["kind"] == "purchase_order" and c["vendor_name"] == "Bolt Electric LLC")
    approved = act(client, acme, ticket["id"], "approve", {"contract_id": order["id"]})
    assert approved.status_code == 200, approved.json
    assert set(parties(written_items(app, acme, project, approved.json))) == \
        {(order["vendor_id"], order["id"])}
    confirmed = client.put(f"/v1/projects/{project}/commitments", headers=acme.headers,
                           json={"sub": "Bolt Electric", "contract_id": foreign["id"]})
    assert confirmed.status_code == 409 and confirmed.json["error"]["code"] == "contract_not_found"


def test_project_settings_round_trip_and_the_event_carries_type_and_reason(
        client, acme, sandbox_server):
    project = acme.project()["id"]
    path = f"/v1/projects/{project}/settings"
    first = client.get(path, headers=acme.headers)
    assert first.status_code == 200, first.json
    assert (first.json["event_type"], first.json["change_reason_id"]) == ("tbd", None)
    reasons = {r["name"]: r["id"] for r in first.json["change_reasons"]}
    assert {"Client Request", "Design Development", "Field Condition",
            "Existing Condition"} <= set(reasons)
    saved = client.put(path, headers=acme.headers, json={
        "event_type": "owner_change", "change_reason_id": reasons["Field Condition"]})
    assert saved.status_code == 200, saved.json
    assert saved.json["change_reason"] == "Field Condition"
    assert client.get(path, headers=acme.headers).json == saved.json
    unknown = client.put(path, headers=acme.headers, json={"change_reason_id": 9_999_999})
    assert unknown.status_code == 409 and unknown.json["error"]["code"] == "change_reason_not_found"
    bad = client.put(path, headers=acme.headers, json={"event_type": "whenever"})
    assert bad.status_code == 400 and bad.json["error"]["details"][0]["field"] == "event_type"
    assert client.get(path, headers=acme.headers).json == saved.json  # the refusals changed nothing

    ticket = create(client, acme, sub="Apex Concrete")
    assert act(client, acme, ticket["id"], "approve").status_code == 200
    [event] = origin_rows(sandbox_server, "change_events", ticket["id"])
    assert (event["scope"], event["event_type"], event["change_reason_id"]) == \
        ("out_of_scope", "owner_change", reasons["Field Condition"])


def test_a_change_reason_removed_in_procore_stops_an_approval_before_anything_is_written(
        app, client, acme, sandbox_server):
    """A project's change reason deleted in Procore since it was chosen: approving says so in
    the spec's shape and writes nothing; choosing another lets the same ticket be written."""
    app.config["CATALOG_CACHE_S"] = 0  # read the reasons as Procore has them now
    project = acme.project()["id"]
    path = f"/v1/projects/{project}/settings"
    reasons = {r["name"]: r["id"] for r in client.get(path, headers=acme.headers).json[
        "change_reasons"]}
    assert client.put(path, headers=acme.headers, json={
        "change_reason_id": reasons["Design Development"]}).status_code == 200
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection, connection:
        connection.execute("DELETE FROM change_reasons WHERE id = ?",
                           [reasons["Design Development"]])
    ticket = create(client, acme, sub="Apex Concrete")
    refused = act(client, acme, ticket["id"], "approve")
    assert refused.status_code == 409, refused.json
    assert refused.json["error"]["code"] == "change_reason_not_found"
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    page = sign_in(app, client, acme).post(f"/tickets/{ticket['id']}/approve",
                                           {"destination": "change_event"}, htmx=True)
    assert "no longer offered in Procore; choose another on the rates page" in \
        page.get_data(as_text=True)
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    assert client.put(path, headers=acme.headers, json={
        "change_reason_id": reasons["Client Request"]}).status_code == 200
    assert act(client, acme, ticket["id"], "approve").status_code == 200
    [event] = origin_rows(sandbox_server, "change_events", ticket["id"])
    assert event["change_reason_id"] == reasons["Client Request"]


def test_the_pages_say_the_commitment_and_confirm_it_once_for_the_sub(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    browser = sign_in(app, client, acme)
    bolt = create(client, acme, sub="Bolt Electric")
    page = browser.get(f"/tickets/{bolt['id']}").get_data(as_text=True)
    assert "(Bolt Electric LLC has 2 commitments on this project). Confirm it, or choose another." \
        in page and "data-suggested" in page
    refused = browser.post(f"/tickets/{bolt['id']}/approve", {}, htmx=True)
    assert refused.status_code == 422
    assert "The sub&#39;s commitment in Procore needs confirming: it is only a suggestion" in \
        refused.get_data(as_text=True)
    order = next(c for c in commitments_of(client, acme, project)["data"]
                 if c["kind"] == "purchase_order" and c["vendor_name"] == "Bolt Electric LLC")
    confirmed = browser.post(f"/tickets/{bolt['id']}/commitment",
                             {"contract_id": str(order["id"])}, htmx=True)
    html = confirmed.get_data(as_text=True)
    assert confirmed.status_code == 200 and "for its next tickets too" in html
    assert f"Each line is proposed on {order['number']}" in html
    assert act(client, acme, bolt["id"], "approve").status_code == 200

    delta = create(client, acme, sub="Delta Drywall")
    page = browser.get(f"/tickets/{delta['id']}").get_data(as_text=True)
    assert ("Delta Drywall is not in this project&#39;s directory in Procore. Its lines are "
            "written without a commitment.") in page

    rates = browser.get(f"/rates?project_id={project}").get_data(as_text=True)
    assert "Change events in Procore" in rates and "Field Condition" in rates
    reasons = client.get(f"/v1/projects/{project}/settings", headers=acme.headers).json
    reason_id = next(r["id"] for r in reasons["change_reasons"] if r["name"] == "Client Request")
    saved = browser.post("/rates/settings", {"project_id": project, "event_type": "allowance",
                                             "change_reason_id": str(reason_id)}, htmx=True)
    assert saved.status_code == 200, saved.get_data(as_text=True)
    settings = client.get(f"/v1/projects/{project}/settings", headers=acme.headers).json
    assert (settings["event_type"], settings["change_reason"]) == ("allowance", "Client Request")

    # A capture link made for a sub offers to confirm its commitment at once.
    made = browser.post("/links", {"project_id": project, "label": "Cedar Framing"}, htmx=True)
    html = made.get_data(as_text=True)
    assert "Suggested: " in html and "closest name in the directory: Cedar Framing &amp; Trim" in html
    cedar = commitment_of(client, acme, project, "Cedar Framing & Trim")
    kept = browser.post("/links/commitment", {"project_id": project, "sub": "Cedar Framing",
                                              "contract_id": str(cedar["id"])}, htmx=True)
    assert kept.status_code == 200 and "Confirmed: Cedar Framing" in kept.get_data(as_text=True)
    assert create(client, acme, sub="Cedar Framing")["commitment"]["exact"] is True


def test_bulk_approval_lists_a_suggested_commitment_and_confirms_it_for_the_sub(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    browser = sign_in(app, client, acme)
    tickets = [create(client, acme, sub="Cedar Framing") for _ in range(2)]
    cedar = commitment_of(client, acme, project, "Cedar Framing & Trim")
    html = browser.post("/queue/bulk", {"ids": [t["id"] for t in tickets]},
                        htmx=True).get_data(as_text=True)
    assert html.count("Confirms the sub's commitment, kept for its next tickets:") == 2
    assert "closest name in the directory: Cedar Framing &amp; Trim" in html
    assert origin_rows(sandbox_server, "change_events", tickets[0]["id"]) == []  # nothing yet
    form = {"ids": [t["id"] for t in tickets],
            **{f"suggest[{t['id']}][commitment]": str(cedar["id"]) for t in tickets}}
    written = browser.post("/queue/bulk/approve", form, htmx=True).get_data(as_text=True)
    assert "2 written" in written, written
    for ticket in tickets:
        shown = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
        assert set(parties(written_items(app, acme, project, shown))) == \
            {(cedar["vendor_id"], cedar["id"])}
    later = create(client, acme, sub="Cedar Framing")
    assert later["commitment"]["exact"] is True  # kept for the sub's next tickets


def void_in_sandbox(sandbox_server, contract_id: int) -> None:
    """Void a commitment in the sandbox, as a PM would in Procore."""
    with closing(sqlite3.connect(sandbox_server.db_path)) as connection, connection:
        connection.execute("UPDATE commitments SET status = 'Void' WHERE id = ?", [contract_id])


def test_a_confirmed_commitment_voided_in_procore_is_asked_again_never_written_blank_or_elsewhere(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    browser = sign_in(app, client, acme)
    tickets = {}
    for sub, number in (("Cedar Framing", "SC-004"), ("Bolt Electric", "SC-003")):
        kept = client.put(f"/v1/projects/{project}/commitments", headers=acme.headers,
                          json={"sub": sub, "contract_id": commitment_of(
                              client, acme, project, number)["id"]})
        assert kept.status_code == 200 and kept.json["commitment"]["exact"] is True
        void_in_sandbox(sandbox_server, kept.json["commitment"]["contract_id"])
        with app.app_context():
            projects.clear_caches()
        tickets[sub] = ticket = create(client, acme, sub=sub)
        # Bolt's other commitment (its purchase order) is not what the PM confirmed.
        assert ticket["commitment"]["exact"] is False
        assert ticket["commitment"]["reason"].startswith(
            "the commitment confirmed for this sub is no longer open on this project; ")
        refused = act(client, acme, ticket["id"], "approve")
        assert refused.status_code == 409, refused.json
        assert refused.json["error"]["code"] == "commitment_needs_confirmation"
        assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []
    page = browser.get(f"/tickets/{tickets['Cedar Framing']['id']}").get_data(as_text=True)
    assert "Confirm the sub&#39;s commitment again, or none, before approving." in page
    assert "written without a commitment" not in page
    listed = browser.post("/queue/bulk", {"ids": [t["id"] for t in tickets.values()]},
                          htmx=True).get_data(as_text=True)
    assert "Left out: open it to check (1)" in listed
    assert "Its sub&#39;s confirmed commitment is no longer open in Procore" in listed
    result = browser.post("/queue/bulk/approve", {"ids": [tickets["Cedar Framing"]["id"]]},
                          htmx=True).get_data(as_text=True)
    assert "0 written" in result and "the one confirmed for the sub is no longer open" in result
    exact = client.get("/v1/openapi.json").json["components"]["schemas"]["TicketCommitment"][
        "properties"]["exact"]["description"]
    assert "'the commitment confirmed for this sub is no longer open'" in exact  # programs know
    assert origin_rows(sandbox_server, "change_events", tickets["Cedar Framing"]["id"]) == []


def test_a_commitment_voided_while_still_remembered_is_read_again_after_procore_refuses_it(
        client, acme, app, sandbox_server):
    project = acme.project()["id"]
    cedar = commitment_of(client, acme, project, "Cedar Framing & Trim")
    assert client.put(f"/v1/projects/{project}/commitments", headers=acme.headers,
                      json={"sub": "Cedar Framing", "contract_id": cedar["id"]}).status_code == 200
    ticket = create(client, acme, sub="Cedar Framing")
    assert ticket["commitment"]["contract_id"] == cedar["id"]
    void_in_sandbox(sandbox_server, cedar["id"])  # within the service's memory of the directory
    refused = act(client, acme, ticket["id"], "approve")
    assert refused.status_code == 502 and "is void" in refused.json["error"]["message"]
    again = act(client, acme, ticket["id"], "approve")  # at once, as the PM is told to
    assert again.status_code == 409, again.json
    assert again.json["error"]["code"] == "commitment_needs_confirmation"
    assert origin_rows(sandbox_server, "change_events", ticket["id"]) == []


def test_a_project_without_change_events_never_asks_for_the_subs_commitment(client, acme, app):
    """Its tickets go to the daily log, which bills nothing: nothing to confirm on the page."""
    ticket = create(client, acme, acme.project(change_events=False), sub="Bolt Electric")
    browser = sign_in(app, client, acme)
    page = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Where the money lands" in page
    assert "Sub&#39;s commitment in Procore" not in page and "Confirm for Bolt Electric" not in page
    approved = act(client, acme, ticket["id"], "approve", {"destination": "daily_log"})
    assert approved.status_code == 200, approved.json
    assert approved.json["external"]["destination"] == "daily_log"
    assert approved.json["commitment"] is None


def test_two_pms_confirming_or_saving_at_once_keep_one_row_never_an_error(
        client, acme, app, monkeypatch):
    """The row another PM inserted between this one's read and write is updated, not refused."""
    project = acme.project()["id"]
    cedar = commitment_of(client, acme, project, "Cedar Framing & Trim")
    assert client.put(f"/v1/projects/{project}/commitments", headers=acme.headers,
                      json={"sub": "Cedar Framing", "contract_id": None}).status_code == 200
    assert client.put(f"/v1/projects/{project}/settings", headers=acme.headers,
                      json={"event_type": "allowance"}).status_code == 200
    unseen = Session.get

    def racing(self, entity, *args, **kwargs):  # as if the other PM's row came in just after
        if entity in (SubCommitment, ProjectSettings):
            return None
        return unseen(self, entity, *args, **kwargs)
    monkeypatch.setattr(Session, "get", racing)
    kept = client.put(f"/v1/projects/{project}/commitments", headers=acme.headers,
                      json={"sub": "cedar framing", "contract_id": cedar["id"]})
    assert kept.status_code == 200, kept.json
    saved = client.put(f"/v1/projects/{project}/settings", headers=acme.headers,
                       json={"event_type": "transfer"})
    assert saved.status_code == 200, saved.json
    monkeypatch.setattr(Session, "get", unseen)
    assert [row["commitment"]["contract_id"] for row in
            commitments_of(client, acme, project)["confirmed"]] == [cedar["id"]]
    assert client.get(f"/v1/projects/{project}/settings",
                      headers=acme.headers).json["event_type"] == "transfer"
