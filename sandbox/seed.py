"""Demo data for the sandbox: one call makes one independent company with its own credentials.

Works on the SQLite file directly, so it can run in another process while the
sandbox server is serving the same file.
"""
from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

import sqlite_utils

from sandbox.commitments import seed_company, seed_project
from sandbox.store import connect, ensure_schema, iso_now, next_id, write_transaction

# (engine_name, title, required); change_events and daily_log are switched per project.
_TOOLS = [
    ("home", "Home", 1),
    ("directory", "Directory", 1),
    ("documents", "Documents", 0),
    ("daily_log", "Daily Log", 0),
    ("photos", "Photos", 0),
    ("rfi", "RFIs", 0),
    ("submittal_log", "Submittals", 0),
    ("tm_tickets", "T&M Tickets", 0),
    ("budgeting", "Budget", 0),
    ("change_events", "Change Events", 0),
    ("commitments", "Commitments", 0),
    ("prime_contracts", "Prime Contracts", 0),
]

# (name, mapped_to_status, default_status, show_in_select): an open status kept for old
# events, hidden from selection (and still marked default), listed before the one to use.
_STATUSES = [
    ("Open (imported)", "open", 1, 0),
    ("Open", "open", 0, 1),
    ("Pending", "pending", 0, 1),
    ("Closed", "closed", 0, 1),
    ("Void", "void", 0, 1),
]

# Procore's default cost types (line item types): code, name, base_type.
_COST_TYPES = [
    ("L", "Labor", "labor"),
    ("E", "Equipment", "equipment"),
    ("M", "Materials", "materials"),
    ("O", "Other", "other"),
    ("S", "Commitment", "commitment"),
    ("SVC", "Professional Services", "professional_services"),
    ("OC", "Owner Cost", "owner_cost"),
]

# CSI-style divisions and their cost codes.
_DIVISIONS = [
    ("01", "General Requirements", [("310", "Project Management and Coordination"),
                                    ("500", "Temporary Facilities"),
                                    ("740", "Cleaning and Waste Management")]),
    ("02", "Site Construction", [("200", "Site Earthwork"), ("410", "Selective Demolition")]),
    ("03", "Concrete", [("100", "Concrete Forming"), ("200", "Concrete Reinforcing"),
                        ("300", "Cast-in-Place Concrete")]),
    ("04", "Masonry", [("200", "Unit Masonry")]),
    ("05", "Metals", [("120", "Structural Steel"), ("500", "Metal Fabrications")]),
    ("06", "Wood, Plastics, and Composites", [("100", "Rough Carpentry")]),
    ("07", "Thermal and Moisture Protection", [("210", "Building Insulation"),
                                               ("900", "Joint Sealants")]),
    ("08", "Openings", [("110", "Hollow Metal Doors and Frames")]),
    ("09", "Finishes", [("250", "Gypsum Board"), ("650", "Resilient Flooring"),
                        ("900", "Painting")]),
    ("22", "Plumbing", [("100", "Plumbing")]),
    ("23", "Heating, Ventilating, and Air Conditioning", [("300", "HVAC Air Distribution")]),
    ("26", "Electrical", [("050", "Electrical")]),
    ("31", "Earthwork", [("230", "Excavation and Fill")]),
]

# Budget-code gaps the service has to cope with: no labor code (but "other"), or none at all.
_NO_LABOR = {"01-500", "07-900", "09-650"}
_NO_BUDGET_CODES = {"04-200", "23-300"}
_BUDGETED_TYPES = ("L", "E", "M", "O", "S")
# Budget codes that exist but are switched off: never to be used.
_INACTIVE = {("31-230", "L")}

