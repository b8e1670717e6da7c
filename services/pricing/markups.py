"""Markups per project: overhead, profit, bond, insurance and tax, applied in a stated order.

Each markup is a percentage of the amounts of chosen line kinds; a compounding markup also
takes the markups before it into its base. Every markup becomes a line of its own on a
ticket (after the cost lines), rounded to cents half up like any line, and lands on the
budget code the PM picked for it, which is checked like any other route.
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import select

from models import ProjectMarkups, db, utcnow
from models.schemas import Markup, MarkupsInput, ProjectMarkupsOut
from services.platform.database import write_transaction
from services.platform.errors import Conflict, field_problem
from services.project_system import projects

CENT = Decimal("0.01")
HUNDRED = Decimal(100)
KIND_NAMES = {"overhead": "Overhead", "profit": "Profit", "bond": "Bond",
              "insurance": "Insurance", "tax": "Tax"}


def _text(value: Decimal) -> str:
    """A decimal as exact text."""
    return format(value.normalize(), "f")


def stored_markups(company_id: int, project_id: str) -> list[dict[str, Any]]:
    """The project's markups as stored, in the order they apply (none when unset)."""
    row = db.session.scalar(select(ProjectMarkups).where(
        ProjectMarkups.company_id == company_id, ProjectMarkups.project_id == str(project_id)))
    return list(row.markups) if row is not None else []


def get_markups(company_id: int, project_id: str) -> ProjectMarkupsOut:
    """A project's markups with the flat text of their budget codes."""
    project = str(projects.require_project(company_id, project_id).id)
    codes = projects.catalog(company_id, project)
    return _shape(project, stored_markups(company_id, project), codes)


def save_markups(company_id: int, project_id: str, data: MarkupsInput,
                 actor: str | None) -> ProjectMarkupsOut:
    """Replace a project's markups; every budget code must be one of the project's."""
    project = str(projects.require_project(company_id, project_id).id)
    codes = projects.catalog(company_id, project)
    problems = [field_problem(f"markups[{i}].budget_code_id",
                              f"budget code {item.budget_code_id} is not on project {project}")
                for i, item in enumerate(data.markups)
                if codes.budget_code_by_id(item.budget_code_id) is None]
    if problems:
        raise Conflict("some markups name a budget code the project does not have; see details",
                       code="budget_code_not_found", details=problems)
    stored = [{"name": item.name or KIND_NAMES[item.kind], "kind": item.kind,
               "percent": _text(item.percent), "applies_to": list(dict.fromkeys(item.applies_to)),
               "compound": item.compound, "budget_code_id": item.budget_code_id}
              for item in data.markups]
    with write_transaction() as session:
        row = session.get(ProjectMarkups, (company_id, project))
        if row is None:
            row = ProjectMarkups(company_id=company_id, project_id=project)
            session.add(row)
        row.markups = stored
        row.updated_at = utcnow()
        row.updated_by = actor
    return _shape(project, stored, codes)


def _shape(project_id: str, stored: list[dict[str, Any]], codes) -> ProjectMarkupsOut:
    """Stored markups in the API shape."""
    markups = []
    for item in stored:
        code = codes.budget_code_by_id(item["budget_code_id"]) if codes is not None else None
        markups.append(Markup(**{**item, "percent": Decimal(item["percent"])},
                              budget_code=code.flat_code if code else None))
    return ProjectMarkupsOut(project_id=project_id, markups=markups)


def describe(item: dict[str, Any]) -> str:
    """'Overhead 10 % on labor, materials (compounding)'."""
    words = f"{item['name']} {item['percent']} % on {', '.join(item['applies_to'])}"
    return words + (" and the markups before it" if item["compound"] else "")


def apply(markups: list[dict[str, Any]], lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The markup lines of a ticket's cost lines, in the markups' order.

    A markup's base is the sum of the amounts of the lines of its kinds, plus, when it
    compounds, the (rounded) amounts of every markup before it. A markup of 0 is left out.
    """
    applied: list[dict[str, Any]] = []
    earlier = Decimal(0)
    for item in markups:
        base = sum((Decimal(line["amount"]) for line in lines if line["kind"] in item["applies_to"]),
                   Decimal(0))
        if item["compound"]:
            base += earlier
        amount = (base * Decimal(item["percent"]) / HUNDRED).quantize(CENT, rounding=ROUND_HALF_UP)
        earlier += amount
        if amount == 0:
            continue
        applied.append({"kind": "markup", "name": item["name"], "markup": item["kind"],
                        "percent": item["percent"], "applies_to": item["applies_to"],
                        "compound": item["compound"], "base": _text(base.quantize(CENT)),
                        "budget_code_id": item["budget_code_id"], "amount": _text(amount),
                        "description": f"{describe(item)}: {base.quantize(CENT)} × {item['percent']} %"})
    return applied
