"""The office prices the claim: lines priced from the rate sheet in force on the work day."""
from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from tests.test_approval import act, create
from tests.test_rates import save

pytestmark = pytest.mark.live


def labor(classification: str, hours: float, hour_type: str = "st", workers: float = 1,
          **extra) -> dict:
    return {"trade": "Electrician", "classification": classification, "hours": hours,
            "workers": workers, "hour_type": hour_type, "costCode": "26-050", **extra}


def test_lines_priced_from_the_sheet_with_st_ot_dt(client, acme):
    project = acme.project()["id"]
    sheet = save(client, acme, project)
    ticket = create(client, acme, worked_on="2026-03-02", labor=[
        labor("Journeyman Electrician", 8, workers=2),
        labor("journeyman  electrician", 2.5, "ot"),
        labor("Apprentice", 1.25, "dt")],
        equipment=[{"description": "Scissor lift", "hours": 3, "costCode": "26-050"}],
        materials=[{"description": "EMT 3/4 in", "quantity": 100, "costCode": "26-050"}])
    assert ticket["worked_on"] == "2026-03-02"
    rates = [(line["rate"], line["amount"], line["hour_type"]) for line in ticket["labor"]]
    # 2 x 8 x 98.50; 2.5 x 147.75 = 369.375 -> 369.38 (half up); 1.25 x 122 = 152.50
    assert rates == [(98.5, 1576.0, "st"), (147.75, 369.38, "ot"), (122.0, 152.5, "dt")]
    assert ticket["equipment"][0]["rate"] == 35.0 and ticket["equipment"][0]["amount"] == 105.0
    material = ticket["materials"][0]
    # Cost 2.10 plus the sheet's 15 % markup: 2.415 a unit, 241.50 for 100.
    assert (material["unitCost"], material["unit_price"], material["amount"]) == (2.1, 2.415, 241.5)
    assert ticket["total"] == 1576.0 + 369.38 + 152.5 + 105.0 + 241.5
    assert not any("rate" in w for w in ticket["warnings"])
    ot = ticket["routing"][1]
    assert ot["pricing"]["source"] == "sheet" and ot["pricing"]["sheet_id"] == sheet["id"]
    assert ot["pricing"]["hour_type"] == "ot" and ot["pricing"]["item"] == "Journeyman Electrician"
    assert ot["pricing"]["note"] == ("overtime rate 147.75 from the rate sheet “IBEW 2026 burdened” "
                                     "(in force from 2026-01-01)")
    assert ot["description"].endswith("1 × 2.5 h OT") and ot["unit_cost"] == 147.75
    assert ticket["routing"][4]["unit_cost"] == 2.415
    assert "15 % material markup" in ticket["routing"][4]["pricing"]["note"]


def test_the_sheet_in_force_on_the_work_day_prices_it(client, acme):
    project = acme.project()["id"]
    save(client, acme, name="Company default", labor=[{"classification": "Foreman", "st": 90}])
    save(client, acme, project, effective_from="2026-01-01")
    save(client, acme, project, effective_from="2026-07-01", name="Mid-year raise",
         labor=[{"classification": "Journeyman Electrician", "st": 104, "ot": 156, "dt": 208}])
    before = create(client, acme, worked_on="2026-06-30", labor=[labor("Journeyman Electrician", 1)])
    after = create(client, acme, worked_on="2026-07-01", labor=[labor("Journeyman Electrician", 1)])
    assert before["labor"][0]["rate"] == 98.5 and after["labor"][0]["rate"] == 104.0
    assert after["routing"][0]["pricing"]["sheet_name"] == "Mid-year raise"
    # Before any project sheet, the company default prices it.
    early = create(client, acme, worked_on="2025-12-31", labor=[labor("Foreman", 2)])
    assert early["labor"][0]["amount"] == 0.0  # the default's sheet starts 2026-01-01
    save(client, acme, name="Old default", effective_from="2025-01-01",
         labor=[{"classification": "Foreman", "st": 80}])
    older = create(client, acme, worked_on="2025-12-31", labor=[labor("Foreman", 2)])
    assert older["labor"][0]["amount"] == 160.0
    assert older["routing"][0]["pricing"]["sheet_name"] == "Old default"


def test_work_day_defaults_to_the_capture_date_on_the_jobsite_clock(client, acme):
    project = acme.project()["id"]
    save(client, acme, project, effective_from="2026-07-01", name="July",
         labor=[{"classification": "Foreman", "st": 120}])
    save(client, acme, project, effective_from="2026-06-01", name="June",
         labor=[{"classification": "Foreman", "st": 100}])
    # 03:30 UTC on 1 July is still 30 June, 20:30, in California.
    with time_machine.travel(dt.datetime(2026, 7, 1, 3, 30, tzinfo=dt.timezone.utc), tick=False):
        ticket = create(client, acme, labor=[labor("Foreman", 1)])
    assert ticket["worked_on"] is None  # not given: the daily log dates it on the jobsite day
    assert ticket["labor"][0]["rate"] == 100.0  # the June sheet, in force on 30 June


