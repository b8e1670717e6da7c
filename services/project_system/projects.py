"""Projects, cost codes, budget codes and capability, read from the project system.

Every answer goes through one cache per app: fresh for its TTL, then kept as the last answer
known. API calls wait for the project system. Pages and approvals read `briefly`: an answer
known, even stale, is used at once while a fresh one loads in the background; with nothing
known they wait at most PAGE_WAIT_S (an approval longer: `waiting_up_to`). After a failure, or
a first read slower than that, they keep to what is known until it ends or PAGE_RETRY_S;
`away_since` says since when the project system has failed them (not merely been slow).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import functools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as futures_wait
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from flask import current_app, g, has_request_context
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from models import KnownProject, db, utcnow
from models.schemas import BudgetCodeOut, BudgetCodeRef, Capability, CostCodeItem, Project
from services.platform.cache import TTLCache
from services.platform.database import insert_or_merge
from services.platform.errors import NotFound, ProjectSystemRefused, ServiceError
from services.project_system import BudgetCode, CostCode, CostType, RemoteProject
from services.project_system.connections import (
    ProjectSystemBusy,
    client_for,
    project_system_errors,
    refuse_while_paced,
)
from services.project_system.zones import UTC, local_date, project_zone

T = TypeVar("T")

# How long a page waits for the project system before answering with what it last knew, and
# how long after a failure pages keep to what they know before asking again.
PAGE_WAIT_S = 1.2
PAGE_RETRY_S = 30
PAGE_READ_THREADS = 16
# How long a `briefly` read with nothing known waits for a first answer (`waiting_up_to`).
_FIRST_WAIT: ContextVar[float] = ContextVar("first_wait", default=PAGE_WAIT_S)


NOTHING_KNOWN = "the project system cannot be reached and nothing is known about this yet"


class Unknown(ServiceError):
    """The project system is away and nothing was known before (the same 502 as a call that
    could not reach it)."""

    status = 502
    code = "project_system_unavailable"


@dataclass(frozen=True, eq=False)
class Catalog:
    """A project's cost codes, cost types and budget codes, as one cached read (compared by identity)."""

    cost_codes: tuple[CostCode, ...]
    cost_types: tuple[CostType, ...]
    budget_codes: tuple[BudgetCode, ...]

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


# ------------------------------------------------------------------ the one cache

@dataclass
class _Away:
    """Since when pages have found each company's project system away, and when it last failed."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    since: dict[int, dt.datetime] = field(default_factory=dict)
    failed_at: dict[int, float] = field(default_factory=dict)

    def gone(self, company_id: int) -> None:
        with self.lock:
            self.since.setdefault(company_id, utcnow())
            self.failed_at[company_id] = time.monotonic()

    def slow(self, company_id: int) -> None:
        """A first read outlasted a page's wait: pages keep to what they know, not told it is away."""
        with self.lock:
            self.failed_at[company_id] = time.monotonic()

    def back(self, company_id: int) -> None:
        with self.lock:
            self.since.pop(company_id, None)
            self.failed_at.pop(company_id, None)

    def resting(self, company_id: int) -> bool:
        """Whether it failed recently enough that pages do not ask it again yet."""
        with self.lock:
            failed = self.failed_at.get(company_id)
        return failed is not None and time.monotonic() - failed < PAGE_RETRY_S


_setup_lock = threading.Lock()


def _state(name: str, make: Callable[[], T]) -> T:
    """One piece of this app's project-system state (each app, so each test, has its own)."""
    with _setup_lock:
        return current_app.extensions.setdefault(name, make())


def _cache(name: str) -> TTLCache:
    """This app's cache of one kind of answer."""
    caches = _state("project_system_caches", dict)
    with _setup_lock:
        return caches.setdefault(name, TTLCache())