_PROJECTS = [
    {"name": "Riverside Medical Office Building", "project_number": "2024-017",
     "address": "1450 Riverside Drive", "city": "Sacramento", "state_code": "CA",
     "zip": "95815", "time_zone": "Pacific Time (US & Canada)", "stage": "Course of Construction",
     "active": 1, "change_events": True},
    {"name": "Harbor Street Parking Structure", "project_number": "2024-031",
     "address": "220 Harbor Street", "city": "Oakland", "state_code": "CA", "zip": "94607",
     "time_zone": "Pacific Time (US & Canada)", "stage": "Course of Construction",
     "active": 1, "change_events": True},
    {"name": "Lincoln Elementary Renovation", "project_number": "2025-004",
     "address": "88 Lincoln Avenue", "city": "Davis", "state_code": "CA", "zip": "95616",
     "time_zone": "Pacific Time (US & Canada)", "stage": "Pre-Construction",
     "active": 1, "change_events": False},
    {"name": "Maple Grove Townhomes Phase 1", "project_number": "2022-112",
     "address": "15 Maple Grove Court", "city": "Roseville", "state_code": "CA",
     "zip": "95678", "time_zone": "Pacific Time (US & Canada)", "stage": "Warranty",
     "active": 0, "change_events": True},
]


# A company's units of measure (name, description, category); Procore accepts only these.
_UOMS = [
    ("HR", "Hours", "Time"), ("DAY", "Days", "Time"), ("EA", "Each", "Count"),
    ("LS", "Lump Sum", "Count"), ("CY", "Cubic Yards", "Volume"), ("SF", "Square Feet", "Area"),
    ("LF", "Linear Feet", "Length"), ("TON", "Tons", "Weight"),
]

# Projects whose budget-code pattern is not the default "cost code . cost type", and projects
# that behave as some real companies do. Each: name, number, segments as (type, name,
# delimiter after it, item codes for sub-job or custom segments), and switches. Each sub job
# has its own copy of the project's cost codes (another id, the same code text), as Procore
# lists them with `sub_job_id`, and budget codes on it.
_PATTERN_PROJECTS = [
    {"name": "Sub Job First Tower", "project_number": "2025-101", "key": "sub_job_first",
     "segments": [("sub_job", "Sub Job", ".", ["B1"]), ("cost_code", "Cost Code", ".", None),
                  ("line_item_type", "Cost Type", ".", None)]},
    # Two buildings as sub jobs, each with its own cost codes (the same code texts as the
    # project's) and budget codes, beside budget codes of no sub job: the sub job is optional.
    {"name": "Two Buildings Campus", "project_number": "2025-107", "key": "sub_jobs",
     "segments": [("sub_job", "Sub Job", ".", ["B1", "B2"]), ("cost_code", "Cost Code", ".", None),
                  ("line_item_type", "Cost Type", ".", None)], "sub_job_optional": True},
    {"name": "Custom Segment Clinic", "project_number": "2025-102", "key": "custom_segment",
     "segments": [("cost_code", "Cost Code", ".", None), ("line_item_type", "Cost Type", ".", None),
                  ("custom", "Area", ".", ["01"])]},
    {"name": "Slash Delimiter Depot", "project_number": "2025-103", "key": "other_delimiter",
     "segments": [("cost_code", "Cost Code", "/", None),
                  ("line_item_type", "Cost Type", "/", None)]},
    # Delimiters that differ: each stands after its own segment ("02-200/L-01"); and a
    # company segment that is required but left out of this project's pattern.
    {"name": "Mixed Delimiter Mill", "project_number": "2025-108", "key": "mixed_delimiters",
     "segments": [("cost_code", "Cost Code", "/", None), ("line_item_type", "Cost Type", "-", None),
                  ("custom", "Area", ".", ["01"])]},
    {"name": "Company Phase Wharf", "project_number": "2025-109", "key": "company_segment",
     "segments": [("cost_code", "Cost Code", ".", None), ("line_item_type", "Cost Type", ".", None),
                  ("custom", "Phase", ".", ["P1"])], "outside_pattern": "custom"},
    {"name": "Cost Type First Annex", "project_number": "2025-104", "key": "cost_type_first",
     "segments": [("line_item_type", "Cost Type", ".", None),
                  ("cost_code", "Cost Code", ".", None)]},
    {"name": "Hidden Change Events Yard", "project_number": "2025-105", "key": "unlisted_tool",
     "unlisted_change_events": True},
    {"name": "Pending Daily Log Plant", "project_number": "2025-106", "key": "pending_manpower",
     "manpower_status": "pending"},
    # An active project with neither Change Events nor the Daily Log switched on.
    {"name": "Quarry Road Storage", "project_number": "2025-110", "key": "no_tools",
     "change_events": False, "daily_log": False},
    # Change Events listed under a title in Spanish and an engine name not seen elsewhere.
    {"name": "Torre Norte", "project_number": "2025-111", "key": "localised_tool",
     "tool_names": {"change_events": ("gestion_de_cambios", "Eventos de cambio")}},
]
_DEFAULT_SEGMENTS = [("cost_code", "Cost Code", ".", None),
                     ("line_item_type", "Cost Type", ".", None)]


