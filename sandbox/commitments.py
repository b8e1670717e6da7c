"""Procore's project directory and commitments: a project's vendors, its subcontracts (work order
contracts) and purchase orders, the company's change reasons, and the check a change item's
vendor and commitment must pass.

What was verified, and where (Procore's per-operation schemas as rendered in
TylerIlunga/procore-mcp-server data/endpoint-details, and a rendering of the v1.1 show answer's
types; see tests/contract/procore.json for each field's source):

- ``GET /rest/v1.0/projects/{project_id}/vendors`` (RestV10ProjectsProjectIdVendorsGet): paged,
  ``view``, ``filters[search]``, ``sort``; the items' fields are not spelled out: ``id`` and
  ``name`` as the change event detail shows a vendor.
- ``GET /rest/v1.0/work_order_contracts?project_id=`` (RestV10WorkOrderContractsGet) and
  ``GET /rest/v1.0/purchase_order_contracts?project_id=`` (RestV10PurchaseOrderContractsGet):
  ``project_id`` required, paged, ``filters[status]``; a purchase order lists ``id``,
  ``number``, ``title``, ``status`` and ``vendor {id, company}``. Subcontract statuses: Draft,
  Out For Bid, Out For Signature, Approved, Complete, Terminated, Void.
- ``GET /rest/v1.0/change_order_change_reasons?company_id=`` (RestV10ChangeOrderChangeReasonsGet):
  ``company_id`` required; ``{id, company_id, change_reason, show_in_select}``.
- A v1.1 change item (RestV11ChangeEventsPost, CE-RENDER) carries ``cost_impact.vendor.proposed``
  and ``cost_impact.contract.proposed``; the show answer gives them as ``{id, name}`` and
  ``{id, contract_type, number, status, title}``, so the request names each by ``id``. A v1.1
  event carries ``change_reason {id}`` and ``status {id}`` (create and PATCH); it has no event
  type (only ``change_type {id}``, a company's own list): v1.0 names it ``event_type`` (tbd,
  allowance, contingency, owner_change, transfer), beside ``change_event_status_id`` and
  ``change_order_change_reason_id`` (RestV10ChangeEventsPost, RestV10ChangeEventsIdGet).
"""
from __future__ import annotations

from typing import Any

import sqlite_utils
from flask import Blueprint, Response, g

from sandbox.common import ApiError, get_db, int_arg, paged
from sandbox.rest import company_project, guard

bp = Blueprint("sandbox_commitments", __name__, url_prefix="/rest")
bp.before_request(guard)

EVENT_TYPES = ("tbd", "allowance", "contingency", "owner_change", "transfer")

# The demo directory every seeded project gets: a vendor's name and its commitments as
# (kind, number, title, status). "Delta Drywall" has no vendor at all.
DIRECTORY = [
    ("Apex Concrete, Inc.", [("work_order", "SC-001", "Concrete subcontract", "Approved"),
                             ("work_order", "SC-002", "Curbs (terminated)", "Terminated")]),
    ("Bolt Electric LLC", [("work_order", "SC-003", "Electrical subcontract", "Approved"),
                           ("purchase_order", "PO-001", "Switchgear purchase order",
                            "Approved")]),
    ("Cedar Framing & Trim", [("work_order", "SC-004", "Framing subcontract", "Approved")]),
    ("Bayside Rentals", []),
]
CHANGE_REASONS = [("Client Request", 1), ("Design Development", 1), ("Field Condition", 1),
                  ("Existing Condition", 1), ("Allowance (retired)", 0)]


def seed_company(db: sqlite_utils.Database, company_id: int, now: str,
                 new_id: Any) -> dict[str, int]:
    """Insert the company's vendors and change reasons; the vendor ids by name."""
    vendors = {}
    for name, _commitments in DIRECTORY:
        vendors[name] = new_id(db)
        db.table("vendors").insert({"id": vendors[name], "company_id": company_id, "name": name,
                                    "created_at": now})
    db.table("change_reasons").insert_all(
        {"id": new_id(db), "company_id": company_id, "name": name, "show_in_select": shown}
        for name, shown in CHANGE_REASONS)
    return vendors


def seed_project(db: sqlite_utils.Database, company_id: int, project_id: int,
                 vendors: dict[str, int], now: str, new_id: Any) -> None:
    """Put the company's vendors in the project's directory, each with its commitments."""
    for name, commitments in DIRECTORY:
        db.table("project_vendors").insert({"project_id": project_id, "vendor_id": vendors[name]})
        db.table("commitments").insert_all(
            {"id": new_id(db), "company_id": company_id, "project_id": project_id, "kind": kind,
             "number": number, "title": title, "status": status, "vendor_id": vendors[name],
             "created_at": now, "updated_at": now}
            for kind, number, title, status in commitments)


def _vendor_rows(project_id: int) -> list[dict[str, Any]]:
    """The project's directory, by name."""
    return list(get_db().query(
        "SELECT v.* FROM vendors v JOIN project_vendors p ON p.vendor_id = v.id "
        "WHERE p.project_id = ? ORDER BY v.name", [project_id]))


