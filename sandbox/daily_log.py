"""Procore daily log manpower entries: create (JSON or multipart), list by date, show."""
from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import sqlite_utils
from flask import Blueprint, Response, g, jsonify, request

from sandbox.change_events import attachments_json, service_user, store_attachments
from sandbox.common import (
    ApiError,
    decimal_text,
    form_object,
    get_db,
    json_body,
    paged,
    parse_decimal,
)
from sandbox.rest import company_project, guard, require_tool
from sandbox.store import iso_now, next_id, write_transaction

bp = Blueprint("sandbox_daily_log", __name__, url_prefix="/rest/v1.0/projects/<int:project_id>")
bp.before_request(guard)

MAX_NOTES = 10_000
STATUSES = ("approved", "pending", "all")


def manpower_json(db: sqlite_utils.Database, row: dict[str, Any]) -> dict[str, Any]:
    """A manpower log entry in the v1.0 shape; man_hours is workers x hours, as a string."""
    hours = Decimal(row["num_hours"])
    return {
        "id": row["id"], "created_at": row["created_at"], "updated_at": row["updated_at"],
        "date": row["date"], "datetime": None,
        "man_hours": format(hours * row["num_workers"], "f"), "notes": row["notes"],
        "num_workers": row["num_workers"], "num_hours": row["num_hours"],
        "position": row["position"], "status": row["status"] or "approved", "vendor": None,
        "user": None,
        "contact": None, "cost_code": None, "created_by": service_user(db, row["company_id"]),
        "location": None, "attachments": attachments_json(db, "manpower_log", row["id"]),
        "trade": None, "custom_fields": {},
        "permissions": {"can_update": True, "can_delete": True},
    }


def _parse_date(raw: Any, field: str) -> str:
    """A YYYY-MM-DD date; 400 when missing or malformed."""
    if not isinstance(raw, str) or not raw:
        raise ApiError(400, f"{field} is required", {field: ["can't be blank"]})
    try:
        return date.fromisoformat(raw).isoformat()
    except ValueError:
        raise ApiError(400, f"{field} must be a date (YYYY-MM-DD)", {field: ["is invalid"]}) \
            from None


def _parse_log(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate the manpower_log fields of a create request."""
    errors: dict[str, list[str]] = {}
    log_date = _parse_date(fields.get("date"), "date")
    workers_raw = fields.get("num_workers", 0)
    workers = None
    if isinstance(workers_raw, int | str) and not isinstance(workers_raw, bool):
        try:
            workers = int(workers_raw)
        except ValueError:
            workers = None
    if workers is None or workers < 0:
        errors["num_workers"] = ["must be a whole number of workers, 0 or more"]
    hours = parse_decimal(fields.get("num_hours", 0), "num_hours", errors)
    if hours is not None and hours < 0:
        errors["num_hours"] = ["must be 0 or more"]
    notes = fields.get("notes") or ""
    if not isinstance(notes, str) or len(notes) > MAX_NOTES:
        errors["notes"] = [f"must be text of at most {MAX_NOTES} characters"]
    if errors:
        details = "; ".join(f"{field} {message}" for field, messages in errors.items()
                            for message in messages)
        raise ApiError(422, f"Validation failed: {details}", errors)
    return {"date": log_date, "num_workers": workers,
            "num_hours": decimal_text(Decimal(0) if hours is None else hours), "notes": notes}


@bp.post("/manpower_logs")
def create_manpower_log(project_id: int) -> tuple[Response, int]:
    """Create a manpower entry; multipart bodies may carry attachments[] files."""
    project = company_project(project_id)
    require_tool(project, "daily_log")
    if request.mimetype == "multipart/form-data":
        fields: Any = form_object("manpower_log")
        files = [upload for upload in request.files.getlist("attachments[]") if upload.filename]
    else:
        fields = json_body().get("manpower_log")
        files = []
    if not isinstance(fields, dict) or not fields:
        raise ApiError(400, "Can not create due to errors: manpower_log is missing")
    log = _parse_log(fields)
    db = get_db()
    now = iso_now()
    with write_transaction(db):
        position = db.execute("SELECT count(*) FROM manpower_logs WHERE project_id = ? AND "
                              "date = ?", [project["id"], log["date"]]).fetchone()[0] + 1
        row = dict(log, id=next_id(db), company_id=g.company_id, project_id=project["id"],
                   position=position, created_at=now, updated_at=now,
                   status=project["manpower_status"] or "approved")
        db.table("manpower_logs").insert(row)
        store_attachments(db, "manpower_log", row["id"], files)
    return jsonify(manpower_json(db, row)), 201


@bp.get("/manpower_logs")
def list_manpower_logs(project_id: int) -> Response:
    """Entries for log_date, or start_date..end_date, or today; approved unless filters[status]."""
    project = company_project(project_id)
    require_tool(project, "daily_log")
    if request.args.get("log_date"):
        start = end = _parse_date(request.args["log_date"], "log_date")
    elif request.args.get("start_date") or request.args.get("end_date"):
        start = _parse_date(request.args.get("start_date"), "start_date")
        end = _parse_date(request.args.get("end_date"), "end_date")
    else:
        start = end = datetime.now(UTC).date().isoformat()
    status = request.args.get("filters[status]", "approved")
    if status not in STATUSES:
        raise ApiError(400, f"filters[status] must be one of {', '.join(STATUSES)}")
    sql = ("SELECT * FROM manpower_logs WHERE project_id = ? AND date BETWEEN ? AND ? AND "
           "(? = 'all' OR coalesce(status, 'approved') = ?)")
    params: list[Any] = [project["id"], start, end, status, status]
    if request.args.get("filters[search]", "").strip():
        # What Procore searches is undocumented; here it is vendor and trade, never notes,
        # and the sandbox's entries carry neither.
        sql += " AND 0"
    db = get_db()
    return paged([manpower_json(db, row)
                  for row in db.query(sql + " ORDER BY date, position", params)])


@bp.get("/manpower_logs/<int:log_id>")
def show_manpower_log(project_id: int, log_id: int) -> Response:
    """One manpower entry of the project."""
    project = company_project(project_id)
    require_tool(project, "daily_log")
    db = get_db()
    row = next(db.query("SELECT * FROM manpower_logs WHERE id = ? AND project_id = ?",
                        [log_id, project["id"]]), None)
    if row is None:
        raise ApiError(404, "Manpower log not found")
    return jsonify(manpower_json(db, row))


@bp.delete("/manpower_logs/<int:log_id>")
def delete_manpower_log(project_id: int, log_id: int) -> tuple[str, int]:
    """Delete a manpower entry of the project."""
    project = company_project(project_id)
    require_tool(project, "daily_log")
    db = get_db()
    with write_transaction(db):
        deleted = db.execute("DELETE FROM manpower_logs WHERE id = ? AND project_id = ?",
                             [log_id, project["id"]]).rowcount
        db.execute("DELETE FROM attachments WHERE owner_kind = 'manpower_log' AND owner_id = ?",
                   [log_id])
    if not deleted:
        raise ApiError(404, "Manpower log not found")
    return "", 200  # Procore's schema: 200 with an empty body (change events answer 204)
