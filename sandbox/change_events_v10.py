"""Procore change events in v1.0: the show answer with each line's vendor, commitment and the
change orders it is on, and PATCH (multipart attachments, status, event type, change reason)."""
from __future__ import annotations

from typing import Any

import sqlite_utils
from flask import Blueprint, Response, jsonify, request

from sandbox.change_events import (
    attachments_json,
    chosen_status,
    event_items,
    find_event,
    service_user,
    store_attachments,
    validation_failed,
)
from sandbox.change_orders import Parties
from sandbox.commitments import EVENT_TYPES, check_reason
from sandbox.common import ApiError, as_number, form_object, get_db, int_arg
from sandbox.rest import company_project, guard, require_tool
from sandbox.store import iso_now, write_transaction
from sandbox.uploads import completed_uploads, store_uploads

bp = Blueprint("sandbox_change_events_v10", __name__, url_prefix="/rest")
bp.before_request(guard)

SCOPES = ("tbd", "in_scope", "out_of_scope")


def change_event_v10(db: sqlite_utils.Database, event: dict[str, Any]) -> dict[str, Any]:
    """A change event in the v1.0 shape (show and PATCH answers)."""
    status = db.table("change_event_statuses").get(event["status_id"])
    reason = None if event["change_reason_id"] is None else db.table("change_reasons").get(
        event["change_reason_id"])
    digits = "".join(char for char in event["number"] if char.isdigit())
    items = event_items(db, event)
    parties = Parties(db, event, items)
    return {
        "id": event["id"], "number": int(digits) if digits else None,
        "alphanumeric_number": event["number"], "origin_id": event["origin_id"],
        "origin_data": event["origin_data"], "title": event["title"],
        "description": event["description"], "status": status["mapped_to_status"],
        "project_id": event["project_id"], "created_at": event["created_at"],
        "updated_at": event["updated_at"], "deleted_at": event["deleted_at"],
        "event_type": event["event_type"] or "tbd", "event_scope": event["scope"],
        "change_event_status": {"id": status["id"], "name": status["name"],
                                "mapped_to_status": status["mapped_to_status"],
                                "show_in_select": bool(status["show_in_select"])},
        "change_order_change_reason": None if reason is None else {
            "id": reason["id"], "company_id": reason["company_id"],
            "change_reason": reason["name"], "show_in_select": bool(reason["show_in_select"])},
        "created_by": service_user(db, event["company_id"]),
        "attachments": attachments_json(db, "change_event", event["id"]),
        "change_event_line_items": [{
            "id": item["id"], "event_id": event["id"], "description": item["description"],
            "budget_code": item["budget_code"], "uom": item["unit_of_measure"],
            "estimated_cost_amount": item["amount"],
            "estimated_cost_quantity": as_number(item["quantity"]),
            "estimated_cost_unit_cost": as_number(item["unit_cost"]),
            "estimated_cost_calculation_strategy": item["calculation_strategy"],
            **parties.v10_fields(item),
        } for item in items],
        "commitment_potential_change_orders": parties.v10_orders("commitment"),
        "potential_change_orders": parties.v10_orders("prime"),
        "currency_configuration": {"currency_iso_code": "USD"},
    }


@bp.get("/v1.0/change_events/<int:event_id>")
def show_change_event(event_id: int) -> Response:
    """One change event of the project, v1.0 shape; one in the recycle bin shows its deleted_at."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events")
    db = get_db()
    return jsonify(change_event_v10(db, find_event(db, project["id"], event_id, recycled=True)))


def _field_changes(db: sqlite_utils.Database, fields: dict[str, Any]) -> dict[str, Any]:
    """The event's own columns a v1.0 PATCH sets: event type, scope, status, change reason."""
    errors: dict[str, list[str]] = {}
    changes: dict[str, Any] = {}
    if "event_type" in fields:
        if fields["event_type"] not in EVENT_TYPES:
            errors["event_type"] = ["is not included in the list"]
        changes["event_type"] = fields["event_type"]
    if "event_scope" in fields:
        if fields["event_scope"] not in SCOPES:
            errors["event_scope"] = ["is not included in the list"]
        changes["scope"] = fields["event_scope"]
    if "change_order_change_reason_id" in fields:
        changes["change_reason_id"] = check_reason(
            db, fields["change_order_change_reason_id"], "change_order_change_reason_id", errors)
    if errors:
        raise validation_failed(errors)
    if fields.get("change_event_status_id") not in (None, ""):
        try:
            wanted = int(fields["change_event_status_id"])
        except (TypeError, ValueError):
            raise validation_failed({"change_event_status_id": ["is not a number"]}) from None
        changes["status_id"] = chosen_status(db, wanted)["id"]
    return changes


@bp.patch("/v1.0/change_events/<int:event_id>")
def update_change_event(event_id: int) -> Response:
    """v1.0 update: project_id and change_event are required, also beside attachments[] files."""
    db = get_db()
    if request.mimetype == "multipart/form-data":
        project_arg = request.form.get("project_id") or request.args.get("project_id")
        event_fields: Any = form_object("change_event")
        refs = None
    else:
        body = request.get_json(silent=True)
        body = body if isinstance(body, dict) else {}
        project_arg = body.get("project_id") or request.args.get("project_id")
        event_fields = body.get("change_event")
        refs = event_fields.get("attachments_by_uuid") if isinstance(event_fields, dict) else None
    if project_arg in (None, ""):
        raise ApiError(400, "param is missing or the value is empty: project_id")
    if not event_fields or not isinstance(event_fields, dict):
        raise ApiError(400, "param is missing or the value is empty: change_event")
    try:
        project = company_project(int(project_arg))
    except (TypeError, ValueError):
        raise ApiError(400, "project_id must be an integer") from None
    require_tool(project, "change_events")
    event = find_event(db, project["id"], event_id)
    errors: dict[str, list[str]] = {}
    uploads = completed_uploads(db, refs, errors)
    if errors:
        raise validation_failed(errors)
    changes = _field_changes(db, event_fields)
    files = [upload for upload in request.files.getlist("attachments[]") if upload.filename]
    if files or uploads or changes:
        with write_transaction(db):
            store_attachments(db, "change_event", event["id"], files)
            store_uploads(db, "change_event", event["id"], uploads)
            db.table("change_events").update(event["id"], {**changes, "updated_at": iso_now()})
        event = find_event(db, project["id"], event_id)
    return jsonify(change_event_v10(db, event))
