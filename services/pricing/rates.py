"""Rate sheets: agreed rates per project (or the company's default) in force from a date.

The office keeps them; tickets are priced from the sheet in force on the day their work was
done (see services.pricing.pricing). CSV import and export use one column layout, and an import goes
through the same validator as the JSON body, refused whole when any row is bad.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from sqlalchemy import or_, select

from models import RateSheet as RateSheetRecord
from models import db, utcnow
from models.schemas import RateSheet, RateSheetCsv, RateSheetCsvInput, RateSheetInput
from services.platform.database import write_transaction
from services.platform.errors import NotFound, ServiceError, ValidationFailed, field_problem
from services.platform.validation import validation_details
from services.pricing import authorizations, markups
from services.project_system import project_settings, projects

CSV_COLUMNS = ("kind", "item", "st", "ot", "dt", "hourly", "daily", "unit_cost", "percent")
CSV_KINDS = ("labor", "equipment", "material", "material_markup")
# Cells a spreadsheet would run as a formula.
FORMULA_STARTS = ("=", "+", "-", "@")


def _text(value: Decimal | None) -> str | None:
    """A decimal as exact text."""
    return None if value is None else format(value.normalize(), "f")


def _scope(company_id: int, project_id: str | None) -> str | None:
    """The stored project id of a sheet: None for the company default, else a checked project."""
    if project_id is None:
        return None
    return str(projects.require_project(company_id, project_id).id)


def save_sheet(company_id: int, project_id: str | None, data: RateSheetInput) -> RateSheet:
    """Store a sheet; one with the same scope and effective date is replaced."""
    scope = _scope(company_id, project_id)
    content = dict(
        name=data.name, material_markup=_text(data.material_markup),
        labor=[{"classification": item.classification, "st": _text(item.st),
                "ot": _text(item.ot), "dt": _text(item.dt)} for item in data.labor],
        equipment=[{"description": item.description, "hourly": _text(item.hourly),
                    "daily": _text(item.daily)} for item in data.equipment],
        materials=[{"description": item.description, "unit_cost": _text(item.unit_cost)}
                   for item in data.materials])
    with write_transaction() as session:
        record = session.scalar(select(RateSheetRecord).where(
            RateSheetRecord.company_id == company_id, _same_scope(scope),
            RateSheetRecord.effective_from == data.effective_from))
        if record is None:
            record = RateSheetRecord(company_id=company_id, project_id=scope,
                                     effective_from=data.effective_from, **content)
            session.add(record)
        else:
            for name, value in content.items():
                setattr(record, name, value)
            record.updated_at = utcnow()
    return shape_sheet(record)


def _same_scope(scope: str | None):
    """The condition for sheets of one project, or of the company default."""
    if scope is None:
        return RateSheetRecord.project_id.is_(None)
    return RateSheetRecord.project_id == scope


def list_sheets(company_id: int, project_id: str | None) -> list[RateSheet]:
    """A project's sheets (or the company defaults), newest effective date first."""
    scope = _scope(company_id, project_id)
    rows = db.session.scalars(select(RateSheetRecord).where(
        RateSheetRecord.company_id == company_id, _same_scope(scope))
        .order_by(RateSheetRecord.effective_from.desc()))
    return [shape_sheet(row) for row in rows]


def find_sheet(company_id: int, sheet_id: int | str) -> RateSheetRecord:
    """One of the company's sheets, or 404 as for a missing one."""
    record = None
    if str(sheet_id).isdecimal() and int(sheet_id) < 2**31:
        record = db.session.scalar(select(RateSheetRecord).where(
            RateSheetRecord.id == int(sheet_id), RateSheetRecord.company_id == company_id))
    if record is None:
        raise NotFound("no such rate sheet on this company", code="rate_sheet_not_found")
    return record


def get_sheet(company_id: int, sheet_id: int | str) -> RateSheet:
    """One sheet as the API shows it."""
    return shape_sheet(find_sheet(company_id, sheet_id))


def delete_sheet(company_id: int, sheet_id: int | str) -> RateSheet:
    """Remove a sheet; tickets it priced keep their prices."""
    record = find_sheet(company_id, sheet_id)
    shaped = shape_sheet(record)
    with write_transaction() as session:
        session.delete(session.get(RateSheetRecord, record.id))
    return shaped


