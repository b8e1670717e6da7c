"""ProcoreClient against the live sandbox: a project's vendors and commitments, change reasons, a
change event written on the sub's commitment, and where a written record stands in Procore."""
from __future__ import annotations

import datetime
import sqlite3
from contextlib import closing
from decimal import Decimal
from typing import Any

import pytest

from services.project_system import (
    ChangeEventDraft,
    ChangeEventLine,
    ChangeOrderState,
    ManpowerDraft,
    ProcoreClient,
    ProjectSystemError,
    RecordState,
)
from tests.contract import problems
from tests.plugins.sandbox import ExchangeRecorder, SandboxControl
from tests.test_procore_client import budget_code_id, calls_to, event_count, project_id

pytestmark = pytest.mark.live


def commitment(client: ProcoreClient, project: int, number: str) -> Any:
    """One of the project's commitments by number."""
    return next(row for row in client.list_commitments(project) if row.number == number)


def line(client: ProcoreClient, project: int, description: str, vendor_id: int | None,
         contract_id: int | None) -> ChangeEventLine:
    """A labor line on 02-200.L proposed on a vendor and commitment."""
    return ChangeEventLine(description, budget_code_id(client, project, "02-200.L"), "labor",
                           Decimal("8"), Decimal("85"), Decimal("680.00"), "hours",
                           vendor_id=vendor_id, contract_id=contract_id)


def draft(lines: tuple[ChangeEventLine, ...], **fields: Any) -> ChangeEventDraft:
    """A change event of these lines."""
    return ChangeEventDraft(**{"origin_id": "ticket-77", "title": "T&M 77: extra conduit",
                               "description": "Owner moved the panel.", "lines": lines,
                               **fields})


def v10_event(db_path: str, event_id: int) -> dict[str, Any]:
    """The event's type and change reason as the sandbox keeps them."""
    with closing(sqlite3.connect(db_path)) as conn:
        conn.row_factory = sqlite3.Row
        return dict(conn.execute("SELECT event_type, change_reason_id, scope FROM change_events "
                                 "WHERE id = ?", [event_id]).fetchone())


def test_reads_the_directory_commitments_and_reasons(procore_client, sandbox_company):
    """Vendors by name; commitments of both kinds with their vendor, the terminated one left
    out; the reasons offered in selects; every list followed page by page."""
    project = project_id(sandbox_company)
    procore_client.per_page = 1
    vendors = {vendor.name: vendor.id for vendor in procore_client.list_vendors(project)}
    assert sorted(vendors) == ["Apex Concrete, Inc.", "Bayside Rentals", "Bolt Electric LLC",
                               "Cedar Framing & Trim"]
    assert calls_to(procore_client, "GET", f"/projects/{project}/vendors") == 4
    found = sorted((row.vendor_name, row.kind, row.number, row.status)
                   for row in procore_client.list_commitments(project))
    assert found == [
        ("Apex Concrete, Inc.", "work_order", "SC-001", "Approved"),
        ("Bolt Electric LLC", "purchase_order", "PO-001", "Approved"),
        ("Bolt Electric LLC", "work_order", "SC-003", "Approved"),
        ("Cedar Framing & Trim", "work_order", "SC-004", "Approved")]
    assert all(row.vendor_id == vendors[row.vendor_name]
               for row in procore_client.list_commitments(project))
    assert [reason.name for reason in procore_client.list_change_reasons(project)] == [
        "Client Request", "Design Development", "Field Condition", "Existing Condition"]


def test_writes_each_line_on_the_subs_commitment(procore_client, sandbox_company,
                                                 sandbox_server):
    """Vendor and commitment on every line, the event out of scope with its change reason and
    event type, each call within Procore's contract; read back from the sandbox."""
    recorder = ExchangeRecorder()
    recorder.attach(procore_client)
    project = project_id(sandbox_company)
    apex = commitment(procore_client, project, "SC-001")
    reason = procore_client.list_change_reasons(project)[0]
    record = procore_client.create_change_event(project, draft(
        (line(procore_client, project, "Labor", apex.vendor_id, apex.id),
         line(procore_client, project, "Markup 10%", apex.vendor_id, apex.id),
         line(procore_client, project, "Dump fees", None, None)),
        event_type="owner_change", change_reason_id=reason.id))
    event = procore_client.get_change_event(project, record.id)
    assert [((item["cost_impact"]["vendor"] or {}).get("proposed", {}).get("id"),
             (item["cost_impact"]["contract"] or {}).get("proposed", {}).get("id"))
            for item in event["change_items"]] == [(apex.vendor_id, apex.id)] * 2 + [(None, None)]
    assert event["scope"] == "out_of_scope"
    assert event["change_reason"]["change_reason"] == "Client Request"
    assert v10_event(sandbox_server.db_path, record.id)["event_type"] == "owner_change"
    assert [problem for exchange in recorder.exchanges for problem in problems(exchange)] == []
    # The default type costs no call.
    before = calls_to(procore_client, "PATCH", "/change_events/")
    plain = procore_client.create_change_event(project, draft(
        (line(procore_client, project, "Labor", None, None),), origin_id="ticket-78"))
    assert calls_to(procore_client, "PATCH", "/change_events/") == before
    assert v10_event(sandbox_server.db_path, plain.id) == {
        "event_type": "tbd", "change_reason_id": None, "scope": "out_of_scope"}