def create_demo_company(db_path: str, name: str = "Summit Ridge Builders", *,
                        contract_projects: bool = False) -> dict[str, Any]:
    """Create a company with credentials, demo projects and codes (plus _PATTERN_PROJECTS)."""
    # With contract_projects, the answer lists those projects under "contract_projects" by key.
    db = connect(db_path)
    try:
        ensure_schema(db)
        with write_transaction(db):
            return _seed(db, name, contract_projects)
    finally:
        db.close()


def _seed(db: sqlite_utils.Database, name: str, contract_projects: bool) -> dict[str, Any]:
    """Insert one company and everything under it; runs inside a write transaction."""
    now = iso_now()
    company_id = next_id(db)
    user_id = next_id(db)
    db.table("companies").insert({
        "id": company_id, "name": name, "service_user_id": user_id,
        "service_user_name": "Extra Work Tickets (service account)",
        "service_user_login": f"dmsa-{user_id}@sandbox.invalid",
        "rate_limit_per_hour": None, "created_at": now,
    })
    client_id = secrets.token_urlsafe(32)
    client_secret = secrets.token_urlsafe(32)
    db.table("clients").insert({
        "client_id": client_id, "company_id": company_id,
        "secret_sha256": hashlib.sha256(client_secret.encode()).hexdigest(), "created_at": now,
    })
    db.table("change_event_statuses").insert_all(
        {"id": next_id(db), "company_id": company_id, "name": status_name,
         "mapped_to_status": mapped, "show_in_select": shown, "default_status": default}
        for status_name, mapped, default, shown in _STATUSES
    )
    db.table("uoms").insert_all(
        {"id": next_id(db), "company_id": company_id, "name": uom, "description": description,
         "is_standard": 1, "category_id": index, "category": category}
        for index, (uom, description, category) in enumerate(_UOMS, start=1))
    cost_types = []
    for code, type_name, base_type in _COST_TYPES:
        row = {"id": next_id(db), "company_id": company_id, "code": code, "name": type_name,
               "base_type": base_type, "created_at": now, "updated_at": now}
        db.table("line_item_types").insert(row)
        cost_types.append(row)
    vendors = seed_company(db, company_id, now, next_id)
    projects = []
    for spec in _PROJECTS:
        project_id = _seed_project(db, company_id, spec, cost_types, now)
        seed_project(db, company_id, project_id, vendors, now, next_id)
        projects.append({"id": project_id, "name": spec["name"],
                         "change_events": spec["change_events"]})
    result = {"company_id": company_id, "client_id": client_id, "client_secret": client_secret,
              "projects": projects}
    if contract_projects:
        base = _PROJECTS[0]
        result["contract_projects"] = {
            spec["key"]: _seed_project(db, company_id, {
                **base, "name": spec["name"], "project_number": spec["project_number"],
                "change_events": True, **spec}, cost_types, now)
            for spec in _PATTERN_PROJECTS}
        for project_id in result["contract_projects"].values():
            seed_project(db, company_id, project_id, vendors, now, next_id)
    return result


