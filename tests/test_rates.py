"""Rate sheets: saved per project or company default, imported and exported as CSV, on a page."""
from __future__ import annotations

import csv
import io

import pytest

from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live

SHEET = {
    "name": "IBEW 2026 burdened", "effective_from": "2026-01-01", "material_markup": 15,
    "labor": [{"classification": "Journeyman Electrician", "st": 98.5, "ot": 147.75, "dt": 197},
              {"classification": "Apprentice", "st": 61, "ot": 91.5, "dt": 122},
              {"classification": "Foreman", "st": 110, "ot": 165, "dt": 220}],
    "equipment": [{"description": "Scissor lift", "hourly": 35, "daily": 210}],
    "materials": [{"description": "EMT 3/4 in", "unit_cost": 2.1}],
}

GOOD_CSV = ("kind,item,st,ot,dt,hourly,daily,unit_cost,percent\r\n"
            "labor,Journeyman Electrician,98.50,147.75,197,,,,\r\n"
            "labor,Apprentice,61,91.5,122,,,,\r\n"
            "equipment,Scissor lift,,,,35,210,,\r\n"
            "material,EMT 3/4 in,,,,,,2.10,\r\n"
            "material_markup,,,,,,,,15\r\n")


def sheets_url(project_id: str | None) -> str:
    return f"/v1/projects/{project_id}/rate-sheets" if project_id else "/v1/rate-sheets"


def save(client, tenant, project_id: str | None = None, **changes) -> dict:
    response = client.post(sheets_url(project_id), headers=tenant.headers, json={**SHEET, **changes})
    assert response.status_code == 200, response.json
    return response.json


def test_sheets_per_project_and_company_default(client, acme):
    project = acme.project()["id"]
    default = save(client, acme, name="Company 2026")
    own = save(client, acme, project)
    later = save(client, acme, project, effective_from="2026-07-01", name="Mid-year raise")
    assert default["project_id"] is None and own["project_id"] == project
    assert own["labor"][0] == {"classification": "Journeyman Electrician", "st": 98.5,
                               "ot": 147.75, "dt": 197.0}
    assert own["equipment"][0]["daily"] == 210.0 and own["material_markup"] == 15.0
    listed = client.get(sheets_url(project), headers=acme.headers).json["data"]
    assert [s["id"] for s in listed] == [later["id"], own["id"]]
    assert [s["id"] for s in client.get("/v1/rate-sheets", headers=acme.headers).json["data"]] \
        == [default["id"]]
    # The same effective date replaces the sheet rather than adding a second one.
    replaced = save(client, acme, project, name="IBEW corrected")
    assert replaced["id"] == own["id"] and replaced["name"] == "IBEW corrected"
    assert len(client.get(sheets_url(project), headers=acme.headers).json["data"]) == 2
    got = client.get(f"/v1/rate-sheets/{own['id']}", headers=acme.headers)
    assert got.status_code == 200 and got.json["name"] == "IBEW corrected"


def test_the_sheet_in_force_is_the_projects_latest_before_the_company_default(app, client, acme):
    import datetime as dt

    from services.pricing.rates import sheet_in_force

    project = acme.project()["id"]
    save(client, acme, name="Company early", effective_from="2026-01-01")
    default = save(client, acme, name="Company late", effective_from="2026-09-01")
    own = save(client, acme, project, name="Project spring", effective_from="2026-04-01")
    later = save(client, acme, project, name="Project summer", effective_from="2026-07-01")
    with app.app_context():
        in_force = lambda day: sheet_in_force(acme.company_id, project, day).id  # noqa: E731
        assert in_force(dt.date(2026, 3, 31)) != own["id"]  # before the project's: the default
        assert sheet_in_force(acme.company_id, project, dt.date(2026, 3, 31)).name == "Company early"
        assert in_force(dt.date(2026, 4, 1)) == own["id"]
        assert in_force(dt.date(2026, 10, 1)) == later["id"]  # the project's, though the default is newer
        assert sheet_in_force(acme.company_id, project, dt.date(2025, 12, 31)) is None
        assert sheet_in_force(acme.company_id, "999", dt.date(2026, 10, 1)).id == default["id"]


def test_sheet_validation_and_tenancy(client, acme, rival):
    twice = {**SHEET, "labor": [*SHEET["labor"], {"classification": "apprentice", "st": 1}]}
    response = client.post("/v1/rate-sheets", headers=acme.headers, json=twice)
    assert response.status_code == 400
    assert response.json["error"]["details"][0]["field"] == "labor"
    bad = client.post("/v1/rate-sheets", headers=acme.headers,
                      json={**SHEET, "labor": [{"classification": "Foreman", "st": -1}]})
    assert bad.status_code == 400 and bad.json["error"]["details"][0]["field"] == "labor[0].st"
    assert client.post("/v1/projects/999999/rate-sheets", headers=acme.headers,
                       json=SHEET).json["error"]["code"] == "project_not_found"
    sheet = save(client, acme)
    for path in (f"/v1/rate-sheets/{sheet['id']}", f"/v1/rate-sheets/{sheet['id']}/csv"):
        missing = client.get(path, headers=rival.headers)
        assert missing.status_code == 404
        assert missing.json["error"]["code"] == "rate_sheet_not_found"