def test_a_line_on_another_vendors_commitment_is_refused(procore_client, sandbox_company,
                                                         sandbox_server):
    """Procore's 422 comes back as a ProjectSystemError naming the commitment; nothing written."""
    project = project_id(sandbox_company)
    bolt = commitment(procore_client, project, "SC-003")
    apex = commitment(procore_client, project, "SC-001")
    with pytest.raises(ProjectSystemError) as refused:
        procore_client.create_change_event(project, draft(
            (line(procore_client, project, "Labor", bolt.vendor_id, apex.id),)))
    assert refused.value.status == 422 and "SC-001" in str(refused.value)
    assert event_count(sandbox_server.db_path, project) == 0


def test_reads_where_a_change_event_stands(procore_client, sandbox_company, sandbox_server):
    """Open with no change order; Closed and on a commitment and a prime change order, each
    once; Void; in the recycle bin; gone altogether."""
    control = SandboxControl(sandbox_server, sandbox_company)
    recorder = ExchangeRecorder()
    recorder.attach(procore_client)
    project = project_id(sandbox_company)
    bolt_sc, bolt_po = (commitment(procore_client, project, "SC-003"),
                        commitment(procore_client, project, "PO-001"))
    record = procore_client.create_change_event(project, draft(
        (line(procore_client, project, "Wire", bolt_sc.vendor_id, bolt_sc.id),
         line(procore_client, project, "More wire", bolt_sc.vendor_id, bolt_sc.id),
         line(procore_client, project, "Breakers", bolt_po.vendor_id, bolt_po.id))))
    state = procore_client.read_record_state(project, "change_event", record.id)
    assert state == RecordState(status="Open", deleted=False, change_orders=())

    control.set_change_event_status(project, record.id, "Closed")
    control.put_on_change_orders(record.id, "commitment", "approved", title="Bolt CCO")
    control.put_on_change_orders(record.id, "prime", "pending", title="Owner PCO")
    state = procore_client.read_record_state(project, "change_event", record.id)
    assert state.status == "Closed" and not state.deleted
    assert sorted(state.change_orders, key=lambda order: (order.kind, order.number or "")) == [
        ChangeOrderState("commitment", "CCO-001", "Bolt CCO", "approved"),
        ChangeOrderState("commitment", "CCO-002", "Bolt CCO", "approved"),
        ChangeOrderState("prime", "PCO-001", "Owner PCO", "pending")]

    control.set_change_event_status(project, record.id, "Void")
    assert procore_client.read_record_state(project, "change_event", record.id).status == "Void"
    procore_client.delete_change_event(project, record.id)
    recycled = procore_client.read_record_state(project, "change_event", record.id)
    assert recycled.deleted and recycled.status == "Void"
    assert procore_client.read_record_state(project, "change_event", 123) == RecordState(
        status=None, deleted=True)
    assert [problem for exchange in recorder.exchanges for problem in problems(exchange)] == []
    control.close()


def test_reads_where_a_manpower_entry_stands(procore_client, sandbox_company):
    """Its status while it exists; deleted once it is gone; an unknown kind is a mistake."""
    project = project_id(sandbox_company, 2)
    record = procore_client.create_manpower_log(project, ManpowerDraft(
        origin_id="ticket-5", date=datetime.date.today(), num_workers=2,
        num_hours=Decimal("8"), notes="Cleanup"))
    assert procore_client.read_record_state(project, "manpower_log", record.id) == RecordState(
        status="approved", deleted=False)
    procore_client.delete_manpower_log(project, record.id)
    assert procore_client.read_record_state(project, "manpower_log", record.id).deleted
    with pytest.raises(ValueError):
        procore_client.read_record_state(project, "rfi", record.id)


def test_an_event_type_refused_leaves_the_event_written(procore_client, sandbox_company,
                                                        sandbox_control, sandbox_server, caplog):
    """The type is set after the event is written: when that call fails, the written event is
    still answered (once, at Procore's default type) and the failure is logged."""
    project = project_id(sandbox_company)
    sandbox_control.fault(503, match="/rest/v1.0/change_events/", methods=["PATCH"])
    record = procore_client.create_change_event(project, draft(
        (line(procore_client, project, "Labor", None, None),), event_type="allowance"))
    assert event_count(sandbox_server.db_path, project) == 1
    assert v10_event(sandbox_server.db_path, record.id)["event_type"] == "tbd"
    assert "kept its default type" in caplog.text
    assert sandbox_control.faults() == []