def _seed_project(db: sqlite_utils.Database, company_id: int, spec: dict[str, Any],
                  cost_types: list[dict[str, Any]], now: str) -> int:
    """Insert one project with its tools, cost codes, WBS segments and budget codes."""
    project_id = next_id(db)
    db.table("projects").insert({
        "id": project_id, "company_id": company_id, "name": spec["name"],
        "display_name": f"{spec['project_number']} - {spec['name']}",
        "project_number": spec["project_number"], "address": spec["address"],
        "city": spec["city"], "state_code": spec["state_code"], "zip": spec["zip"],
        "time_zone": spec["time_zone"], "stage": spec["stage"], "active": spec["active"],
        "created_at": now, "updated_at": now,
        "manpower_status": spec.get("manpower_status", "approved"),
    })
    _seed_tools(db, project_id, spec)
    segment_ids, extra_items, sub_jobs = _seed_segments(db, project_id, spec, now)
    cost_segment, type_segment = segment_ids["cost_code"], segment_ids["line_item_type"]
    # The budget codes each cost code gets: of no sub job (unless one is required), and of
    # each sub job.
    variants = [None] if not sub_jobs or spec.get("sub_job_optional") else []
    variants += list(sub_jobs)
    type_items = _seed_type_items(db, project_id, type_segment, cost_types)
    position = 0
    # Each sub job has cost-code items of its own (its own cost codes' legacy ids), listed
    # only with `legacy_sub_job_id`; its budget codes are made on them.
    owners = [(None, None), *sub_jobs.items()]
    for division_code, division_name, codes in _DIVISIONS:
        position += 1
        divisions = _cost_code(db, project_id, sub_jobs, None, division_code, division_code,
                               division_name, position, now)
        division_items = {}
        for owner, sub_job_id in owners:
            division_items[owner] = next_id(db)
            db.table("wbs_segment_items").insert({
                "id": division_items[owner], "segment_id": cost_segment,
                "project_id": project_id, "code": division_code, "name": division_name,
                "parent_id": None, "path_code": division_code,
                "legacy_cost_code_id": divisions[owner], "legacy_line_item_type_id": None,
                "is_parent": 1, "status": "active", "sub_job_id": sub_job_id})
        for code, code_name in codes:
            position += 1
            full_code = f"{division_code}-{code}"
            cost_codes = _cost_code(db, project_id, sub_jobs, divisions, code, full_code,
                                    code_name, position, now)
            cost_items = {}
            for owner, sub_job_id in owners:
                cost_items[owner] = next_id(db)
                db.table("wbs_segment_items").insert({
                    "id": cost_items[owner], "segment_id": cost_segment,
                    "project_id": project_id, "code": code, "name": code_name,
                    "parent_id": division_items[owner], "path_code": full_code,
                    "legacy_cost_code_id": cost_codes[owner], "legacy_line_item_type_id": None,
                    "is_parent": 0, "status": "active", "sub_job_id": sub_job_id})
            db.table("wbs_codes").insert_all(
                {"id": next_id(db), "project_id": project_id,
                 "cost_code_item_id": cost_items[variant],
                 "type_item_id": type_items[type_code][0],
                 "description": f"{code_name}.{type_items[type_code][1]}",
                 "status": "inactive" if (full_code, type_code) in _INACTIVE else "active",
                 "created_at": now, "updated_at": now,
                 "extra_item_ids": json.dumps(sorted(extra_items + ([variant] if variant else [])))}
                for variant in variants for type_code in _budgeted_types(full_code)
            )
    return project_id


def _seed_tools(db: sqlite_utils.Database, project_id: int, spec: dict[str, Any]) -> None:
    """Insert a project's tools, switched on, renamed or unlisted as its spec says."""
    unlisted = spec.get("unlisted_change_events", False)
    switched = {"change_events": spec["change_events"] and not unlisted,
                "daily_log": spec.get("daily_log", True)}
    renamed = spec.get("tool_names", {})
    db.table("project_tools").insert_all(
        {"id": next_id(db), "project_id": project_id, "engine_name": engine,
         "title": renamed.get(engine, (None, title))[1],
         "shown_engine_name": renamed.get(engine, (None, None))[0],
         "is_active": int(switched.get(engine, True)),
         "position": position, "required": required,
         "listed": int(not (unlisted and engine == "change_events"))}
        for position, (engine, title, required) in enumerate(_TOOLS, start=1)
    )


