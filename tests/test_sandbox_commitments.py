"""The sandbox's directory and commitments over real HTTP: vendors, subcontracts, purchase orders,
change reasons, lines proposed on a vendor's commitment (and refused on another's), a change
event's status, and its lines put on commitment and prime change orders."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
import requests

from tests.test_sandbox import Api

pytestmark = pytest.mark.live


@pytest.fixture
def api(sandbox_server, sandbox_company) -> Iterator[Api]:
    """A bare caller for this test's company."""
    caller = Api(sandbox_server.url, sandbox_company)
    yield caller
    caller.session.close()


def listed(api: Api, path: str, **params: Any) -> list[dict[str, Any]]:
    """A whole list answer (one page of 1000)."""
    answer = api.call("GET", path, params={"per_page": 1000, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def vendor(api: Api, project: int, name: str) -> dict[str, Any]:
    """A vendor of the project's directory by name."""
    return next(row for row in listed(api, f"/rest/v1.0/projects/{project}/vendors")
                if row["name"] == name)


def commitments(api: Api, project: int) -> list[dict[str, Any]]:
    """The project's subcontracts and purchase orders."""
    return [*listed(api, "/rest/v1.0/work_order_contracts", project_id=project),
            *listed(api, "/rest/v1.0/purchase_order_contracts", project_id=project)]


def commitment(api: Api, project: int, number: str) -> dict[str, Any]:
    """One of the project's commitments by number."""
    return next(row for row in commitments(api, project) if row["number"] == number)


def item(api: Api, project: int, description: str, vendor_id: int | None = None,
         contract_id: int | None = None) -> dict[str, Any]:
    """A change item on 02-200.L proposed on a vendor and commitment."""
    cost: dict[str, Any] = {"estimate": {"amount": 100.0, "calculation_strategy": "manual"}}
    if vendor_id is not None:
        cost["vendor"] = {"proposed": {"id": vendor_id}}
    if contract_id is not None:
        cost["contract"] = {"proposed": {"id": contract_id}}
    return {"description": description,
            "budget_code": {"id": api.budget_code(project, "02-200.L")["id"]},
            "cost_impact": cost}


def event_rows(db_path: str, project: int) -> int:
    """How many change events the project holds in the sandbox file."""
    with closing(sqlite3.connect(db_path)) as conn:
        return conn.execute("SELECT count(*) FROM change_events WHERE project_id = ?",
                            [project]).fetchone()[0]


def status_id(api: Api, project: int, name: str) -> int:
    """A change event status's id by name."""
    return next(row["id"] for row in listed(api, "/rest/v1.0/change_event/statuses",
                                            project_id=project) if row["name"] == name)


def control(api: Api, path: str, body: dict[str, Any]) -> requests.Response:
    """A /_sandbox switch call with the company's token."""
    return api.session.post(f"{api.url}/_sandbox{path}", json=body, timeout=10)


def test_every_seeded_project_has_the_demo_directory(api):
    """Apex with one live subcontract, Bolt with two commitments, Cedar with one, Bayside with
    none, no Delta Drywall; each commitment names its vendor; the lists are paged."""
    for index in (0, 1, 2):
        project = api.project(index)
        names = [row["name"] for row in listed(api, f"/rest/v1.0/projects/{project}/vendors")]
        assert names == ["Apex Concrete, Inc.", "Bayside Rentals", "Bolt Electric LLC",
                         "Cedar Framing & Trim"]
        by_vendor: dict[str, list[str]] = {}
        for row in commitments(api, project):
            by_vendor.setdefault(row["vendor"]["company"], []).append(
                f"{row['number']} {row['status']}")
        assert by_vendor == {
            "Apex Concrete, Inc.": ["SC-001 Approved", "SC-002 Terminated"],
            "Bolt Electric LLC": ["SC-003 Approved", "PO-001 Approved"],
            "Cedar Framing & Trim": ["SC-004 Approved"]}
    page = api.call("GET", f"/rest/v1.0/projects/{api.project()}/vendors",
                    params={"per_page": 2})
    assert len(page.json()) == 2 and page.headers["Total"] == "4"
    assert 'rel="next"' in page.headers["Link"]
    # Another project's id is not the caller's: 404 as Procore answers.
    assert api.call("GET", "/rest/v1.0/work_order_contracts",
                    params={"project_id": 1}).status_code == 404
    assert api.call("GET", "/rest/v1.0/purchase_order_contracts").status_code == 400


def test_change_reasons_are_the_companys(api):
    """Four reasons offered in selects, one retired; company_id is required and must match."""
    rows = listed(api, "/rest/v1.0/change_order_change_reasons",
                  company_id=api.company["company_id"])
    assert [(row["change_reason"], row["show_in_select"]) for row in rows] == [
        ("Client Request", True), ("Design Development", True), ("Field Condition", True),
        ("Existing Condition", True), ("Allowance (retired)", False)]
    assert api.call("GET", "/rest/v1.0/change_order_change_reasons").status_code == 400
    assert api.call("GET", "/rest/v1.0/change_order_change_reasons",
                    params={"company_id": 1}).status_code == 403


def test_lines_carry_their_vendor_and_commitment_and_the_event_its_reason(api):
    """What is sent comes back in the v1.1 and the v1.0 detail; a commitment alone brings its
    vendor; a line with neither stays without."""
    project = api.project()
    apex = vendor(api, project, "Apex Concrete, Inc.")
    contract = commitment(api, project, "SC-001")
    reason = listed(api, "/rest/v1.0/change_order_change_reasons",
                    company_id=api.company["company_id"])[2]
    created = api.create_event(project, change_reason={"id": reason["id"]}, change_items=[
        item(api, project, "Labor", apex["id"], contract["id"]),
        item(api, project, "Markup 10%", contract_id=contract["id"]),
        item(api, project, "Dump fees")])
    assert created.status_code == 201, created.text
    event = api.call("GET", f"/rest/v1.1/change_events/{created.json()['id']}",
                     params={"project_id": project}).json()
    assert event["change_reason"] == {"id": reason["id"], "change_reason": "Field Condition"}
    assert event["scope"] == "out_of_scope"
    costs = [line["cost_impact"] for line in event["change_items"]]
    for cost in costs[:2]:
        assert cost["vendor"]["proposed"] == {"id": apex["id"], "name": "Apex Concrete, Inc."}
        assert cost["contract"]["proposed"] == {
            "id": contract["id"], "contract_type": "work_order_contract", "number": "SC-001",
            "status": "Approved", "title": "Concrete subcontract"}
        assert cost["commitment"] is None
    assert costs[2]["vendor"] is None and costs[2]["contract"] is None
    v10 = api.call("GET", f"/rest/v1.0/change_events/{event['id']}",
                   params={"project_id": project}).json()
    assert v10["event_type"] == "tbd" and v10["event_scope"] == "out_of_scope"
    assert v10["change_order_change_reason"]["change_reason"] == "Field Condition"
    assert [(line["proposed_vendor_id"], line["proposed_contract_id"])
            for line in v10["change_event_line_items"]] == [
        (apex["id"], contract["id"]), (apex["id"], contract["id"]), (None, None)]
    assert v10["change_event_line_items"][0]["contract"]["number"] == "SC-001"


@pytest.mark.parametrize("case", ["other_vendor", "other_project", "unknown_vendor",
                                  "terminated", "unknown_reason"])
def test_a_line_on_a_commitment_it_cannot_have_is_refused(api, sandbox_server, case):
    """422 in Procore's shape (message and errors by field), and nothing written."""
    project, other = api.project(0), api.project(1)
    bolt = vendor(api, project, "Bolt Electric LLC")
    fields: dict[str, Any] = {}
    if case == "other_vendor":  # Apex's subcontract on a Bolt line
        line = item(api, project, "Labor", bolt["id"], commitment(api, project, "SC-001")["id"])
    elif case == "other_project":
        line = item(api, project, "Labor", bolt["id"], commitment(api, other, "SC-003")["id"])
    elif case == "unknown_vendor":
        line = item(api, project, "Labor", 12345)
    elif case == "terminated":
        line = item(api, project, "Labor", contract_id=commitment(api, project, "SC-002")["id"])
    else:
        line = item(api, project, "Labor")
        fields["change_reason"] = {"id": 12345}
    answer = api.create_event(project, change_items=[line], **fields)
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["message"].startswith("Validation failed: ")
    assert isinstance(body["errors"], dict) and body["errors"]
    assert event_rows(sandbox_server.db_path, project) == 0


def test_a_pm_moves_the_event_on_and_onto_change_orders(api):
    """Status through PATCH (v1.1 status, v1.0 change_event_status_id and event_type), and the
    switch that puts the lines on a commitment and a prime change order, shown per line."""
    project = api.project()
    bolt = vendor(api, project, "Bolt Electric LLC")
    sc, po = commitment(api, project, "SC-003"), commitment(api, project, "PO-001")
    event_id = api.create_event(project, change_items=[
        item(api, project, "Wire", bolt["id"], sc["id"]),
        item(api, project, "Breakers", bolt["id"], po["id"]),
        item(api, project, "Cleanup")]).json()["id"]
    patched = api.call("PATCH", f"/rest/v1.1/change_events/{event_id}",
                       params={"project_id": project},
                       json={"change_event": {"status": {"id": status_id(api, project,
                                                                         "Closed")}}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["status"]["name"] == "Closed"
    made = control(api, f"/change_events/{event_id}/change_orders",
                   {"kind": "commitment", "status": "approved"})
    assert made.status_code == 201, made.text
    assert sorted(order["contract_id"] for order in made.json()) == sorted([sc["id"], po["id"]])
    assert control(api, f"/change_events/{event_id}/change_orders",
                   {"kind": "prime", "status": "pending", "title": "Owner PCO"}).status_code == 201
    event = api.call("GET", f"/rest/v1.1/change_events/{event_id}",
                     params={"project_id": project}).json()
    on = [(line["cost_impact"]["commitment"] or {}).get("status") for line in
          event["change_items"]]
    assert on == ["approved", "approved", None]
    assert {line["cost_impact"]["commitment"]["contract_type"]
            for line in event["change_items"][:2]} == {"work_order_contract",
                                                       "purchase_order_contract"}
    assert [line["revenue_impact"]["change_order"]["title"] for line in event["change_items"]] \
        == ["Owner PCO"] * 3
    page = requests.get(f"{api.url}/{project}/project/change_events/events/{event_id}",
                        timeout=10).text
    assert "Bolt Electric LLC" in page and "SC-003 Electrical subcontract" in page
    assert "CCO-001 (approved)" in page and "PCO-001 (pending)" in page
    # Asked again, the same change order takes the new status.
    again = control(api, f"/change_events/{event_id}/change_orders",
                    {"kind": "commitment", "status": "void"}).json()
    assert {order["id"] for order in again} == {order["id"] for order in made.json()}
    v10 = api.call("PATCH", f"/rest/v1.0/change_events/{event_id}", json={
        "project_id": project, "change_event": {
            "change_event_status_id": status_id(api, project, "Void"),
            "event_type": "allowance"}}).json()
    assert v10["change_event_status"]["name"] == "Void" and v10["event_type"] == "allowance"
    assert [order["status"] for order in v10["commitment_potential_change_orders"]] == \
        ["void", "void"]
    assert [order["status"] for order in v10["potential_change_orders"]] == ["pending"]
    assert v10["change_event_line_items"][0]["statuses"]["commitment_pco_cost"] == "void"


def test_bad_status_and_switch_requests_are_refused(api):
    """A hidden or foreign status, an unknown event type, and a switch with no line to put on a
    commitment change order are refused; nothing changes."""
    project = api.project()
    event_id = api.create_event(project, change_items=[item(api, project, "Cleanup")]).json()["id"]
    path = f"/rest/v1.1/change_events/{event_id}"
    hidden = status_id(api, project, "Open (imported)")
    assert api.call("PATCH", path, params={"project_id": project}, json={
        "change_event": {"status": {"id": hidden}}}).status_code == 422
    assert api.call("PATCH", path, params={"project_id": project}, json={
        "change_event": {"status": {"id": 1}}}).status_code == 400
    assert api.call("PATCH", f"/rest/v1.0/change_events/{event_id}", json={
        "project_id": project, "change_event": {"event_type": "gift"}}).status_code == 422
    none = control(api, f"/change_events/{event_id}/change_orders",
                   {"kind": "commitment", "status": "approved"})
    assert none.status_code == 422 and "commitment" in none.json()["message"]
    assert control(api, f"/change_events/{event_id}/change_orders",
                   {"kind": "owner"}).status_code == 422
    assert control(api, "/change_events/1/change_orders",
                   {"kind": "prime"}).status_code == 404
    event = api.call("GET", path, params={"project_id": project}).json()
    assert event["status"]["name"] == "Open"
    assert event["change_items"][0]["revenue_impact"]["change_order"] is None


def test_a_deleted_event_shows_in_the_recycle_bin(api):
    """Deleted, it leaves the list, still shows (in_recycle_bin, deleted_at) in v1.1 and v1.0,
    and can no longer be changed."""
    project = api.project()
    event_id = api.create_event(project, change_items=[item(api, project, "Cleanup")]).json()["id"]
    path = f"/rest/v1.1/change_events/{event_id}"
    assert api.call("DELETE", path, params={"project_id": project}).status_code == 204
    shown = api.call("GET", path, params={"project_id": project}).json()
    assert shown["in_recycle_bin"] is True and shown["deleted_at"]
    assert api.call("GET", f"/rest/v1.0/change_events/{event_id}",
                    params={"project_id": project}).json()["deleted_at"]
    assert listed(api, "/rest/v1.1/change_events", project_id=project) == []
    assert api.call("PATCH", path, params={"project_id": project}, json={
        "change_event": {"title": "x"}}).status_code == 404
