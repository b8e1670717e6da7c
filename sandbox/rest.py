"""Procore REST endpoints for companies' projects, tools, cost codes, cost types and WBS codes.

``guard`` runs before every /rest call of every sandbox blueprint: bearer token,
Procore-Company-Id header, added latency, hourly rate limit, then any injected fault.
"""
from __future__ import annotations

import json
import time
from typing import Any

import sqlite_utils
from flask import Blueprint, Response, g, jsonify, request

from sandbox.auth import bearer_company, check_company_header, count_request
from sandbox.common import ApiError, get_db, int_arg, json_body, paged
from sandbox.contract import check_current_request
from sandbox.control import fault_response, take_fault
from sandbox.store import iso_now, next_id, write_transaction

bp = Blueprint("sandbox_rest", __name__, url_prefix="/rest")

TOOL_DENIED = {
    "change_events": "User does not have permission access to {verb} Change Events",
    "daily_log": "User does not have right permissions",
}
_VERBS = {"GET": "view", "POST": "create", "PATCH": "update", "DELETE": "delete"}


def guard() -> Response | None:
    """Authenticate, check the company header, wait out the company's added latency, count the
    call and apply a pending fault."""
    company_id = bearer_company()
    check_company_header(company_id)
    g.company_id = company_id
    company = get_db().table("companies").get(company_id)
    g.error_shape = company.get("error_shape")
    latency_ms = company.get("latency_ms")
    if latency_ms:  # the switch for a distant Procore: each call takes this much longer
        time.sleep(latency_ms / 1000)
    limited = count_request(company_id)
    if limited is not None:
        return limited
    check_current_request()
    fault = take_fault(company_id)
    if fault is None:
        return None
    if fault["after_commit"]:
        g.fault = fault
        return None
    return fault_response(fault)


bp.before_request(guard)


def company_project(project_id: int | None) -> dict[str, Any]:
    """The caller's project with this id; 404 when it does not exist in the caller's company."""
    row = None if project_id is None else next(get_db().query(
        "SELECT * FROM projects WHERE id = ? AND company_id = ?", [project_id, g.company_id]),
        None)
    if row is None:
        raise ApiError(404, "Project not found", {"project_id": ["not found"]})
    return row


def require_tool(project: dict[str, Any], engine_name: str, *, lookup: bool = False) -> None:
    """403 unless the project has the tool switched on, as Procore answers for a disabled tool."""
    # lookup: a company-level list (statuses) that answers where the tool list lacks the tool.
    active = next(get_db().query(
        "SELECT is_active, listed FROM project_tools WHERE project_id = ? AND engine_name = ?",
        [project["id"], engine_name]), None)
    if lookup and active is not None and active["listed"] == 0:
        return
    if not active or not active["is_active"]:
        message = TOOL_DENIED[engine_name].format(verb=_VERBS.get(request.method, "access"))
        raise ApiError(403, message, message)


def _project_json(row: dict[str, Any], company_name: str) -> dict[str, Any]:
    """A project in the v1.0 list/show shape."""
    return {
        "id": row["id"], "name": row["name"], "display_name": row["display_name"],
        "project_number": row["project_number"], "address": row["address"],
        "city": row["city"], "state_code": row["state_code"], "country_code": "US",
        "zip": row["zip"], "county": None, "time_zone": row["time_zone"], "latitude": None,
        "longitude": None, "stage": row["stage"], "project_stage": {"name": row["stage"]},
        "phone": None, "created_at": row["created_at"], "updated_at": row["updated_at"],
        "active": bool(row["active"]), "origin_id": None, "origin_data": None,
        "origin_code": None, "company": {"id": row["company_id"], "name": company_name},
        "custom_fields": {},
    }


def _company_name() -> str:
    """Name of the caller's company."""
    return str(get_db().table("companies").get(g.company_id)["name"])


def _require_company_arg() -> None:
    """The company_id query parameter must name the caller's company."""
    if int_arg("company_id", required=True) != g.company_id:
        raise ApiError(403, "App is not connected to this company")