def cached_read(company_id: int, cache_name: str, key: tuple, ttl_s: float, load: Callable[[], T],
          briefly: bool) -> T:
    """One cached answer: waited for, or (`briefly`) the last one known while a fresh one loads."""
    cache = _cache(cache_name)
    if not briefly:
        try:
            return cache.get_or_load(key, ttl_s, load,
                                     wait_s=float(current_app.config["PROJECT_SYSTEM_SLOT_WAIT_S"]))
        except TimeoutError:
            raise ProjectSystemBusy("the project system is slow for this company right now; try "
                                    "again in a moment", headers={"Retry-After": "5"}) from None
    fresh = cache.peek(key)
    if fresh is not None:
        return fresh
    away = _state("project_system_away", _Away)
    known = cache.peek(key, stale=True)
    if not away.resting(company_id):
        asked: list[bool] = []  # whether this read asked the project system (not another's)

        def loading() -> T:
            asked.append(True)
            return load()
        future = background_read(lambda: cache.get_or_load(key, ttl_s, loading))
        note = functools.partial(_note_outcome, away, company_id, asked=asked)
        future.add_done_callback(note)
        if has_request_context():
            g.setdefault("project_system_reads", []).append((future, note))
        if known is not None:
            return known  # the page shows what it knew; the fresh answer is for the next one
        return _first_answer(future, away, company_id)
    if known is not None:
        return known
    raise Unknown(NOTHING_KNOWN)


def _first_answer(future: Future, away: _Away, company_id: int) -> Any:
    """The answer a read with nothing known waits for; busy (rate limit) or away without it."""
    try:
        return future.result(timeout=_FIRST_WAIT.get())
    except FutureTimeout:
        refuse_while_paced(company_id)
        away.slow(company_id)  # slow is not away: a hung one fails its read within its timeout
        raise Unknown(NOTHING_KNOWN) from None
    except ProjectSystemBusy:
        raise  # its rate limit: it answers, later
    except ServiceError as error:
        if error.status < 500:
            raise
    away.gone(company_id)
    raise Unknown(NOTHING_KNOWN)


@contextlib.contextmanager
def waiting_up_to(seconds: float) -> Iterator[None]:
    """`briefly` reads in the block wait up to `seconds` (not PAGE_WAIT_S) for a first answer
    when nothing is known yet."""
    token = _FIRST_WAIT.set(seconds)
    try:
        yield
    finally:
        _FIRST_WAIT.reset(token)


def _note_outcome(away: _Away, company_id: int, done: Future, asked: list[bool]) -> None:
    """After a page's read: the project system answered, or it is away (a refusal about the
    request itself, such as a project not found, says nothing about that). A read that found
    another's load of the same answer under way got the last answer known, not the project
    system's: it says nothing about it either."""
    error = done.exception()
    if error is None:
        if asked:
            away.back(company_id)
    elif not isinstance(error, ServiceError) or (error.status >= 500
                                                  and not isinstance(error, ProjectSystemBusy)):
        away.gone(company_id)


_pool: list[ThreadPoolExecutor] = []


def background_read(load: Callable[[], T]) -> Future:
    """Run a read on the process's pool of read threads (made on first use), in the app's context."""
    app = current_app._get_current_object()
    with _setup_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(PAGE_READ_THREADS,
                                            thread_name_prefix="project-system-read"))
        pool = _pool[0]

    def run() -> T:
        with app.app_context():
            return load()
    future = pool.submit(run)
    under_way = _state("project_system_reads", set)
    with _setup_lock:
        under_way.add(future)
    future.add_done_callback(lambda done: _forget_read(under_way, done))
    return future


def _forget_read(under_way: set, done: Future) -> None:
    """Drop a finished background read from its app's set."""
    with _setup_lock:
        under_way.discard(done)


def wait_for_background_reads(timeout_s: float) -> None:
    """Wait up to `timeout_s` for this app's background reads (before its engine is let go)."""
    with _setup_lock:
        pending = list(current_app.extensions.get("project_system_reads", ()))
    futures_wait(pending, timeout=timeout_s)


def settle_reads(seconds: float) -> None:
    """Give the reads this request started in the background up to `seconds` to end, so a page
    drawn from stale answers knows whether the project system is away (a refused connection
    ends at once; a hung one is known on the next page)."""
    started = g.get("project_system_reads", []) if has_request_context() else []
    if not started:
        return
    futures_wait([future for future, _note in started], timeout=seconds)
    for future, note in started:  # its own callback may not have run yet
        if future.done():
            note(future)


def away_since(company_id: int) -> dt.datetime | None:
    """Since when pages have found the project system away, or None while it answers them."""
    away = _state("project_system_away", _Away)
    with away.lock:
        return away.since.get(company_id)


def noticed_away(company_id: int) -> None:
    """An approval found the project system away: pages say so from now on, as if they had."""
    _state("project_system_away", _Away).gone(company_id)


def forget(cache_name: str, key: tuple) -> None:
    """Forget one cached answer, so the next read asks the project system."""
    _cache(cache_name).invalidate(key)