@bp.get("/v1.0/projects/<int:project_id>/vendors")
def list_project_vendors(project_id: int) -> Response:
    """The vendors in the project's directory."""
    project = company_project(project_id)
    return paged([{"id": row["id"], "name": row["name"], "is_active": True,
                   "origin_id": None, "origin_code": None} for row in _vendor_rows(project["id"])])


def _commitments(kind: str) -> Response:
    """One kind of the project's commitments, each naming its vendor (vendor.company)."""
    project = company_project(int_arg("project_id", required=True))
    db = get_db()
    rows = list(db.query("SELECT * FROM commitments WHERE project_id = ? AND kind = ? "
                         "ORDER BY number", [project["id"], kind]))
    vendors = {row["id"]: row for row in _vendor_rows(project["id"])}
    return paged([{
        "id": row["id"], "number": row["number"], "title": row["title"], "status": row["status"],
        "vendor": {"id": row["vendor_id"], "company": vendors[row["vendor_id"]]["name"]}
        if row["vendor_id"] in vendors else None,
        "project": {"id": project["id"], "name": project["name"]}, "deleted_at": None,
        "executed": row["status"] == "Approved", "origin_id": None, "origin_code": None,
        "created_at": row["created_at"], "updated_at": row["updated_at"],
    } for row in rows])


@bp.get("/v1.0/work_order_contracts")
def list_work_order_contracts() -> Response:
    """The project's subcontracts."""
    return _commitments("work_order")


@bp.get("/v1.0/purchase_order_contracts")
def list_purchase_order_contracts() -> Response:
    """The project's purchase orders."""
    return _commitments("purchase_order")


@bp.get("/v1.0/change_order_change_reasons")
def list_change_reasons() -> Response:
    """The company's change order change reasons."""
    if int_arg("company_id", required=True) != g.company_id:
        raise ApiError(403, "App is not connected to this company")
    return paged([{"id": row["id"], "company_id": row["company_id"],
                   "change_reason": row["name"], "show_in_select": bool(row["show_in_select"])}
                  for row in get_db().query("SELECT * FROM change_reasons WHERE company_id = ? "
                                            "ORDER BY id", [g.company_id])])


def reason_json(db: sqlite_utils.Database, reason_id: int | None) -> dict[str, Any] | None:
    """A change event's change reason as v1.1 shows it, or None."""
    row = None if reason_id is None else db.table("change_reasons").get(reason_id)
    return None if row is None else {"id": row["id"], "change_reason": row["name"]}


def check_reason(db: sqlite_utils.Database, value: Any, field: str,
                 errors: dict[str, list[str]]) -> int | None:
    """The id of a change reason of the caller's company; a field error when it is not one."""
    if value in (None, ""):
        return None
    try:
        reason_id = int(value)
    except (TypeError, ValueError):
        errors.setdefault(field, []).append("is not a number")
        return None
    if next(db.query("SELECT id FROM change_reasons WHERE id = ? AND company_id = ?",
                     [reason_id, g.company_id]), None) is None:
        errors.setdefault(field, []).append(f"{reason_id} is not a change reason of this company")
        return None
    return reason_id


def _proposed_id(cost: dict[str, Any], key: str, field: str,
                 errors: dict[str, list[str]]) -> int | None:
    """cost_impact.<key>.proposed.id, or None when absent; a field error when malformed."""
    holder = cost.get(key)
    if holder is None:
        return None
    proposed = holder.get("proposed") if isinstance(holder, dict) else None
    value = proposed.get("id") if isinstance(proposed, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        errors.setdefault(f"{field}.cost_impact.{key}", []).append("must name an id")
        return None
    return value


def check_parties(db: sqlite_utils.Database, project_id: int, cost: dict[str, Any], field: str,
                  errors: dict[str, list[str]]) -> tuple[int | None, int | None]:
    """A change item's proposed vendor and commitment, or field errors as Procore gives them."""
    # Refused: a vendor outside the project's directory, a commitment of another project, a
    # Void or Terminated one, or one of another vendor than the line's. A commitment alone
    # brings its own vendor.
    vendor_id = _proposed_id(cost, "vendor", field, errors)
    contract_id = _proposed_id(cost, "contract", field, errors)
    if vendor_id is not None and next(db.query(
            "SELECT 1 FROM project_vendors WHERE project_id = ? AND vendor_id = ?",
            [project_id, vendor_id]), None) is None:
        errors.setdefault(f"{field}.cost_impact.vendor", []).append(
            f"{vendor_id} is not a vendor in this project's directory")
        return None, None
    if contract_id is None:
        return vendor_id, None
    contract = next(db.query("SELECT * FROM commitments WHERE id = ? AND project_id = ?",
                             [contract_id, project_id]), None)
    if contract is None:
        errors.setdefault(f"{field}.cost_impact.contract", []).append(
            f"{contract_id} is not a commitment of this project")
        return None, None
    if contract["status"] in ("Void", "Terminated"):
        errors.setdefault(f"{field}.cost_impact.contract", []).append(
            f"{contract['number']} is {contract['status'].lower()}")
        return None, None
    if vendor_id is not None and contract["vendor_id"] != vendor_id:
        errors.setdefault(f"{field}.cost_impact.contract", []).append(
            f"{contract['number']} belongs to another vendor than the line's")
        return None, None
    return contract["vendor_id"], contract_id