@bp.get("/v1.0/projects")
def list_projects() -> Response:
    """Projects of the company; filters[by_status] = Active (default), Inactive or All."""
    _require_company_arg()
    by_status = request.args.get("filters[by_status]", "Active")
    where = {"Active": " AND active = 1", "Inactive": " AND active = 0", "All": ""}.get(by_status)
    if where is None:
        raise ApiError(400, "filters[by_status] must be Active, Inactive or All")
    name = _company_name()
    rows = get_db().query(f"SELECT * FROM projects WHERE company_id = ?{where} ORDER BY name",
                          [g.company_id])
    return paged([_project_json(row, name) for row in rows])


@bp.get("/v1.0/projects/<int:project_id>")
def show_project(project_id: int) -> Response:
    """One project of the company."""
    _require_company_arg()
    return jsonify(_project_json(company_project(project_id), _company_name()))


@bp.get("/v1.0/projects/<int:project_id>/tools")
def list_tools(project_id: int) -> Response:
    """The project's tools with their on/off state; filters[is_active]=true|false narrows it."""
    project = company_project(project_id)
    rows = list(get_db().query("SELECT * FROM project_tools WHERE project_id = ? AND "
                               "coalesce(listed, 1) = 1 ORDER BY position", [project["id"]]))
    wanted = request.args.get("filters[is_active]")
    if wanted in ("true", "false"):
        rows = [row for row in rows if bool(row["is_active"]) == (wanted == "true")]
    # A tool may be listed under an engine name and title of its own (a company in another
    # language, a renamed tool): `shown_engine_name` is what the list says.
    return paged([{"id": row["id"], "engine_name": row["shown_engine_name"] or row["engine_name"],
                   "is_active": bool(row["is_active"]), "position": row["position"],
                   "required": bool(row["required"]), "title": row["title"]} for row in rows])


@bp.get("/v1.0/change_event/statuses")
def list_change_event_statuses() -> Response:
    """The change-event statuses available on a project (403 without the change-events tool)."""
    project = company_project(int_arg("project_id", required=True))
    require_tool(project, "change_events", lookup=True)
    rows = get_db().query("SELECT * FROM change_event_statuses WHERE company_id = ? ORDER BY id",
                          [g.company_id])
    return paged([{"id": row["id"], "name": row["name"],
                   "mapped_to_status": row["mapped_to_status"],
                   "show_in_select": bool(row["show_in_select"]),
                   "default_status": bool(row["default_status"])} for row in rows])


def _line_item_type_json(row: dict[str, Any]) -> dict[str, Any]:
    """A cost type in Procore's line_item_type shape."""
    return {"id": row["id"], "name": row["name"], "code": row["code"],
            "base_type": row["base_type"], "origin_id": None, "origin_data": None}


def _company_line_item_types() -> list[dict[str, Any]]:
    """The caller's cost types, as JSON."""
    return [_line_item_type_json(row) for row in get_db().query(
        "SELECT * FROM line_item_types WHERE company_id = ? ORDER BY id", [g.company_id])]


@bp.get("/v1.0/line_item_types")
def list_line_item_types() -> Response:
    """Cost types, by project_id or company_id."""
    if request.args.get("project_id"):
        company_project(int_arg("project_id"))
    else:
        _require_company_arg()
    return paged(_company_line_item_types())


@bp.get("/v1.0/companies/<int:company_id>/uoms")
def list_uoms(company_id: int) -> Response:
    """The company's units of measure; line items may use only these names."""
    if company_id != g.company_id:
        raise ApiError(403, "App is not connected to this company")
    return paged([{"id": row["id"], "name": row["name"], "description": row["description"],
                   "is_standard": bool(row["is_standard"]),
                   "uom_category": {"id": row["category_id"], "name": row["category"]}}
                  for row in get_db().query("SELECT * FROM uoms WHERE company_id = ? ORDER BY id",
                                            [company_id])])