def clear_caches() -> None:
    """Forget every cached answer, last known ones included (the connect command uses this)."""
    with _setup_lock:
        current_app.extensions.pop("project_system_caches", None)


def expire_caches() -> None:
    """Make every cached answer stale, kept as the last one known (as after its TTL)."""
    for cache in list(_state("project_system_caches", dict).values()):
        cache.expire_all()


# ------------------------------------------------------------------ projects

def remote_projects(company_id: int, *, briefly: bool = False) -> list[RemoteProject]:
    """The company's projects, cached for PROJECT_CACHE_S."""
    def load() -> list[RemoteProject]:
        with project_system_errors(company_id):
            return client_for(company_id).list_projects()
    return cached_read(company_id, "projects", ("projects", company_id),
                 current_app.config["PROJECT_CACHE_S"], load, briefly)


def require_project(company_id: int, project_id: str, *, briefly: bool = False) -> RemoteProject:
    """Return the project if it is on this company, else 404 project_not_found."""
    wanted = str(project_id).strip()
    for project in remote_projects(company_id, briefly=briefly):
        if str(project.id) == wanted:
            return project
    raise NotFound("no such project on this company", code="project_not_found")


def project_names(company_id: int) -> dict[str, str]:
    """Project names by id as a page reads them (the last known while away), or nothing."""
    try:
        return {str(p.id): p.display_name or p.name
                for p in remote_projects(company_id, briefly=True)}
    except ServiceError:
        return {}


def remember_project(session: Session, company_id: int, project_id: str, name: str) -> None:
    """Keep a project that a ticket or a link was made on, so it is known while the project
    system is away (inside the caller's write transaction)."""
    table = KnownProject.__table__
    statement = insert_or_merge(session, table).values(
        company_id=company_id, project_id=str(project_id), name=name[:300], seen_at=utcnow())
    session.execute(statement.on_conflict_do_update(
        index_elements=[table.c.company_id, table.c.project_id],
        set_={"name": statement.excluded.name}))


def project_for_new_ticket(company_id: int, project_id: str) -> tuple[str, str | None]:
    """The project of a new ticket, checked without waiting on the project system: its id, and
    its name when it was read from the project system (None when known already).

    The project list in the cache answers if it is fresh; else a project a ticket or a link
    was made on before is accepted as it is. Only another project is looked up, and then,
    with the project system away, it is not found (404), or the project system's error (502)
    if this company never had a ticket or a link at all.
    """
    wanted = str(project_id).strip()
    listed = _cache("projects").peek(("projects", company_id))
    if listed is None and db.session.get(KnownProject, (company_id, wanted)) is not None:
        return wanted, None
    try:
        found = next((project for project in listed if str(project.id) == wanted), None) \
            if listed is not None else require_project(company_id, wanted)
    except ProjectSystemRefused:
        ever = db.session.scalar(select(func.count()).select_from(KnownProject)
                                 .where(KnownProject.company_id == company_id))
        if ever:
            raise NotFound("no such project among those this company has used (the project "
                           "system cannot be reached just now)", code="project_not_found") from None
        raise
    if found is None:
        raise NotFound("no such project on this company", code="project_not_found")
    return str(found.id), found.display_name or found.name


def time_zone(company_id: int, project_id: str, *, briefly: bool = False) -> ZoneInfo:
    """The project's time zone, in which its working days are dated (UTC when it names none)."""
    return project_zone(require_project(company_id, project_id, briefly=briefly).time_zone)


def page_time_zone(company_id: int, project_id: str) -> ZoneInfo:
    """A project's time zone as a page reads it (the last known while away); UTC when unknown."""
    try:
        return time_zone_of(require_project(company_id, project_id, briefly=True))
    except ServiceError:
        return UTC


def time_zone_of(project: RemoteProject) -> ZoneInfo:
    """The zone a project names, UTC when none."""
    return project_zone(project.time_zone)


def cached_time_zone(company_id: int, project_id: str) -> ZoneInfo | None:
    """The project's time zone as last read from the project system, without calling it."""
    known = _cache("projects").peek(("projects", company_id), stale=True) or []
    project = next((p for p in known if str(p.id) == str(project_id).strip()), None)
    return project_zone(project.time_zone) if project is not None else None


