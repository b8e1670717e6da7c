"""Projects, cost codes, budget codes and capability, read from the project system."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from flask import current_app

from models.schemas import (
    BudgetCodeOut,
    BudgetCodeRef,
    Capability,
    CostCodeItem,
    Project,
)
from services.cache import TTLCache
from services.connections import client_for, project_system_errors
from services.errors import NotFound
from services.project_system import BudgetCode, CostCode, CostType, RemoteProject
from services.project_system.zones import project_zone
from services.routing import Router



def _cache(name: str) -> TTLCache:
    """This app's cache of one kind; each app (and so each test) has its own."""
    caches = current_app.extensions.setdefault("project_system_caches", {})
    return caches.setdefault(name, TTLCache())


@dataclass(frozen=True)
class Catalog:
    """A project's cost codes, cost types and budget codes, as one cached read."""

    cost_codes: tuple[CostCode, ...]
    cost_types: tuple[CostType, ...]
    budget_codes: tuple[BudgetCode, ...]

    @functools.cached_property
    def router(self) -> Router:
        """A router over this catalog, built once per cached catalog (it indexes every name)."""
        return Router(self.cost_codes, self.budget_codes)

    def budget_code(self, cost_code_id: int, cost_type: str) -> BudgetCode | None:
        """The budget code for a cost code and cost type, if the project has one."""
        for code in self.budget_codes:
            if code.cost_code_id == cost_code_id and code.cost_type == cost_type:
                return code
        return None

    def budget_code_by_id(self, budget_code_id: int) -> BudgetCode | None:
        """A budget code by id, if it belongs to the project."""
        return next((c for c in self.budget_codes if c.id == budget_code_id), None)

    def cost_code_by_id(self, cost_code_id: int) -> CostCode | None:
        """A cost code by id, if it belongs to the project."""
        return next((c for c in self.cost_codes if c.id == cost_code_id), None)


def remote_projects(company_id: int) -> list[RemoteProject]:
    """The company's projects, cached briefly."""
    def load() -> list[RemoteProject]:
        with project_system_errors():
            return client_for(company_id).list_projects()
    return _cache("projects").get_or_load(("projects", company_id),
                                 current_app.config["PROJECT_CACHE_S"], load)


def require_project(company_id: int, project_id: str) -> RemoteProject:
    """Return the project if it is on this company, else 404 project_not_found."""
    wanted = str(project_id).strip()
    for project in remote_projects(company_id):
        if str(project.id) == wanted:
            return project
    raise NotFound("no such project on this company", code="project_not_found")


def time_zone(company_id: int, project_id: str) -> ZoneInfo:
    """The project's time zone, in which its working days are dated (UTC when it names none)."""
    return project_zone(require_project(company_id, project_id).time_zone)


def cached_time_zone(company_id: int, project_id: str) -> ZoneInfo | None:
    """The project's time zone as last read from the project system, without calling it."""
    known = _cache("projects").peek(("projects", company_id)) or []
    project = next((p for p in known if str(p.id) == str(project_id).strip()), None)
    return project_zone(project.time_zone) if project is not None else None


def list_projects(company_id: int) -> list[Project]:
    """The company's projects as API shapes."""
    return [Project(id=str(p.id), name=p.name, display_name=p.display_name,
                    project_number=p.project_number) for p in remote_projects(company_id)]


def catalog(company_id: int, project_id: str) -> Catalog:
    """Cost codes, cost types and budget codes of a project, cached briefly."""
    project = require_project(company_id, project_id)

    def load() -> Catalog:
        with project_system_errors():
            cost_codes, cost_types, budget_codes = client_for(company_id).read_catalog(project.id)
        return Catalog(cost_codes=tuple(cost_codes), cost_types=tuple(cost_types),
                       budget_codes=tuple(budget_codes))
    return _cache("catalogs").get_or_load(("catalog", company_id, project.id),
                                 current_app.config["CATALOG_CACHE_S"], load)


def search_cost_codes(company_id: int, project_id: str, q: str | None) -> list[CostCodeItem]:
    """Cost codes whose code or name contains q (case-insensitive), with their budget codes."""
    codes = catalog(company_id, project_id)
    needle = (q or "").casefold()
    items = []
    for cost_code in codes.cost_codes:
        if needle and needle not in cost_code.code.casefold() and needle not in cost_code.name.casefold():
            continue
        budget = [BudgetCodeRef(id=b.id, code=b.flat_code, cost_type=b.cost_type)
                  for b in codes.budget_codes if b.cost_code_id == cost_code.id]
        items.append(CostCodeItem(id=cost_code.id, code=cost_code.code, name=cost_code.name,
                                  budget_codes=budget))
    return items


def create_budget_code(company_id: int, project_id: str, cost_code_item_id: int,
                       cost_type: str) -> BudgetCodeOut:
    """Create the budget code for a cost code and cost type, or return the one that exists."""
    project = require_project(company_id, project_id)
    codes = catalog(company_id, project_id)
    if codes.cost_code_by_id(cost_code_item_id) is None:
        raise NotFound(f"no cost code {cost_code_item_id} on project {project.id}",
                       code="cost_code_not_found")
    existing = codes.budget_code(cost_code_item_id, cost_type)
    if existing is not None:
        return _budget_code_out(existing, created=False)
    with project_system_errors():
        made = client_for(company_id).create_budget_code(project.id, cost_code_item_id, cost_type)
    _cache("catalogs").invalidate(("catalog", company_id, project.id))
    return _budget_code_out(made, created=True)


def _budget_code_out(code: BudgetCode, *, created: bool) -> BudgetCodeOut:
    """Shape a budget code for the API."""
    return BudgetCodeOut(id=code.id, code=code.flat_code, cost_type=code.cost_type,
                         cost_code_item_id=code.cost_code_id, description=code.description,
                         created=created)


def change_events_enabled(company_id: int, project_id: str) -> bool:
    """Whether the project has the change-event tool, cached for CAPABILITY_CACHE_S."""
    project = require_project(company_id, project_id)

    def load() -> bool:
        with project_system_errors():
            return client_for(company_id).change_events_enabled(project.id)
    return _cache("capabilities").get_or_load(("capability", company_id, project.id),
                                     current_app.config["CAPABILITY_CACHE_S"], load)


def capability(company_id: int, project_id: str) -> Capability:
    """Where a ticket on this project can be filed, and what approve does by default."""
    enabled = change_events_enabled(company_id, project_id)
    return Capability(change_events=enabled, daily_log=True,
                      destination="change_event" if enabled else None)


def clear_caches() -> None:
    """Forget every cached project-system answer (tests and the connect command use this)."""
    current_app.extensions.pop("project_system_caches", None)