def _seed_segments(db: sqlite_utils.Database, project_id: int, spec: dict[str, Any], now: str
                   ) -> tuple[dict[str, int], list[int], dict[int, int]]:
    """Insert a project's WBS segments with their items (and sub jobs): the segment ids by type,
    the items of segments other than cost code and cost type, and each sub job's id by item."""
    segments = spec.get("segments", _DEFAULT_SEGMENTS)
    segment_ids, extra_items, sub_jobs = {}, [], {}
    for position, (kind, segment_name, delimiter, codes) in enumerate(segments, start=1):
        segment_ids[kind] = next_id(db)
        db.table("wbs_segments").insert({
            "id": segment_ids[kind], "project_id": project_id, "type": kind,
            "name": segment_name, "position": position, "delimiter": delimiter,
            "required": int(not (kind == "sub_job" and spec.get("sub_job_optional"))),
            "structure": "tiered" if kind == "cost_code" else "flat",
            "in_pattern": int(kind != spec.get("outside_pattern"))})
        for code in codes or ():
            item_id = next_id(db)
            if kind == "sub_job":
                sub_jobs[item_id] = next_id(db)
                db.table("sub_jobs").insert({
                    "id": sub_jobs[item_id], "project_id": project_id, "code": code,
                    "name": f"Building {code}", "origin_id": None, "created_at": now,
                    "updated_at": now})
            elif kind != spec.get("outside_pattern"):
                extra_items.append(item_id)
            db.table("wbs_segment_items").insert({
                "id": item_id, "segment_id": segment_ids[kind], "project_id": project_id,
                "code": code, "name": f"{segment_name} {code}", "parent_id": None,
                "path_code": code, "legacy_cost_code_id": None, "legacy_line_item_type_id": None,
                "is_parent": 0, "status": "active", "sub_job_id": sub_jobs.get(item_id)})
    return segment_ids, extra_items, sub_jobs


def _seed_type_items(db: sqlite_utils.Database, project_id: int, type_segment: int,
                     cost_types: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    """Insert a cost-type segment item per cost type: their ids and names by cost type code."""
    type_items = {}
    for cost_type in cost_types:
        item_id = next_id(db)
        type_items[cost_type["code"]] = (item_id, cost_type["name"])
        db.table("wbs_segment_items").insert({
            "id": item_id, "segment_id": type_segment, "project_id": project_id,
            "code": cost_type["code"], "name": cost_type["name"], "parent_id": None,
            "path_code": cost_type["code"], "legacy_cost_code_id": None,
            "legacy_line_item_type_id": cost_type["id"], "is_parent": 0, "status": "active",
        })
    return type_items


def _cost_code(db: sqlite_utils.Database, project_id: int, sub_jobs: dict[int, int],
               parents: dict[int | None, int] | None, code: str, full_code: str, name: str,
               position: int, now: str) -> dict[int | None, int]:
    """Insert a cost code for the project and a copy for each sub job; their ids by sub-job
    segment item (None: the project's own)."""
    ids = {}
    for item, sub_job_id in [(None, None), *sub_jobs.items()]:
        ids[item] = next_id(db)
        db.table("cost_codes").insert({
            "id": ids[item], "project_id": project_id, "sub_job_id": sub_job_id,
            "parent_id": parents[item] if parents else None, "code": code,
            "full_code": full_code, "name": name, "position": position, "created_at": now,
            "updated_at": now})
    return ids


def _budgeted_types(full_code: str) -> tuple[str, ...]:
    """Which cost types get a budget code for a cost code in the demo data."""
    if full_code in _NO_BUDGET_CODES:
        return ()
    types = _BUDGETED_TYPES + (("SVC",) if full_code.startswith("01-") else ())
    if full_code in _NO_LABOR:
        return tuple(code for code in types if code != "L")
    return types
