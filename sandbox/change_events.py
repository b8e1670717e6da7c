"""Procore change events: v1.1 create/list/show/update with change items on budget codes, each
with its proposed vendor and commitment (see commitments.py for what was verified), and the
event's status and change reason."""
from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import sqlite_utils
from flask import Blueprint, Response, current_app, g, jsonify, request, url_for
from werkzeug.datastructures import FileStorage

from sandbox.change_orders import Parties
from sandbox.commitments import check_parties, check_reason, reason_json
from sandbox.common import (
    ApiError,
    as_number,
    decimal_text,
    get_db,
    int_arg,
    json_body,
    paged,
    parse_decimal,
)
from sandbox.rest import (
    company_project,
    company_uom_names,
    guard,
    require_tool,
    wbs_codes_by_id,
)
from sandbox.store import format_timestamp, iso_now, next_id, write_transaction
from sandbox.uploads import completed_uploads, store_uploads

bp = Blueprint("sandbox_change_events", __name__, url_prefix="/rest")
bp.before_request(guard)

SCOPES = ("tbd", "in_scope", "out_of_scope")
STRATEGIES = ("automatic", "manual")
CENT = Decimal("0.01")
MAX_FILENAME = 255


def service_user(db: sqlite_utils.Database, company_id: int) -> dict[str, Any]:
    """The company's service-account user, as Procore shows created_by."""
    company = db.table("companies").get(company_id)
    return {"id": company["service_user_id"], "login": company["service_user_login"],
            "name": company["service_user_name"]}


def attachments_json(db: sqlite_utils.Database, kind: str, owner_id: int) -> list[dict[str, Any]]:
    """Attachments of a record, each with a download URL on the sandbox."""
    return [{"id": row["id"], "name": row["filename"], "filename": row["filename"],
             "content_type": row["content_type"], "size": row["size"],
             "url": url_for("sandbox_web.download", attachment_id=row["id"], _external=True)}
            for row in db.query("SELECT * FROM attachments WHERE owner_kind = ? AND owner_id = ? "
                                "ORDER BY id", [kind, owner_id])]