def test_explicit_rate_is_kept_and_flagged_when_it_differs(client, acme):
    project = acme.project()["id"]
    save(client, acme, project)
    ticket = create(client, acme, worked_on="2026-03-02", labor=[
        labor("Journeyman Electrician", 2, "ot", rate=150),
        labor("Journeyman Electrician", 1, rate=98.5),
        labor("Lineman", 1), labor("Lineman", 1, rate=70)])
    kept, same, unknown, typed = ticket["routing"][:4]
    assert ticket["labor"][0]["rate"] == 150.0 and ticket["labor"][0]["amount"] == 300.0
    assert kept["pricing"]["source"] == "explicit" and kept["pricing"]["differs"] is True
    assert kept["pricing"]["sheet_rate"] == 147.75 and kept["pricing"]["needs_office"] is True
    assert same["pricing"]["source"] == "explicit" and same["pricing"]["differs"] is False
    assert unknown["pricing"]["source"] == "none" and unknown["pricing"]["needs_office"] is True
    assert unknown["amount"] == 0.0
    assert typed["pricing"]["source"] == "explicit" and typed["amount"] == 70.0
    assert any("labor[0]" in w and "overtime rate 150 differs" in w and "147.75" in w
               for w in ticket["warnings"])
    assert any("labor[2]" in w and "classification “Lineman” is not on the rate sheet" in w
               for w in ticket["warnings"])


def test_a_later_sheet_never_reprices_a_written_ticket(client, acme):
    project = acme.project()["id"]
    save(client, acme, project)
    ticket = create(client, acme, worked_on="2026-03-02", labor=[labor("Foreman", 2)])
    assert act(client, acme, ticket["id"], "approve").status_code == 200
    save(client, acme, project, labor=[{"classification": "Foreman", "st": 500}])
    save(client, acme, project, effective_from="2026-03-01",
         labor=[{"classification": "Foreman", "st": 400}])
    again = client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json
    assert again["labor"][0]["rate"] == 110.0 and again["total"] == ticket["total"]
    assert again["routing"][0]["amount"] == 220.0


def test_work_day_must_be_an_iso_date(client, acme):
    response = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": acme.project()["id"], "description": "d", "reason": "r",
        "directed_by": "s", "worked_on": 20260302, "labor": [labor("Foreman", 1, "xt")]})
    assert response.status_code == 400
    fields = {d["field"] for d in response.json["error"]["details"]}
    assert fields == {"worked_on", "labor[0].hour_type"}


def test_crew_picks_a_classification_and_hour_type_on_the_capture_form(app, client, acme):
    from tests.test_review_pages import sign_in

    project = acme.project()["id"]
    save(client, acme, project, effective_from="2020-01-01")
    link = client.post("/v1/links", headers=acme.headers, json={"project_id": project}).json
    page = client.get(f"/c/{link['token']}").get_data(as_text=True)
    assert '<datalist id="classifications">' in page
    assert '<option value="Journeyman Electrician">' in page
    assert 'name="labor[0].hour_type"' in page and 'name="worked_on"' in page
    sent = client.post(f"/c/{link['token']}/tickets", data={
        "description": "Pulled wire to the new panel", "reason": "Not on drawings",
        "directed_by": "Sam", "worked_on": "2026-03-02",
        "labor[0].trade": "Electrician", "labor[0].classification": "Apprentice",
        "labor[0].hour_type": "ot", "labor[0].hours": "2", "labor[0].costCode": "26-050",
        "labor[1].hour_type": "st",  # an untouched row: only the pick list has a value
        "labor[2].trade": "Electrician", "labor[2].classification": "Cable whisperer",
        "labor[2].hours": "1"})
    assert sent.status_code in (200, 303), sent.get_data(as_text=True)[:500]
    (listed,) = client.get("/v1/tickets", headers=acme.headers).json["data"]
    ticket = client.get(f"/v1/tickets/{listed['id']}", headers=acme.headers).json
    assert [(line["classification"], line["hour_type"], line["rate"]) for line in ticket["labor"]] == \
        [("Apprentice", "ot", 91.5), ("Cable whisperer", "st", None)]
    assert ticket["worked_on"] == "2026-03-02"
    browser = sign_in(app, client, acme)
    text = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "Priced: overtime rate 91.5 from the rate sheet" in text
    assert "classification “Cable whisperer” is not on the rate sheet" in text
    assert "Day of the work" in text