def jobsite_date(company_id: int, project_id: str, moment: dt.datetime) -> dt.date:
    """The date of a moment on the jobsite's clock, from the project's zone as last read.

    The project system is not called, so a crew's ticket never waits on it; UTC when the
    project's zone has not been read in this process.
    """
    return local_date(moment, cached_time_zone(company_id, project_id) or UTC)


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


# ------------------------------------------------------------------ codes and capability

def _project_key(project_id: str) -> str:
    """A project id as cache keys hold it."""
    return str(project_id).strip()


def catalog(company_id: int, project_id: str, *, briefly: bool = False) -> Catalog:
    """Cost codes, cost types and budget codes of a project, cached for CATALOG_CACHE_S."""
    def load() -> Catalog:
        project = require_project(company_id, project_id)
        with project_system_errors(company_id):
            cost_codes, cost_types, budget_codes = client_for(company_id).read_catalog(project.id)
        return Catalog(cost_codes=tuple(cost_codes), cost_types=tuple(cost_types),
                       budget_codes=tuple(budget_codes))
    return cached_read(company_id, "catalogs", ("catalog", company_id, _project_key(project_id)),
                 current_app.config["CATALOG_CACHE_S"], load, briefly)


def cached_catalog(company_id: int, project_id: str) -> Catalog | None:
    """A project's codes if this process read them before (even a while ago), without a call."""
    return _cache("catalogs").peek(("catalog", company_id, _project_key(project_id)), stale=True)


def search_cost_codes(company_id: int, project_id: str, q: str | None) -> list[CostCodeItem]:
    """Cost codes whose code or name contains q (case-insensitive), with their budget codes."""
    codes = catalog(company_id, project_id)
    needle = (q or "").casefold()
    items = []
    for cost_code in codes.cost_codes:
        if needle and needle not in cost_code.shown.casefold() and \
                needle not in cost_code.name.casefold():
            continue
        budget = [BudgetCodeRef(id=b.id, code=b.flat_code, cost_type=b.cost_type)
                  for b in codes.budget_codes if b.cost_code_id == cost_code.id]
        items.append(CostCodeItem(id=cost_code.id, code=cost_code.shown, name=cost_code.name,
                                  sub_job=cost_code.sub_job,
                                  budget_codes=budget))
    return items


def create_budget_code(company_id: int, project_id: str, cost_code_item_id: int,
                       cost_type: str, description: str | None = None) -> BudgetCodeOut:
    """Create the budget code for a cost code and cost type (with `description`, else the
    project system's usual one), or return the one that exists."""
    project = require_project(company_id, project_id)
    codes = catalog(company_id, project_id)
    if codes.cost_code_by_id(cost_code_item_id) is None:
        raise NotFound(f"no cost code {cost_code_item_id} on project {project.id}",
                       code="cost_code_not_found")
    existing = codes.budget_code(cost_code_item_id, cost_type)
    if existing is not None:
        return _budget_code_out(existing, created=False)
    with project_system_errors(company_id, "write"):
        made = client_for(company_id).create_budget_code(project.id, cost_code_item_id, cost_type,
                                                         description)
    _cache("catalogs").invalidate(("catalog", company_id, _project_key(project_id)))
    return _budget_code_out(made, created=True)


def _budget_code_out(code: BudgetCode, *, created: bool) -> BudgetCodeOut:
    """Shape a budget code for the API."""
    return BudgetCodeOut(id=code.id, code=code.flat_code, cost_type=code.cost_type,
                         cost_code_item_id=code.cost_code_id, description=code.description,
                         created=created)


def change_events_enabled(company_id: int, project_id: str, *, briefly: bool = False) -> bool:
    """Whether the project has the change-event tool, cached for CAPABILITY_CACHE_S."""
    def load() -> bool:
        project = require_project(company_id, project_id)
        with project_system_errors(company_id):
            return client_for(company_id).change_events_enabled(project.id)
    return cached_read(company_id, "capabilities", ("capability", company_id, _project_key(project_id)),
                 current_app.config["CAPABILITY_CACHE_S"], load, briefly)


def page_change_events(company_id: int, project_id: str) -> bool | None:
    """Whether a project takes change events, as a page reads it; None when not known."""
    try:
        return change_events_enabled(company_id, project_id, briefly=True)
    except ServiceError:
        return None


def capability(company_id: int, project_id: str) -> Capability:
    """Where a ticket on this project can be filed, and what approve does by default."""
    enabled = change_events_enabled(company_id, project_id)
    return Capability(change_events=enabled, daily_log=True,
                      destination="change_event" if enabled else None)