def company_uom_names(db: sqlite_utils.Database, company_id: int) -> set[str]:
    """Names of the company's units of measure."""
    return {row["name"] for row in db.query("SELECT name FROM uoms WHERE company_id = ?",
                                            [company_id])}


@bp.get("/v1.0/sub_jobs")
def list_sub_jobs() -> Response:
    """The project's sub jobs."""
    project = company_project(int_arg("project_id", required=True))
    return paged([{"id": row["id"], "code": row["code"], "name": row["name"],
                   "origin_id": row["origin_id"], "origin_data": None,
                   "created_at": row["created_at"], "updated_at": row["updated_at"]}
                  for row in get_db().query("SELECT * FROM sub_jobs WHERE project_id = ? "
                                            "ORDER BY id", [project["id"]])])


@bp.get("/v1.0/cost_codes")
def list_cost_codes() -> Response:
    """The project's cost codes, divisions included, each with its parent and cost types: those
    of no sub job, or with `sub_job_id` those of that sub job."""
    project = company_project(int_arg("project_id", required=True))
    types = _company_line_item_types()
    sub_job_id = int_arg("sub_job_id")
    if sub_job_id is not None and next(get_db().query(
            "SELECT id FROM sub_jobs WHERE id = ? AND project_id = ?",
            [sub_job_id, project["id"]]), None) is None:
        raise ApiError(404, "Sub Job not found")
    rows = get_db().query("SELECT * FROM cost_codes WHERE project_id = ? AND sub_job_id IS ? "
                          "ORDER BY position", [project["id"], sub_job_id])
    return paged([{
        "id": row["id"], "code": row["code"], "full_code": row["full_code"],
        "name": row["name"], "sortable_code": row["full_code"],
        "parent": None if row["parent_id"] is None else {"id": row["parent_id"]},
        "position": row["position"], "biller": None, "biller_id": None, "biller_type": None,
        "budgeted": False, "origin_id": None, "origin_data": None,
        "standard_cost_code_id": None, "line_item_types": types,
        "created_at": row["created_at"], "updated_at": row["updated_at"], "deleted_at": None,
    } for row in rows])


def _segments(project_id: int) -> list[dict[str, Any]]:
    """The project's WBS segments in pattern order."""
    return list(get_db().query("SELECT * FROM wbs_segments WHERE project_id = ? ORDER BY position",
                               [project_id]))


@bp.get("/v1.0/projects/<int:project_id>/work_breakdown_structure/segments")
def list_segments(project_id: int) -> Response:
    """The project's WBS pattern: a tiered cost-code segment and a flat cost-type segment."""
    project = company_project(project_id)
    return paged([{"id": row["id"], "type": row["type"], "name": row["name"],
                   "position": row["position"], "delimiter": row["delimiter"],
                   "required": bool(row["required"]), "structure": row["structure"],
                   "is_included_in_project_pattern": row["in_pattern"] != 0,
                   # Procore's type is a boolean; only a tiered segment's leaves are chosen.
                   "selectable_tiers": row["structure"] != "tiered"}
                  for row in _segments(project["id"])])


@bp.get("/v1.0/projects/<int:project_id>/work_breakdown_structure/segments/<int:segment_id>"
        "/segment_items")
