"""The ticket log as CSV, from the API and from the queue, safe to open in a spreadsheet."""
from __future__ import annotations

import csv
import html
import io
import re

import pytest

from services.tickets.export import columns, safe_cell
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live


def rows_of(text: str) -> list[dict[str, str]]:
    """The CSV's rows as dicts, checking the byte-order mark and the header first."""
    assert text.startswith("\ufeff")
    reader = csv.reader(io.StringIO(text[1:]))
    header = columns()
    assert tuple(next(reader)) == header
    return [dict(zip(header, row, strict=True)) for row in reader]


def make(client, tenant, description: str, **extra) -> dict:
    body = {"project_id": tenant.project()["id"], "description": description, "reason": "r",
            "directed_by": "Sam", **extra}
    response = client.post("/v1/tickets", headers=tenant.headers, json=body)
    assert response.status_code == 200, response.json
    return response.json


def test_export_is_one_row_per_line_with_amounts_and_budget_codes(client, acme, rival):
    hostile = make(client, acme, "=HYPERLINK(\"http://evil.example\",\"click\")",
                   directed_by="@SUM(A1:A9)", captured_by="+1 555 0100",
                   labor=[{"trade": "-2+3 Laborer", "hours": 8, "workers": 3, "rate": 55.5,
                           "costCode": "02-200"},
                          {"trade": "Cleaner", "hours": 2, "rate": 10, "costCode": "01-500"}],
                   materials=[{"description": "Gravel", "quantity": 3, "unitCost": 41.25,
                               "costCode": "02-200"}])
    plain = make(client, acme, "Hauled debris", equipment=[
        {"description": "Dump truck", "hours": 2, "rate": 90, "costCode": "02-200"}])
    empty = make(client, acme, "Nothing priced")
    make(client, rival, "Not yours", labor=[{"trade": "Laborer", "hours": 1}])
    assert client.post(f"/v1/tickets/{plain['id']}/reject", headers=acme.headers).status_code == 200

    answer = client.get("/v1/tickets/export.csv", headers=acme.headers)
    assert answer.status_code == 200 and answer.mimetype == "text/csv"
    assert re.fullmatch(r'attachment; filename="tickets-\d{4}-\d{2}-\d{2}\.csv"',
                        answer.headers["Content-Disposition"])
    assert "RateLimit-Remaining" in answer.headers
    rows = rows_of(answer.get_data(as_text=True))
    assert [(r["ticket_id"], r["line"]) for r in rows] == [
        (empty["id"], ""), (plain["id"], "1"),
        (hostile["id"], "1"), (hostile["id"], "2"), (hostile["id"], "3")]
    first = rows[2]
    assert first["description"] == "'=HYPERLINK(\"http://evil.example\",\"click\")"
    assert first["directed_by"] == "'@SUM(A1:A9)" and first["captured_by"] == "'+1 555 0100"
    assert first["line_description"] == "'-2+3 Laborer — 3 × 8 h"
    assert (first["kind"], first["quantity"], first["unit_cost"], first["amount"]) == \
        ("labor", "24", "55.5", "1332")
    assert (first["budget_code"], first["cost_type"], first["exact"], first["needs_review"]) == \
        ("02-200.L", "labor", "true", "false")
    assert first["ticket_total"] == "1475.75" and first["status"] == "submitted"
    assert (rows[3]["budget_code"], rows[3]["exact"]) == ("01-500.O", "false")
    assert rows[3]["routing_reason"].startswith("cost code 01-500 has no labor budget code")
    assert (rows[4]["kind"], rows[4]["amount"], rows[4]["budget_code"]) == \
        ("materials", "123.75", "02-200.M")
    assert rows[1]["status"] == "rejected" and rows[1]["budget_code"] == "02-200.E"
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@")), row

    rejected = rows_of(client.get("/v1/tickets/export.csv?status=rejected&q=DEBRIS",
                                  headers=acme.headers).get_data(as_text=True))
    assert [r["ticket_id"] for r in rejected] == [plain["id"]]
    other = rows_of(client.get("/v1/tickets/export.csv", headers=rival.headers)
                    .get_data(as_text=True))
    assert [r["description"] for r in other] == ["Not yours"]
    assert client.get("/v1/tickets/export.csv").status_code == 401
    bad = client.get("/v1/tickets/export.csv?status=lost", headers=acme.headers)
    assert bad.status_code == 400 and bad.json["error"]["details"][0]["field"] == "status"


def test_written_ticket_exports_the_routing_it_was_written_with(client, acme):
    ticket = make(client, acme, "Trench", labor=[{"trade": "Laborer", "hours": 1, "rate": 50,
                                                  "costCode": "02-200"}])
    written = client.post(f"/v1/tickets/{ticket['id']}/approve", headers=acme.headers, json={})
    assert written.status_code == 200, written.json
    (row,) = rows_of(client.get("/v1/tickets/export.csv?status=written", headers=acme.headers)
                     .get_data(as_text=True))
    assert row["approved_by"] == f"key:tests ({acme.prefix})" and row["record_number"]
    assert row["budget_code"] == "02-200.L"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", row["approved"])


def test_queue_button_exports_the_current_filter(app, client, acme):
    make(client, acme, "Moved the trench", labor=[{"trade": "Laborer", "hours": 1, "rate": 5}])
    rejected = make(client, acme, "Patched the slab")
    client.post(f"/v1/tickets/{rejected['id']}/reject", headers=acme.headers)
    browser = sign_in(app, client, acme)
    page = browser.get(f"/queue?status=rejected&project_id={acme.project()['id']}&q=slab")
    link = html.unescape(re.search(r'href="(/queue/export\.csv[^"]*)"',
                                   page.get_data(as_text=True)).group(1))
    assert "status=rejected" in link and "q=slab" in link
    answer = browser.get(link)
    assert answer.status_code == 200 and answer.mimetype == "text/csv"
    assert [r["description"] for r in rows_of(answer.get_data(as_text=True))] == \
        ["Patched the slab"]
    everything = rows_of(browser.get("/queue/export.csv?status=all").get_data(as_text=True))
    assert len(everything) == 2
    assert app.test_client().get("/queue/export.csv").status_code in (302, 401)


def test_safe_cell_neutralises_formula_starts_only():
    assert [safe_cell(v) for v in ("=1+1", "+1", "-1", "@x", "\tx", "plain", None, True)] == \
        ["'=1+1", "'+1", "'-1", "'@x", "'\tx", "plain", "", "true"]