def sheet_in_force(company_id: int, project_id: str, day: dt.date) -> RateSheetRecord | None:
    """The project's latest sheet effective on or before `day`, else the company default's."""
    return db.session.scalar(select(RateSheetRecord).where(
        RateSheetRecord.company_id == company_id,
        or_(_same_scope(project_id), _same_scope(None)),
        RateSheetRecord.effective_from <= day)
        .order_by(RateSheetRecord.project_id.is_(None), RateSheetRecord.effective_from.desc(),
                  RateSheetRecord.id.desc()).limit(1))


def shape_sheet(record: RateSheetRecord) -> RateSheet:
    """A stored sheet in the API shape."""
    return RateSheet.model_validate({
        "id": record.id, "project_id": record.project_id, "name": record.name,
        "effective_from": record.effective_from, "material_markup": Decimal(record.material_markup),
        "labor": record.labor, "equipment": record.equipment, "materials": record.materials,
        "created_at": record.created_at, "updated_at": record.updated_at})


# ------------------------------------------------------------------ CSV

def parse_csv(data: RateSheetCsvInput) -> RateSheetInput:
    """Read a CSV sheet through the one sheet validator; any bad row refuses the whole sheet.

    Problems are named by row number as a spreadsheet shows it (the header is row 1).
    """
    header, rows = _csv_rows(data.csv)
    body: dict[str, Any] = {"name": data.name, "effective_from": data.effective_from,
                            "labor": [], "equipment": [], "materials": []}
    origin: dict[tuple[str, int], int] = {}
    problems = []
    for number, cells in enumerate(rows, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        row = {name: (cells[i].strip() if i < len(cells) else "") for i, name in enumerate(header)}
        if not _add_row(body, origin, number, row):
            problems.append(field_problem(f"row {number}", f"kind {row.get('kind', '')[:40]!r} is "
                                                          f"not one of {', '.join(CSV_KINDS)}"))
    try:
        sheet = RateSheetInput.model_validate(body)
    except ValidationError as error:
        for item in validation_details(error):
            problems.append(_row_problem(item, origin))
        sheet = None
    if problems:
        rows_named = ", ".join(dict.fromkeys(p["field"] for p in problems))
        raise ValidationFailed(f"the sheet was not imported; fix {rows_named} and import it again",
                               details=problems)
    return sheet


def _csv_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The CSV's header (names folded) and the rows below it; a 400 when it cannot be read, is
    empty or its header lacks the kind and item columns."""
    # newline="" leaves line ends to the csv module, which takes \r, \n and \r\n alike.
    try:
        rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"), newline="")))
    except csv.Error as error:
        raise ValidationFailed("the CSV cannot be read", details=[
            field_problem("csv", f"the CSV cannot be read: {error}")]) from None
    if not rows:
        raise ValidationFailed("the CSV is empty", details=[field_problem("csv", "the CSV is empty")])
    header = [cell.strip().casefold() for cell in rows[0]]
    missing = [name for name in ("kind", "item") if name not in header]
    if missing:
        raise ValidationFailed("the CSV has no header row with the sheet's columns", details=[
            field_problem("row 1", f"the header must name the columns {', '.join(CSV_COLUMNS)}; "
                                   f"missing: {', '.join(missing)}")])
    return header, rows[1:]


def _add_row(body: dict[str, Any], origin: dict[tuple[str, int], int], number: int,
             row: dict[str, str]) -> bool:
    """Add a CSV row to the sheet's body by its kind, noting its row number; False for a kind
    the sheet does not have."""
    kind = row.get("kind", "").casefold()
    value = {name: row.get(name) or None for name in CSV_COLUMNS}
    if kind == "labor":
        origin[("labor", len(body["labor"]))] = number
        body["labor"].append({"classification": value["item"], "st": value["st"],
                              "ot": value["ot"], "dt": value["dt"]})
    elif kind == "equipment":
        origin[("equipment", len(body["equipment"]))] = number
        body["equipment"].append({"description": value["item"], "hourly": value["hourly"],
                                  "daily": value["daily"]})
    elif kind == "material":
        origin[("materials", len(body["materials"]))] = number
        body["materials"].append({"description": value["item"],
                                  "unit_cost": value["unit_cost"]})
    elif kind == "material_markup":
        origin[("material_markup", 0)] = number
        body["material_markup"] = value["percent"]
    else:
        return False
    return True


_CSV_NAMES = {"classification": "item", "description": "item", "material_markup": "percent"}


def _row_problem(problem: dict[str, str], origin: dict[tuple[str, int], int]) -> dict[str, str]:
    """A validation problem at a path such as 'labor[2].st' named by its CSV row and column."""
    path = problem["field"]
    head, _, column = path.partition(".")
    if "[" in head:
        kind, index = head.rstrip("]").split("[")
        number = origin.get((kind, int(index)))
        if number is not None:
            column = _CSV_NAMES.get(column, column)
            return field_problem(f"row {number}", f"{column}: {problem['message']}" if column
                                 else problem["message"])
    if head == "material_markup" and ("material_markup", 0) in origin:
        return field_problem(f"row {origin[('material_markup', 0)]}", f"percent: {problem['message']}")
    if head in ("labor", "equipment", "materials"):
        return field_problem(head, problem["message"])
    return problem


def _cell(value: Any) -> str:
    """A CSV cell that a spreadsheet shows as text, never runs as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def sheet_csv(company_id: int, sheet_id: int | str) -> RateSheetCsv:
    """A sheet as CSV text in the import's columns."""
    record = find_sheet(company_id, sheet_id)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    blank = dict.fromkeys(CSV_COLUMNS, None)
    for item in record.labor:
        writer.writerow([_cell(v) for v in {**blank, "kind": "labor", "item": item["classification"],
                                             "st": item["st"], "ot": item["ot"],
                                             "dt": item["dt"]}.values()])
    for item in record.equipment:
        writer.writerow([_cell(v) for v in {**blank, "kind": "equipment", "item": item["description"],
                                             "hourly": item["hourly"],
                                             "daily": item["daily"]}.values()])
    for item in record.materials:
        writer.writerow([_cell(v) for v in {**blank, "kind": "material", "item": item["description"],
                                             "unit_cost": item["unit_cost"]}.values()])
    writer.writerow([_cell(v) for v in {**blank, "kind": "material_markup",
                                         "percent": record.material_markup}.values()])
    scope = record.project_id or "company"
    return RateSheetCsv(filename=f"rate-sheet-{scope}-{record.effective_from.isoformat()}.csv",
                        csv=out.getvalue())


# ------------------------------------------------------------------ the page

@dataclass
class RatesPage:
    """What the rate-sheet page shows: the scope, its sheets and the projects to switch to."""

    project_id: str | None
    scope_name: str
    sheets: list[RateSheet]
    projects: list[tuple[str, str]]
    markups: list[dict[str, Any]] = field(default_factory=list)
    budget_codes: list[tuple[int, str]] = field(default_factory=list)
    authorizations: list[Any] = field(default_factory=list)
    # How the project's change events are written (None while Procore cannot say).
    settings: Any = None


def rates_page(company_id: int, project_id: str | None) -> RatesPage:
    """A project's sheets (or the company defaults) with the project list for the picker."""
    try:
        names = {p.id: p.display_name or p.name for p in projects.list_projects(company_id)}
    except ServiceError:
        names = {}
    sheets = list_sheets(company_id, project_id)
    scope_name = "Company default" if project_id is None else names.get(project_id, project_id)
    page = RatesPage(project_id=project_id, scope_name=scope_name, sheets=sheets,
                     projects=sorted(names.items(), key=lambda item: item[1]))
    if project_id is not None:
        page.markups.extend(markups.stored_markups(company_id, project_id))
        try:
            page.authorizations.extend(authorizations.list_for_project(company_id, project_id))
            codes = projects.catalog(company_id, project_id)
            page.settings = project_settings.get_settings(company_id, project_id)
        except ServiceError:
            return page
        page.budget_codes.extend(sorted(((c.id, f"{c.flat_code} — {c.description}")
                                         for c in codes.budget_codes), key=lambda c: c[1]))
    return page


def markups_from_form(form) -> dict[str, Any]:
    """The markup rows of the page's form as the API's body; rows without a percent are left out."""
    rows = []
    for i in range(MARKUP_ROWS):
        prefix = f"markups[{i}]."
        if not (form.get(prefix + "percent") or "").strip():
            continue
        code = (form.get(prefix + "budget_code_id") or "").strip()
        rows.append({"name": form.get(prefix + "name") or None, "kind": form.get(prefix + "kind"),
                     "percent": form.get(prefix + "percent"),
                     "applies_to": form.getlist(prefix + "applies_to"),
                     "compound": form.get(prefix + "compound") == "on",
                     "budget_code_id": int(code) if code.isdecimal() and len(code) < 18 else code})
    return {"markups": rows}


MARKUP_ROWS = 6
