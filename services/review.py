"""What the review pages show: the queue and one ticket, composed from the ticket services."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from models import utcnow
from models.schemas import ApproveInput, NteStatus, Ticket
from services import approval, authorizations, projects, tickets
from services.errors import ServiceError
from services.project_system import BudgetCode
from services.project_system.zones import UTC, jobsite_time
from services.validation import validate

STATUS_TABS = (("submitted", "Needs review"), ("written", "Written"), ("rejected", "Rejected"))


@dataclass(frozen=True)
class QueueRow:
    """One ticket as a row of the queue."""

    id: str
    status: str
    project_name: str
    description: str
    directed_by: str
    age: str
    total: Decimal
    needs_review: int | None
    photo_count: int
    nte: NteStatus | None = None


@dataclass(frozen=True)
class Queue:
    """A page of the queue with its filters and per-status counts."""

    rows: list[QueueRow]
    counts: dict[str, int]
    total: int
    status: str | None
    project_id: str | None
    q: str | None
    projects: list[tuple[str, str]]


@dataclass(frozen=True)
class LineChoice:
    """The review controls of one routing line."""

    line: int
    budget_codes: list[BudgetCode]
    create_cost_code_id: int | None = None
    create_cost_type: str | None = None


@dataclass
class TicketPage:
    """Everything the ticket page shows."""

    ticket: Ticket
    project_name: str
    change_events: bool | None
    captured_at_text: str
    choices: dict[int, LineChoice] = field(default_factory=dict)
    error: ServiceError | None = None
    message: str | None = None
    selected_routes: dict[int, int] = field(default_factory=dict)
    authorizations: list[NteStatus] = field(default_factory=list)

    @property
    def refused_lines(self) -> dict[int, str]:
        """Lines an approval refused, with the reason, for highlighting."""
        if self.error is None or not isinstance(self.error.details, list):
            return {}
        return {d["line"]: d.get("reason", "") for d in self.error.details
                if isinstance(d, dict) and "line" in d}


def age_text(moment: dt.datetime, now: dt.datetime | None = None) -> str:
    """How long ago, in the largest sensible unit: '5 min', '3 h', '2 d'."""
    seconds = max(0, int(((now or utcnow()) - moment).total_seconds()))
    if seconds < 3600:
        return f"{max(1, seconds // 60)} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def _project_names(company_id: int) -> dict[str, str]:
    """Project names by id, or nothing when the project system is away."""
    try:
        return {p.id: p.display_name or p.name for p in projects.list_projects(company_id)}
    except ServiceError:
        return {}


def queue(company_id: int, *, status: str | None = "submitted", project_id: str | None = None,
          q: str | None = None, limit: int = 50, offset: int = 0) -> Queue:
    """The review queue: 'Needs review' by default, filterable by status, project and text."""
    if status not in (None, "submitted", "written", "rejected"):
        status = "submitted"
    names = _project_names(company_id)
    records, total = tickets.list_ticket_records(company_id, status=status, project_id=project_id or None,
                                                 q=q, limit=limit, offset=offset)
    rows = []
    for record in records:
        routes, warnings = tickets.route_ticket(company_id, record)
        rows.append(QueueRow(
            id=record.id, status=record.status,
            project_name=names.get(record.project_id, record.project_id),
            description=record.description, directed_by=record.directed_by,
            age=age_text(record.captured_at), total=record.total,
            needs_review=None if warnings else sum(1 for r in routes if r.needs_review),
            photo_count=record.photo_count,
            nte=authorizations.status_of(company_id, record.authorization_id)))
    return Queue(rows=rows, counts=tickets.status_counts(company_id, project_id or None),
                 total=total, status=status, project_id=project_id, q=q,
                 projects=sorted(names.items(), key=lambda item: item[1]))


def ticket_page(company_id: int, ticket_id: str, *, error: ServiceError | None = None,
                message: str | None = None, selected_routes: dict[int, int] | None = None
                ) -> TicketPage:
    """A ticket with the choices a reviewer has for each of its lines."""
    ticket = tickets.get_ticket(company_id, ticket_id)
    names = _project_names(company_id)
    page = TicketPage(ticket=ticket, project_name=names.get(ticket.project_id, ticket.project_id),
                      change_events=None, captured_at_text=jobsite_time(ticket.captured_at, UTC),
                      error=error, message=message, selected_routes=selected_routes or {})
    try:
        page.change_events = projects.change_events_enabled(company_id, ticket.project_id)
        codes = projects.catalog(company_id, ticket.project_id)
        page.captured_at_text = jobsite_time(
            ticket.captured_at, projects.time_zone(company_id, ticket.project_id))
    except ServiceError:
        return page
    record = tickets.find_ticket(company_id, ticket_id)
    page.authorizations = authorizations.list_for_project(company_id, ticket.project_id)
    ordered = sorted(codes.budget_codes, key=lambda b: b.flat_code)
    by_code = {c.code.replace(" ", "").lower(): c for c in codes.cost_codes}
    for route in ticket.routing:
        line = record.lines[route.line]
        cost_code = by_code.get((line.get("costCode") or "").replace(" ", "").lower())
        missing = (cost_code is not None and route.cost_type is not None
                   and codes.budget_code(cost_code.id, route.cost_type) is None)
        page.choices[route.line] = LineChoice(
            line=route.line, budget_codes=ordered,
            create_cost_code_id=cost_code.id if missing else None,
            create_cost_type=route.cost_type if missing else None)
    return page


def approve_from_form(company_id: int, ticket_id: str, form: dict[str, str], actor: str):
    """Approve with the page's choices, sent as `routes` exactly as an API caller sends them."""
    routes = {}
    for key, value in form.items():
        if key.startswith("routes[") and key.endswith("]") and value:
            routes[key[len("routes["):-1]] = int(value) if value.isdigit() else value
    options = validate(ApproveInput, {
        "destination": form.get("destination") or None,
        "allow_unrouted": form.get("allow_unrouted") == "on",
        "allow_rejected": form.get("allow_rejected") == "on",
        "require_exact": form.get("require_exact") == "on",
        "confirm_over_nte": form.get("confirm_over_nte") == "on",
        "routes": routes,
    })
    return approval.approve(company_id, ticket_id, options, actor=actor)


def selected_routes_from_form(form: dict[str, str]) -> dict[int, int]:
    """The per-line choices of a submitted form, to show them again after a refusal."""
    chosen = {}
    for key, value in form.items():
        if key.startswith("routes[") and key.endswith("]") and value.isdigit():
            index = key[len("routes["):-1]
            if index.isdigit():
                chosen[int(index)] = int(value)
    return chosen