def list_segment_items(project_id: int, segment_id: int) -> Response:
    """Items of one segment; legacy_cost_code_id picks the item of one cost code. A cost-code
    segment lists the project's own items, or with legacy_sub_job_id those of that sub job."""
    project = company_project(project_id)
    segment = next((row for row in _segments(project["id"]) if row["id"] == segment_id), None)
    if segment is None:
        raise ApiError(404, "Segment not found")
    rows = list(get_db().query("SELECT * FROM wbs_segment_items WHERE segment_id = ? ORDER BY id",
                               [segment_id]))
    by_id = {row["id"]: row for row in rows}
    if segment["type"] == "cost_code":
        sub_job = int_arg("legacy_sub_job_id")
        rows = [row for row in rows if row["sub_job_id"] == sub_job]
    legacy = int_arg("legacy_cost_code_id")
    if legacy is not None:
        rows = [row for row in rows if row["legacy_cost_code_id"] == legacy]
    items = []
    for row in rows:
        path = [row]
        while path[0]["parent_id"] is not None:
            path.insert(0, by_id[path[0]["parent_id"]])
        items.append({
            "id": row["id"], "code": row["code"], "name": row["name"],
            "parent_id": row["parent_id"], "path_ids": [item["id"] for item in path],
            "path_code": row["path_code"], "path_codes": [item["code"] for item in path],
            "path_names": [item["name"] for item in path], "is_parent": bool(row["is_parent"]),
            "in_use": True, "status": row["status"],
            "segment": {"id": segment["id"], "name": segment["name"], "type": segment["type"]},
        })
    return paged(items)


def _segment_item_json(item: dict[str, Any], segment: dict[str, Any]) -> dict[str, Any]:
    """A segment item as a WBS code lists it, with its segment's type."""
    return {"id": item["id"], "segment_id": segment["id"], "code": item["code"],
            "name": item["name"], "path_code": item["path_code"], "status": item["status"],
            "segment": {"id": segment["id"], "name": segment["name"], "type": segment["type"]}}


def wbs_codes_by_id(db: sqlite_utils.Database, project_id: int,
                    ids: list[int] | None = None) -> dict[int, dict[str, Any]]:
    """The project's WBS codes as JSON, keyed by id (only ``ids`` when given).

    ``flat_code`` joins the items' codes in pattern order, each segment's delimiter after it.
    """
    sql, params = "SELECT * FROM wbs_codes WHERE project_id = ?", [project_id]
    if ids is not None:
        sql += f" AND id IN ({', '.join('?' for _ in ids)})"
        params += ids
    segments = {row["id"]: row for row in _segments(project_id)}
    items = {row["id"]: row for row in db.query(
        "SELECT * FROM wbs_segment_items WHERE project_id = ?", [project_id])}
    codes = {}
    for row in db.query(sql, params):
        chosen = [items[row["cost_code_item_id"]], items[row["type_item_id"]]]
        chosen += [items[item_id] for item_id in json.loads(row["extra_item_ids"] or "[]")]
        chosen.sort(key=lambda item: segments[item["segment_id"]]["position"])
        flat_code = flat_name = ""
        for index, item in enumerate(chosen):
            # Each segment's delimiter stands between it and the next one.
            delimiter = segments[chosen[index - 1]["segment_id"]]["delimiter"] if index else ""
            flat_code += f"{delimiter}{item['path_code']}"
            flat_name += f"{'.' if index else ''}{item['name']}"
        codes[row["id"]] = {
            "id": row["id"], "flat_code": flat_code, "flat_name": flat_name,
            "description": row["description"], "status": row["status"],
            "created_at": row["created_at"], "updated_at": row["updated_at"],
            "segment_items": [_segment_item_json(item, segments[item["segment_id"]])
                              for item in chosen],
            "wbs_pattern_id": None,
        }
    return codes


@bp.get("/v1.0/projects/<int:project_id>/work_breakdown_structure/wbs_codes")
def list_wbs_codes(project_id: int) -> Response:
    """The project's budget codes; query= searches code and name, filters[status][] narrows."""
    project = company_project(project_id)
    codes = sorted(wbs_codes_by_id(get_db(), project["id"]).values(),
                   key=lambda code: code["flat_code"])
    statuses = request.args.getlist("filters[status][]")
    if statuses:
        codes = [code for code in codes if code["status"] in statuses]
    query = request.args.get("query", "").strip().lower()
    if query:
        codes = [code for code in codes
                 if query in code["flat_code"].lower() or query in code["flat_name"].lower()]
    return paged(codes)


