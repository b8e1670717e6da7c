"""Projects, cost codes, budget codes and capability, read from the project system."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from flask import current_app
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from models.schemas import (
    BudgetCodeOut,
    BudgetCodeRef,
    Capability,
    CostCodeItem,
    Project,
)
from services.cache import TTLCache
from models import KnownProject, db
from services.connections import ProjectSystemBusy, client_for, project_system_errors
from services.database import write_transaction
from services.errors import NotFound, ProjectSystemRefused
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
    """The company's projects, cached briefly; each answer is also kept as the last known list."""
    def load() -> list[RemoteProject]:
        with project_system_errors(company_id):
            found = client_for(company_id).list_projects()
        _remember_projects(company_id, found)
        return found
    return _shared_load("projects", ("projects", company_id), current_app.config["PROJECT_CACHE_S"], load)


def _shared_load(cache: str, key, ttl_s: float, load):
    """A cached answer, loaded by one caller at a time; others wait only briefly for it."""
    try:
        return _cache(cache).get_or_load(key, ttl_s, load,
                                         wait_s=float(current_app.config["PROJECT_SYSTEM_SLOT_WAIT_S"]))
    except TimeoutError:
        raise ProjectSystemBusy("the project system is slow for this company right now; try again "
                                "in a moment", headers={"Retry-After": "5"}) from None


def _remember_projects(company_id: int, found: list[RemoteProject]) -> None:
    """Keep the project list the project system just gave (written only when it changed)."""
    listed = {str(project.id): project.name[:300] for project in found}
    stored = dict(db.session.execute(select(KnownProject.project_id, KnownProject.name)
                                     .where(KnownProject.company_id == company_id)).all())
    if stored == listed:
        return
    try:
        with write_transaction() as session:
            session.execute(delete(KnownProject).where(KnownProject.company_id == company_id))
            session.add_all([KnownProject(company_id=company_id, project_id=project_id, name=name)
                             for project_id, name in listed.items()])
    except IntegrityError:  # another process stored the same answer at the same moment
        pass


def project_for_new_ticket(company_id: int, project_id: str) -> str:
    """The project id of a new ticket, checked without waiting on the project system.

    The project list in the cache answers if it is fresh; else a project the project
    system listed before (the last known list) is accepted as it is. Only a project never
    seen is looked up, and then, with the project system away, it is not found (404), or
    the project system's error (502) if this company never had a list at all.
    """
    wanted = str(project_id).strip()
    listed = _cache("projects").peek(("projects", company_id))
    if listed is not None:
        if any(str(project.id) == wanted for project in listed):
            return wanted
        raise NotFound("no such project on this company", code="project_not_found")
    known = db.session.scalar(select(func.count()).select_from(KnownProject)
                              .where(KnownProject.company_id == company_id,
                                     KnownProject.project_id == wanted))
    if known:
        return wanted
    try:
        return str(require_project(company_id, wanted).id)
    except ProjectSystemRefused:
        ever = db.session.scalar(select(func.count()).select_from(KnownProject)
                                 .where(KnownProject.company_id == company_id))
        if ever:
            raise NotFound("no such project among those the project system last listed for "
                           "this company (it cannot be reached just now)",
                           code="project_not_found")
        raise


def cached_catalog(company_id: int, project_id: str) -> Catalog | None:
    """A project's codes if this process read them before (even a while ago), without a call."""
    if not str(project_id).isdecimal():
        return None
    return _cache("catalogs").peek(("catalog", company_id, int(project_id)), stale=True)


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
    known = _cache("projects").peek(("projects", company_id), stale=True) or []
    project = next((p for p in known if str(p.id) == str(project_id).strip()), None)
    return project_zone(project.time_zone) if project is not None else None


def known_project_name(company_id: int, project_id: str) -> str | None:
    """A project's name as last read from the project system, without calling it."""
    listed = _cache("projects").peek(("projects", company_id), stale=True) or []
    project = next((p for p in listed if str(p.id) == str(project_id).strip()), None)
    if project is not None:
        return project.display_name or project.name
    return db.session.scalar(select(KnownProject.name).where(
        KnownProject.company_id == company_id, KnownProject.project_id == str(project_id)))


def list_projects(company_id: int) -> list[Project]:
    """The company's projects as API shapes."""
    return [Project(id=str(p.id), name=p.name, display_name=p.display_name,
                    project_number=p.project_number) for p in remote_projects(company_id)]


def catalog(company_id: int, project_id: str) -> Catalog:
    """Cost codes, cost types and budget codes of a project, cached briefly."""
    project = require_project(company_id, project_id)

    def load() -> Catalog:
        with project_system_errors(company_id):
            cost_codes, cost_types, budget_codes = client_for(company_id).read_catalog(project.id)
        return Catalog(cost_codes=tuple(cost_codes), cost_types=tuple(cost_types),
                       budget_codes=tuple(budget_codes))
    return _shared_load("catalogs", ("catalog", company_id, project.id),
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
    with project_system_errors(company_id, "write"):
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
        with project_system_errors(company_id):
            return client_for(company_id).change_events_enabled(project.id)
    return _shared_load("capabilities", ("capability", company_id, project.id),
                        current_app.config["CAPABILITY_CACHE_S"], load)


def capability(company_id: int, project_id: str) -> Capability:
    """Where a ticket on this project can be filed, and what approve does by default."""
    enabled = change_events_enabled(company_id, project_id)
    return Capability(change_events=enabled, daily_log=True,
                      destination="change_event" if enabled else None)


def clear_caches() -> None:
    """Forget every cached project-system answer (tests and the connect command use this)."""
    current_app.extensions.pop("project_system_caches", None)