def test_equipment_is_charged_by_the_day_when_the_daily_rate_is_lower(client, acme, app):
    from tests.test_approval import remote

    project = acme.project()["id"]
    save(client, acme, project)  # scissor lift: 35 an hour, 210 a day
    ticket = create(client, acme, worked_on="2026-03-02", labor=[], materials=[], equipment=[
        {"description": "Scissor lift", "hours": 10, "costCode": "02-200"},   # 350 vs 2 days 420
        {"description": "Scissor lift", "hours": 7, "costCode": "02-200"},    # 245 vs 1 day 210
        {"description": "Scissor lift", "hours": 7, "rate": 30, "costCode": "02-200"}])
    hourly, daily, sent = ticket["routing"]
    assert (hourly["amount"], hourly["quantity"], hourly["unit_cost"]) == (350.0, 10.0, 35.0)
    assert (daily["amount"], daily["quantity"], daily["unit_cost"]) == (210.0, 1.0, 210.0)
    assert daily["pricing"]["per"] == "day" and "daily rate 210 × 1 day(s)" in daily["pricing"]["note"]
    assert sent["amount"] == 210.0 and sent["pricing"]["source"] == "explicit"
    approved = act(client, acme, ticket["id"], "approve")
    assert approved.status_code == 200, approved.json
    event = remote(app, acme).get_change_event(int(project), approved.json["external"]["change_event_id"])
    # In the company's own spelling of its units of measure.
    assert [i["cost_impact"]["estimate"]["unit_of_measure"] for i in event["change_items"]] == \
        ["HR", "DAY", "HR"]


def test_the_openapi_document_describes_the_pricing_fields(client):
    document = client.get("/v1/openapi.json").json
    properties: dict[str, dict] = {}
    for schema in document["components"]["schemas"].values():
        for name, prop in schema.get("properties", {}).items():
            properties.setdefault(name, prop)
    for name in ("classification", "hour_type", "worked_on", "pricing", "unit_price", "markups",
                 "authorization_ref", "nte", "confirm_over_nte", "effective_from",
                 "material_markup", "applies_to", "compound", "budget_code_id"):
        assert name in properties, name
    for name in ("hour_type", "worked_on", "confirm_over_nte", "authorization_ref", "pricing"):
        assert "description" in properties[name], name
    paths = document["paths"]
    for path, method in (("/projects/{project_id}/rate-sheets", "post"),
                         ("/projects/{project_id}/rate-sheets/csv", "post"),
                         ("/rate-sheets/{sheet_id}/csv", "get"),
                         ("/projects/{project_id}/markups", "put"),
                         ("/projects/{project_id}/authorizations", "post"),
                         ("/tickets/{ticket_id}/authorization", "post")):
        assert method in paths[path], path


def test_a_ticket_not_yet_written_is_priced_again_on_request(app, client, acme):
    from tests.test_review_pages import sign_in

    project = acme.project()["id"]
    ticket = create(client, acme, worked_on="2026-03-02", equipment=[], materials=[], labor=[
        labor("Foreman", 2), labor("Apprentice", 1, "ot", rate=80)])
    assert [line["amount"] for line in ticket["labor"]] == [0.0, 80.0]
    save(client, acme, project)
    repriced = client.post(f"/v1/tickets/{ticket['id']}/reprice", headers=acme.headers)
    assert repriced.status_code == 200, repriced.json
    assert [(line["rate"], line["amount"]) for line in repriced.json["labor"]] == \
        [(110.0, 220.0), (80.0, 80.0)]
    assert repriced.json["routing"][1]["pricing"]["differs"] is True  # sheet says 91.50
    assert repriced.json["total"] == 300.0
    assert not any("Foreman" in w for w in repriced.json["warnings"])
    browser = sign_in(app, client, acme)
    save(client, acme, project, labor=[{"classification": "Foreman", "st": 120}])
    page = browser.post(f"/tickets/{ticket['id']}/reprice")
    assert page.status_code == 200 and "Priced again" in page.get_data(as_text=True)
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["total"] == 320.0
    assert act(client, acme, ticket["id"], "approve", {"allow_unrouted": True}).status_code == 200
    save(client, acme, project, labor=[{"classification": "Foreman", "st": 500}])
    refused = client.post(f"/v1/tickets/{ticket['id']}/reprice", headers=acme.headers)
    assert refused.status_code == 409 and refused.json["error"]["code"] == "ticket_written"
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["total"] == 320.0


def test_notes_and_reasons_read_as_english(client, acme):
    from services.routing.routing import article

    assert [article(word) for word in ("equipment", "other", "unknown", "labor", "materials")] == \
        ["an", "an", "an", "a", "a"]
    project = acme.project()
    sent = client.post("/v1/tickets", headers=acme.headers, json={
        "project_id": project["id"], "description": "Set the pump", "reason": "Flooded pit",
        "directed_by": "Sam", "labor": [{"trade": "Laborer", "hours": 2, "rate": 45}],
        "equipment": [{"description": "Trash pump", "hours": 2, "rate": 30, "costCode": "02-200"}]})
    assert sent.status_code == 200, sent.json
    read = client.get(f"/v1/tickets/{sent.json['id']}", headers=acme.headers).json
    labor, equipment = read["routing"][0], read["routing"][1]
    assert labor["pricing"]["note"].startswith("straight time rate 45 as given on the ticket")
    assert equipment["reason"] == "cost code 02-200 has an equipment budget code"