def _chosen_items(db: Any, project_id: int, pairs: list) -> dict[str, dict[str, Any]]:
    """The segment item named for each segment type, refused (422) as Procore refuses an item
    it lacks, a segment outside the pattern, a division, another sub job's cost code or a
    required segment left out."""
    chosen: dict[str, dict[str, Any]] = {}
    segments = {row["id"]: row for row in _segments(project_id)}
    for pair in pairs:
        segment = segments.get(pair.get("segment_id")) if isinstance(pair, dict) else None
        item = None if segment is None else next(db.query(
            "SELECT * FROM wbs_segment_items WHERE id = ? AND segment_id = ?",
            [pair.get("segment_item_id"), segment["id"]]), None)
        if segment is None or item is None:
            raise ApiError(422, "Segment item not found in this project's WBS",
                           {"segment_items": [f"segment item {pair!r} does not exist"]})
        if segment["in_pattern"] == 0:
            raise ApiError(422, f"{segment['name']} is not part of this project's budget code "
                           "pattern", {"segment_items": [f"{segment['name']} is not in the "
                                                         "project's pattern"]})
        if item["is_parent"]:
            raise ApiError(422, f"{item['path_code']} is a division; choose a cost code below it",
                           {"segment_items": ["divisions cannot be selected"]})
        chosen[segment["type"]] = item
    # A sub job's budget codes stand on its own cost-code items, never on the project's (or
    # another sub job's): Procore refuses the pairing.
    if "cost_code" in chosen and (chosen.get("sub_job") or {}).get("sub_job_id") != \
            chosen["cost_code"]["sub_job_id"]:
        raise ApiError(422, f"Cost code {chosen['cost_code']['path_code']} does not belong to "
                       "the chosen sub job", {"segment_items": [
                           "the cost code item belongs to another sub job or to the project"]})
    missing = [row["name"] for row in segments.values()
               if row["required"] and row["in_pattern"] != 0 and row["type"] not in chosen]
    if missing:
        raise ApiError(422, f"A segment item is required for: {', '.join(missing)}",
                       {"segment_items": [f"{name} is required" for name in missing]})
    return chosen


@bp.post("/v1.0/projects/<int:project_id>/work_breakdown_structure/wbs_codes")
def create_wbs_code(project_id: int) -> tuple[Response, int]:
    """Create a budget code from one item per segment, or update the existing combination."""
    project = company_project(project_id)
    body = json_body()
    pairs = body.get("segment_items")
    if not isinstance(pairs, list) or not pairs:
        raise ApiError(400, "segment_items is required", {"segment_items": ["can't be blank"]})
    db = get_db()
    chosen = _chosen_items(db, project["id"], pairs)
    description = body.get("description")
    if description is not None and not isinstance(description, str):
        raise ApiError(422, "description must be a string", {"description": ["is invalid"]})
    extra = sorted(item["id"] for kind, item in chosen.items()
                   if kind not in ("cost_code", "line_item_type"))
    now = iso_now()
    with write_transaction(db):
        existing = next(db.query(
            "SELECT id FROM wbs_codes WHERE project_id = ? AND cost_code_item_id = ? "
            "AND type_item_id = ? AND extra_item_ids = ?",
            [project["id"], chosen["cost_code"]["id"], chosen["line_item_type"]["id"],
             json.dumps(extra)]), None)
        if existing is None:
            wbs_id = next_id(db)
            db.table("wbs_codes").insert({
                "id": wbs_id, "project_id": project["id"],
                "cost_code_item_id": chosen["cost_code"]["id"],
                "type_item_id": chosen["line_item_type"]["id"],
                "description": description or
                f"{chosen['cost_code']['name']}.{chosen['line_item_type']['name']}",
                "status": "active", "created_at": now, "updated_at": now,
                "extra_item_ids": json.dumps(extra)})
        else:
            wbs_id = existing["id"]
            if description:
                db.table("wbs_codes").update(wbs_id, {"description": description,
                                                      "updated_at": now})
    return jsonify(wbs_codes_by_id(db, project["id"], [wbs_id])[wbs_id]), 201