def test_csv_import_and_export_round_trip(client, acme):
    project = acme.project()["id"]
    imported = client.post(f"{sheets_url(project)}/csv", headers=acme.headers,
                           json={"name": "From the spreadsheet", "effective_from": "2026-02-01",
                                 "csv": GOOD_CSV})
    assert imported.status_code == 200, imported.json
    sheet = imported.json
    assert [i["classification"] for i in sheet["labor"]] == ["Journeyman Electrician", "Apprentice"]
    assert sheet["materials"] == [{"description": "EMT 3/4 in", "unit_cost": 2.1}]
    assert sheet["material_markup"] == 15.0
    exported = client.get(f"/v1/rate-sheets/{sheet['id']}/csv", headers=acme.headers).json
    assert exported["filename"] == f"rate-sheet-{project}-2026-02-01.csv"
    again = client.post(f"{sheets_url(project)}/csv", headers=acme.headers,
                        json={"name": "Again", "effective_from": "2026-03-01",
                              "csv": exported["csv"]}).json
    for part in ("labor", "equipment", "materials", "material_markup"):
        assert again[part] == sheet[part]


def test_csv_with_a_bad_row_is_refused_whole_with_the_row_named(client, acme):
    bad = GOOD_CSV.replace("labor,Apprentice,61,", "labor,Apprentice,sixty-one,") \
        + "scaffold,Tower,,,,,,,\r\n"
    response = client.post("/v1/rate-sheets/csv", headers=acme.headers,
                           json={"name": "Broken", "effective_from": "2026-02-01", "csv": bad})
    assert response.status_code == 400
    error = response.json["error"]
    assert error["code"] == "validation_failed"
    fields = [d["field"] for d in error["details"]]
    assert "row 3" in fields and "row 7" in fields
    assert any(d["field"] == "row 3" and d["message"].startswith("st:") for d in error["details"])
    assert "row 3" in error["message"]
    assert client.get("/v1/rate-sheets", headers=acme.headers).json["data"] == []


def test_csv_export_neutralises_formulas(client, acme):
    sheet = save(client, acme, labor=[{"classification": "=HYPERLINK(\"x\")", "st": 1}],
                 equipment=[{"description": "@SUM(A1)", "hourly": 2}],
                 materials=[{"description": "+1 bag", "unit_cost": 3},
                            {"description": "-cheap", "unit_cost": 4}])
    text = client.get(f"/v1/rate-sheets/{sheet['id']}/csv", headers=acme.headers).json["csv"]
    items = [row[1] for row in csv.reader(io.StringIO(text))][1:5]
    assert items == ["'=HYPERLINK(\"x\")", "'@SUM(A1)", "'+1 bag", "'-cheap"]


def test_rate_sheet_page_imports_and_downloads(app, client, acme):
    browser = sign_in(app, client, acme)
    project = acme.project()["id"]
    page = browser.get(f"/rates?project_id={project}").get_data(as_text=True)
    assert "No rate sheets yet." in page
    bad = browser.client.post("/rates/import", data={
        "csrf_token": browser.token, "project_id": project, "name": "Broken",
        "effective_from": "2026-02-01",
        "file": (io.BytesIO(GOOD_CSV.replace("35,210", "35,lots").encode()), "rates.csv")},
        content_type="multipart/form-data")
    assert bad.status_code == 422
    text = bad.get_data(as_text=True)
    assert "Row 4: daily:" in text and "equipment[" not in text
    assert client.get(sheets_url(project), headers=acme.headers).json["data"] == []
    good = browser.client.post("/rates/import", data={
        "csrf_token": browser.token, "project_id": project, "name": "Spring rates",
        "effective_from": "2026-03-01", "csv": GOOD_CSV})
    assert good.status_code == 200
    assert "Imported “Spring rates”, in force from 2026-03-01." in good.get_data(as_text=True)
    (sheet,) = client.get(sheets_url(project), headers=acme.headers).json["data"]
    download = browser.get(f"/rates/{sheet['id']}.csv")
    assert download.mimetype == "text/csv"
    assert "Journeyman Electrician,98.5,147.75,197" in download.get_data(as_text=True)


def test_a_sheet_is_deleted_from_the_page_and_tickets_keep_their_prices(app, client, acme):
    from tests.test_approval import create

    project = acme.project()["id"]
    sheet = save(client, acme, project)
    ticket = create(client, acme, worked_on="2026-03-02", equipment=[], materials=[],
                    labor=[{"trade": "Electrician", "classification": "Foreman", "hours": 1}])
    browser = sign_in(app, client, acme)
    deleted = browser.post(f"/rates/{sheet['id']}/delete")
    assert deleted.status_code == 200
    assert "Deleted “IBEW 2026 burdened”." in deleted.get_data(as_text=True)
    assert client.get(sheets_url(project), headers=acme.headers).json["data"] == []
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["total"] == 110.0
    assert browser.post(f"/rates/{sheet['id']}/delete").status_code == 404
    api = save(client, acme)
    gone = client.delete(f"/v1/rate-sheets/{api['id']}", headers=acme.headers)
    assert gone.status_code == 200 and gone.json["id"] == api["id"]
    assert client.get(f"/v1/rate-sheets/{api['id']}", headers=acme.headers).status_code == 404
    # The newest sheet's id, once deleted, names no later sheet (SQLite would reuse it).
    assert save(client, acme)["id"] != api["id"]
    assert client.get(f"/v1/rate-sheets/{api['id']}/csv", headers=acme.headers).status_code == 404


def test_a_csv_with_lone_carriage_returns_is_read_or_refused_never_a_500(client, acme):
    """Old Mac line ends (a bare \\r) read as line ends; text no CSV reader can take is a 400."""
    mac = GOOD_CSV.replace("\r\n", "\r")
    read = client.post("/v1/rate-sheets/csv", headers=acme.headers,
                       json={"name": "Mac", "effective_from": "2026-02-01", "csv": mac})
    assert read.status_code == 200, read.json
    odd = client.post("/v1/rate-sheets/csv", headers=acme.headers,
                      json={"name": "Odd", "effective_from": "2026-02-01", "csv": "\x81\r\x82"})
    assert odd.status_code == 400 and odd.json["error"]["code"] == "validation_failed"
