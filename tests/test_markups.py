"""Markups per project, in a stated order, compounding or not, as their own lines and line items."""
from __future__ import annotations

import pytest

from tests.test_approval import act, budget_code_id, create, remote
from tests.test_review_pages import sign_in

pytestmark = pytest.mark.live


def markup(kind: str, percent: float, applies_to: list[str], code: int, compound: bool = False,
           **extra) -> dict:
    return {"kind": kind, "percent": percent, "applies_to": applies_to, "compound": compound,
            "budget_code_id": code, **extra}


def set_markups(client, tenant, project_id: str, items: list[dict]):
    return client.put(f"/v1/projects/{project_id}/markups", headers=tenant.headers,
                      json={"markups": items})


@pytest.fixture
def codes(client, acme) -> dict[str, int]:
    project = acme.project()["id"]
    return {flat: budget_code_id(client, acme, project, flat)
            for flat in ("01-310.O", "01-740.O", "01-500.O", "03-100.O")}


def stated_order(codes: dict[str, int], compound: bool) -> list[dict]:
    return [markup("overhead", 10, ["labor", "materials"], codes["01-310.O"]),
            markup("profit", 10, ["labor", "equipment", "materials"], codes["01-740.O"],
                   compound=compound, name="Profit (GC cap 10 %)"),
            markup("bond", 1, ["labor", "equipment", "materials"], codes["01-500.O"],
                   compound=compound),
            markup("tax", 8.25, ["materials"], codes["03-100.O"])]


def test_markups_apply_in_order_compounding_and_reach_the_change_event(client, acme, app, codes):
    project = acme.project()["id"]
    saved = set_markups(client, acme, project, stated_order(codes, compound=True))
    assert saved.status_code == 200, saved.json
    assert [m["name"] for m in saved.json["markups"]] == \
        ["Overhead", "Profit (GC cap 10 %)", "Bond", "Tax"]
    assert saved.json["markups"][0]["budget_code"] == "01-310.O"
    assert client.get(f"/v1/projects/{project}/markups", headers=acme.headers).json == saved.json
    # Lines: labor 3 x 8 x 55.50 = 1332.00, equipment 4 x 95 = 380.00, gravel 3 x 41.25 = 123.75.
    ticket = create(client, acme)
    amounts = [(m["name"], m["base"], m["amount"]) for m in ticket["markups"]]
    assert amounts == [
        ("Overhead", 1455.75, 145.58),               # 10 % of labor and materials: 145.575
        ("Profit (GC cap 10 %)", 1981.33, 198.13),   # of all lines plus overhead: 198.133
        ("Bond", 2179.46, 21.79),                    # of all lines plus overhead and profit
        ("Tax", 123.75, 10.21)]                      # 8.25 % of materials only: 10.209375
    assert ticket["total"] == round(1835.75 + 145.58 + 198.13 + 21.79 + 10.21, 2) == 2211.46
    markup_routes = ticket["routing"][3:]
    assert [r["kind"] for r in markup_routes] == ["markup"] * 4
    assert [r["budget_code"] for r in markup_routes] == ["01-310.O", "01-740.O", "01-500.O", "03-100.O"]
    assert all(r["exact"] and not r["needs_review"] for r in markup_routes)

    approved = act(client, acme, ticket["id"], "approve", {"require_exact": True})
    assert approved.status_code == 200, approved.json
    event = remote(app, acme).get_change_event(int(project), approved.json["external"]["change_event_id"])
    items = [(i["budget_code"]["flat_code"], float(i["cost_impact"]["estimate"]["amount"]))
             for i in event["change_items"]]
    assert items == [("02-200.L", 1332.0), ("02-200.E", 380.0), ("02-200.M", 123.75),
                     ("01-310.O", 145.58), ("01-740.O", 198.13), ("01-500.O", 21.79),
                     ("03-100.O", 10.21)]
    assert event["change_items"][3]["description"].startswith("Overhead 10 % on labor, materials")
    assert approved.json["total"] == 2211.46


def test_markups_without_compounding_and_earlier_tickets_keep_theirs(client, acme, codes):
    project = acme.project()["id"]
    assert set_markups(client, acme, project, stated_order(codes, compound=False)).status_code == 200
    ticket = create(client, acme)
    assert [(m["base"], m["amount"]) for m in ticket["markups"]] == [
        (1455.75, 145.58), (1835.75, 183.58), (1835.75, 18.36), (123.75, 10.21)]
    assert ticket["total"] == round(1835.75 + 145.58 + 183.58 + 18.36 + 10.21, 2)
    assert set_markups(client, acme, project, []).status_code == 200
    assert client.get(f"/v1/tickets/{ticket['id']}", headers=acme.headers).json["total"] == \
        ticket["total"]
    assert create(client, acme)["markups"] == []


def test_markup_budget_codes_are_checked(client, acme, rival, codes):
    project = acme.project()["id"]
    other = budget_code_id(client, rival, rival.project()["id"], "01-310.O")
    response = set_markups(client, acme, project, [
        markup("overhead", 10, ["labor"], codes["01-310.O"]),
        markup("profit", 5, ["labor"], other)])
    assert response.status_code == 409 and response.json["error"]["code"] == "budget_code_not_found"
    assert [d["field"] for d in response.json["error"]["details"]] == ["markups[1].budget_code_id"]
    assert client.get(f"/v1/projects/{project}/markups", headers=acme.headers).json["markups"] == []
    bad = set_markups(client, acme, project, [markup("fee", 10, [], codes["01-310.O"])])
    assert {d["field"] for d in bad.json["error"]["details"]} == \
        {"markups[0].kind", "markups[0].applies_to"}


def test_markups_are_set_on_the_page_and_shown_on_the_ticket(app, client, acme, codes):
    project = acme.project()["id"]
    browser = sign_in(app, client, acme)
    page = browser.get(f"/rates?project_id={project}").get_data(as_text=True)
    assert "Markups" in page and "01-310.O" in page
    form = {"project_id": project,
            "markups[0].kind": "overhead", "markups[0].percent": "10",
            "markups[0].applies_to": ["labor", "materials"],
            "markups[0].budget_code_id": str(codes["01-310.O"]),
            "markups[1].kind": "profit", "markups[1].percent": "",   # left empty: no row
            "markups[2].kind": "profit", "markups[2].percent": "10", "markups[2].compound": "on",
            "markups[2].applies_to": ["labor", "equipment", "materials"],
            "markups[2].budget_code_id": ""}
    refused = browser.client.post("/rates/markups", data={"csrf_token": browser.token, **form})
    assert refused.status_code == 422
    assert "Markup 2: budget code" in refused.get_data(as_text=True)
    assert 'name="markups[1].compound" checked' in refused.get_data(as_text=True)  # kept as sent
    assert client.get(f"/v1/projects/{project}/markups", headers=acme.headers).json["markups"] == []
    form["markups[2].budget_code_id"] = str(codes["01-740.O"])
    saved = browser.client.post("/rates/markups", data={"csrf_token": browser.token, **form})
    assert saved.status_code == 200 and "Markups saved." in saved.get_data(as_text=True)
    stored = client.get(f"/v1/projects/{project}/markups", headers=acme.headers).json["markups"]
    assert [(m["kind"], m["compound"], m["applies_to"]) for m in stored] == [
        ("overhead", False, ["labor", "materials"]),
        ("profit", True, ["labor", "equipment", "materials"])]
    ticket = create(client, acme)
    text = browser.get(f"/tickets/{ticket['id']}").get_data(as_text=True)
    assert "markup: Overhead 10 % on labor, materials: 1455.75 × 10 %" in text
    assert "$145.58" in text