def store_attachments(db: sqlite_utils.Database, kind: str, owner_id: int,
                      files: list[FileStorage]) -> None:
    """Save uploaded files under their new ids (never their names); call in a transaction."""
    folder = Path(current_app.config["SANDBOX_FILES_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    for upload in files:
        data = upload.read()
        attachment_id = next_id(db)
        (folder / str(attachment_id)).write_bytes(data)
        db.table("attachments").insert({
            "id": attachment_id, "company_id": g.company_id, "owner_kind": kind,
            "owner_id": owner_id, "filename": (upload.filename or "attachment")[:MAX_FILENAME],
            "content_type": upload.mimetype or "application/octet-stream", "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "created_at": iso_now()})


def event_items(db: sqlite_utils.Database, event: dict[str, Any]) -> list[dict[str, Any]]:
    """The change event's stored items, each with its budget code JSON (or None)."""
    rows = list(db.query("SELECT * FROM change_items WHERE change_event_id = ? ORDER BY position",
                         [event["id"]]))
    codes = wbs_codes_by_id(db, event["project_id"],
                            [row["wbs_code_id"] for row in rows if row["wbs_code_id"]])
    return [dict(row, budget_code=codes.get(row["wbs_code_id"])) for row in rows]


def _status(db: sqlite_utils.Database, status_id: int) -> dict[str, Any]:
    """A change-event status row."""
    return db.table("change_event_statuses").get(status_id)


def chosen_status(db: sqlite_utils.Database, status_id: Any) -> dict[str, Any]:
    """A status of the caller's company that may be chosen: 400 for another's or none, 422 for
    one hidden from selection, as Procore answers."""
    chosen = next(db.query("SELECT * FROM change_event_statuses WHERE id = ? AND company_id = ?",
                           [status_id, g.company_id]), None)
    if chosen is None:
        raise ApiError(400, f"Status {status_id!r} is not a change event status of this company",
                       {"status": ["is invalid"]})
    if not chosen["show_in_select"]:
        raise ApiError(422, f"Status {chosen['name']!r} is not available for selection",
                       {"status": ["is not available for selection"]})
    return chosen


def change_event_v11(db: sqlite_utils.Database, event: dict[str, Any]) -> dict[str, Any]:
    """A change event in the v1.1 shape (create, show and list answers)."""
    status = _status(db, event["status_id"])
    rows = event_items(db, event)
    parties = Parties(db, event, rows)
    items = []
    for item in rows:
        estimate = {"amount": as_number(item["amount"]),
                    "calculation_strategy": item["calculation_strategy"],
                    "quantity": as_number(item["quantity"]),
                    "unit_cost": as_number(item["unit_cost"]),
                    "unit_of_measure": item["unit_of_measure"]}
        items.append({
            "id": item["id"], "event_id": event["id"], "event_number": event["number"],
            "event_title": event["title"], "item_type": "change_event_line_item",
            "description": item["description"], "budget_code": item["budget_code"],
            "cost_impact": {"estimate": estimate, **parties.cost_impact(item)},
            "revenue_impact": {"estimate": {"amount": "0.0", "calculation_strategy": "manual",
                                            "quantity": None, "unit_cost": None,
                                            "unit_of_measure": None},
                               "change_order": parties.prime_change_order(item)},
            "latest_cost_values": estimate,
            "currency_configuration": {"currency_iso_code": "USD"}, "editable": True,
            "deletable": True, "source": None, "notes": None,
            "created_at": item["created_at"], "updated_at": item["updated_at"],
        })
    return {
        "id": event["id"], "number": event["number"], "title": event["title"],
        "description": event["description"], "scope": event["scope"],
        "project_id": event["project_id"], "company_id": event["company_id"],
        "created_at": event["created_at"], "updated_at": event["updated_at"],
        "deleted_at": event["deleted_at"], "comments_enabled": True, "deletable": True,
        "in_recycle_bin": event["deleted_at"] is not None,
        "status": {"id": status["id"], "name": status["name"],
                   "mapped_to_status": status["mapped_to_status"]},
        "change_type": None, "change_reason": reason_json(db, event["change_reason_id"]),
        "event_origin": None,
        "prime_contract_for_estimates": None,
        "attachments": attachments_json(db, "change_event", event["id"]),
        "external_data": {"origin_id": event["origin_id"], "origin_data": event["origin_data"]},
        "created_by": service_user(db, event["company_id"]), "custom_fields": {},
        "change_items": items, "markup_items": [], "production_quantities": [], "notes": {},
        "currency_configuration": {"currency_iso_code": "USD"}, "source": None,
    }


def find_event(db: sqlite_utils.Database, project_id: int, event_id: int, *,
               recycled: bool = False) -> dict[str, Any]:
    """A change event of the project (``recycled``: also one in the recycle bin, as a show
    answers it); 404 when there is none with this id."""
    row = next(db.query("SELECT * FROM change_events WHERE id = ? AND project_id = ? AND "
                        "(deleted_at IS NULL OR ?)", [event_id, project_id, recycled]), None)
    if row is None:
        raise ApiError(404, "Change event not found")
    return row


def _text(value: Any, field: str, errors: dict[str, list[str]], limit: int) -> str | None:
    """An optional string field no longer than ``limit``."""
    if value is None:
        return None
    if not isinstance(value, str):
        errors.setdefault(field, []).append("must be a string")
        return None
    if len(value) > limit:
        errors.setdefault(field, []).append(f"is too long (maximum is {limit} characters)")
    return value


def _parse_items(db: sqlite_utils.Database, project_id: int, raw_items: Any,
                 valid_codes: set[int], units: set[str],
                 errors: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Validate change items and work out each amount."""
    if raw_items is None:
        return []
    if not isinstance(raw_items, list):
        errors["change_items"] = ["must be an array"]
        return []
    items = []
    for index, raw in enumerate(raw_items):
        field = f"change_items[{index}]"
        if not isinstance(raw, dict):
            errors.setdefault(field, []).append("must be an object")
            continue
        budget_code = raw.get("budget_code")
        code_id = budget_code.get("id") if isinstance(budget_code, dict) else None
        if budget_code is not None and code_id not in valid_codes:
            errors.setdefault(f"{field}.budget_code", []).append(
                f"{code_id!r} does not exist in this project")
        cost = raw.get("cost_impact") or {}
        estimate = (cost.get("estimate") or {}) if isinstance(cost, dict) else None
        if not isinstance(estimate, dict):
            errors.setdefault(f"{field}.cost_impact", []).append("must be an object")
            continue
        quantity, unit_cost, amount, strategy = _estimate(estimate, field, errors)
        vendor_id, contract_id = check_parties(db, project_id, cost, field, errors)
        unit = estimate.get("unit_of_measure")
        if unit is not None and unit not in units:
            errors.setdefault(f"{field}.unit_of_measure", []).append(
                f"{unit!r} is not a unit of measure of this company")
        items.append({
            "description": _text(raw.get("description"), f"{field}.description", errors, 2000),
            "wbs_code_id": code_id,
            "amount": decimal_text(Decimal(0) if amount is None else amount),
            "quantity": decimal_text(quantity), "unit_cost": decimal_text(unit_cost),
            "unit_of_measure": _text(estimate.get("unit_of_measure"),
                                     f"{field}.unit_of_measure", errors, 50),
            "calculation_strategy": strategy, "vendor_id": vendor_id, "contract_id": contract_id,
        })
    return items


def _estimate(estimate: dict[str, Any], field: str, errors: dict[str, list[str]]
              ) -> tuple[Decimal | None, Decimal | None, Decimal | None, Any]:
    """A change item's quantity, unit cost, amount (worked out under the automatic strategy) and
    calculation strategy."""
    quantity = parse_decimal(estimate.get("quantity"), f"{field}.quantity", errors)
    unit_cost = parse_decimal(estimate.get("unit_cost"), f"{field}.unit_cost", errors)
    amount = parse_decimal(estimate.get("amount"), f"{field}.amount", errors)
    strategy = estimate.get("calculation_strategy") or (
        "automatic" if amount is None else "manual")
    if strategy not in STRATEGIES:
        errors.setdefault(f"{field}.calculation_strategy", []).append("is not in the list")
    elif strategy == "automatic":
        if quantity is None or unit_cost is None:
            errors.setdefault(f"{field}.cost_impact", []).append(
                "automatic calculation needs quantity and unit_cost")
        else:
            amount = (quantity * unit_cost).quantize(CENT, ROUND_HALF_UP)
    return quantity, unit_cost, amount, strategy


def validation_failed(errors: dict[str, list[str]]) -> ApiError:
    """A 422 whose message lists every field problem, Rails style."""
    details = "; ".join(f"{field} {message}" for field, messages in errors.items()
                        for message in messages)
    return ApiError(422, f"Validation failed: {details}", errors)


def _next_number(db: sqlite_utils.Database, project_id: int) -> str:
    """The next free automatic number on the project, e.g. "004"."""
    numbers = [int(row["number"]) for row in db.query(
        "SELECT number FROM change_events WHERE project_id = ?", [project_id])
        if row["number"].isdigit()]
    return f"{max(numbers, default=0) + 1:03d}"


@bp.post("/v1.1/change_events")
def create_change_event() -> tuple[Response, int]:
    """Create a change event with its change items; 400 on a bad status, 422 on bad fields."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events")
    event = json_body().get("change_event")
    if not isinstance(event, dict):
        raise ApiError(400, "param is missing or the value is empty: change_event")
    for required in ("scope", "status"):
        if event.get(required) in (None, "", {}):
            raise ApiError(400, f"param is missing or the value is empty: {required}",
                           {required: ["can't be blank"]})
    db = get_db()
    status = event["status"]
    status_id = chosen_status(db, status.get("id") if isinstance(status, dict) else None)["id"]
    errors: dict[str, list[str]] = {}
    if event["scope"] not in SCOPES:
        errors["scope"] = ["is not included in the list"]
    title = _text(event.get("title"), "title", errors, 255)
    description = _text(event.get("description"), "description", errors, 10_000)
    number = event.get("number")
    if number is not None and (isinstance(number, bool) or not isinstance(number, str | int)):
        errors["number"] = ["must be a string"]
    number = None if number is None else str(number)
    external = event.get("external_data") or {}
    if not isinstance(external, dict):
        errors["external_data"] = ["must be an object"]
        external = {}
    origin_id = _text(external.get("origin_id"), "external_data.origin_id", errors, 255)
    origin_data = _text(external.get("origin_data"), "external_data.origin_data", errors, 10_000)
    valid_codes = set(wbs_codes_by_id(db, project["id"]))
    items = _parse_items(db, project["id"], event.get("change_items"), valid_codes,
                         company_uom_names(db, g.company_id), errors)
    reason = event.get("change_reason")
    reason_id = check_reason(db, reason.get("id") if isinstance(reason, dict) else reason,
                             "change_reason", errors)
    if errors:
        raise validation_failed(errors)
    now = iso_now()
    with write_transaction(db):
        if number is None:
            number = _next_number(db, project["id"])
        elif next(db.query("SELECT id FROM change_events WHERE project_id = ? AND number = ?",
                           [project["id"], number]), None):
            raise validation_failed({"number": ["has already been taken"]})
        row = {"id": next_id(db), "company_id": g.company_id, "project_id": project["id"],
               "number": number, "title": title or "", "description": description or "",
               "scope": event["scope"], "status_id": status_id, "origin_id": origin_id,
               "origin_data": origin_data, "created_at": now, "updated_at": now,
               "deleted_at": None, "event_type": "tbd", "change_reason_id": reason_id}
        db.table("change_events").insert(row)
        db.table("change_items").insert_all(
            dict(item, id=next_id(db), change_event_id=row["id"], position=position,
                 created_at=now, updated_at=now)
            for position, item in enumerate(items, start=1))
    return jsonify(change_event_v11(db, row)), 201


def _created_at_range(raw: str) -> tuple[str | None, str | None]:
    """Parse filters[created_at] "A...B" (either side may be empty) into stored-format bounds."""
    start, separator, end = raw.partition("...")
    if not separator:
        raise ApiError(400, "filters[created_at] must look like <from>...<to>")
    return _bound(start), _bound(end)


def _bound(text: str) -> str | None:
    """One side of a timestamp range in the stored format, or None when it is empty."""
    if not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ApiError(400, "filters[created_at] holds an invalid timestamp") from None
    return format_timestamp(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


@bp.get("/v1.1/change_events")
def list_change_events() -> Response:
    """The project's change events; filters[created_at], filters[id][] and filters[search]."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events")
    conditions, params = ["project_id = ?", "deleted_at IS NULL"], [project["id"]]
    if request.args.get("filters[created_at]"):
        start, end = _created_at_range(request.args["filters[created_at]"])
        if start:
            conditions.append("created_at >= ?")
            params.append(start)
        if end:
            conditions.append("created_at <= ?")
            params.append(end)
    ids = request.args.getlist("filters[id][]")
    if ids:
        if not all(value.isdigit() for value in ids):
            raise ApiError(400, "filters[id][] must hold integers")
        conditions.append(f"id IN ({', '.join('?' for _ in ids)})")
        params.extend(int(value) for value in ids)
    search = request.args.get("filters[search]", "").strip()
    if search:
        conditions.append("(instr(lower(title), lower(?)) OR instr(lower(description), lower(?))"
                          " OR number = ?)")
        params.extend([search, search, search])
    db = get_db()
    rows = db.query(f"SELECT * FROM change_events WHERE {' AND '.join(conditions)} ORDER BY id",
                    params)
    return paged([change_event_v11(db, row) for row in rows])


@bp.get("/v1.1/change_events/<int:event_id>")
def show_change_event(event_id: int) -> Response:
    """One change event of the project, v1.1 shape; one in the recycle bin shows as such."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events")
    db = get_db()
    return jsonify(change_event_v11(db, find_event(db, project["id"], event_id, recycled=True)))


@bp.patch("/v1.1/change_events/<int:event_id>")
def update_change_event_v11(event_id: int) -> Response:
    """v1.1 update: change_event is required; attachments_by_uuid adds completed uploads (or,
    in the company's "replace" mode, replaces the event's files with them)."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events")
    body = request.get_json(silent=True)
    event_fields = body.get("change_event") if isinstance(body, dict) else None
    if not isinstance(event_fields, dict) or not event_fields:
        raise ApiError(400, "param is missing or the value is empty: change_event")
    db = get_db()
    event = find_event(db, project["id"], event_id)
    errors: dict[str, list[str]] = {}
    uploads = completed_uploads(db, event_fields.get("attachments_by_uuid"), errors)
    title = _text(event_fields.get("title"), "title", errors, 255)
    description = _text(event_fields.get("description"), "description", errors, 10_000)
    reason = event_fields.get("change_reason")
    reason_id = check_reason(db, reason.get("id") if isinstance(reason, dict) else reason,
                             "change_reason", errors)
    if errors:
        raise validation_failed(errors)
    changes: dict[str, Any] = {"updated_at": iso_now()}
    status = event_fields.get("status")
    if status is not None:  # a PM moving the event on: Pending, Closed, Void
        changes["status_id"] = chosen_status(
            db, status.get("id") if isinstance(status, dict) else None)["id"]
    if reason_id is not None:
        changes["change_reason_id"] = reason_id
    if title is not None:
        changes["title"] = title
    if description is not None:
        changes["description"] = description
    replace = "attachments_by_uuid" in event_fields and db.table("companies").get(
        g.company_id).get("attachments_mode") == "replace"
    with write_transaction(db):
        if replace:  # the list is the event's whole set of files
            db.execute("DELETE FROM attachments WHERE owner_kind = 'change_event' AND "
                       "owner_id = ?", [event["id"]])
        store_uploads(db, "change_event", event["id"], uploads)
        db.table("change_events").update(event["id"], changes)
    return jsonify(change_event_v11(db, find_event(db, project["id"], event_id)))


@bp.delete("/v1.1/change_events/<int:event_id>")
def delete_change_event(event_id: int) -> tuple[str, int]:
    """Move a change event to the recycle bin: it leaves lists and shows."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events")
    db = get_db()
    event = find_event(db, project["id"], event_id)
    with write_transaction(db):
        db.table("change_events").update(event["id"], {"deleted_at": iso_now()})
    return "", 204
