"""The backup package: written tickets of one project as one PDF for the owner.

A cover names the project, the date on the jobsite's clock, each change event (or daily log
entry) the tickets were written as with its status and change orders as last read back from
Procore (services/approval/record_status.py), and the totals by budget code and by sub; then
each ticket's own document pages (templates/documents/_ticket_pages.html), its signature and
photos included, as the ticket's document shows them. The tickets are chosen by id or
T-reference, or as every written ticket of one change event, at most MAX_TICKETS, so a package
is made in the image pool within the ticket document's CPU, memory and time limits
(services/tickets/documents.render_pdf: DOCUMENT_SLOTS, DOCUMENT_WAIT_S, 503 document_busy).
"""
from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from flask import current_app, render_template
from sqlalchemy import Numeric, func, literal, or_, select
from sqlalchemy.orm import selectinload

from models import Company, db, utcnow
from models import Ticket as TicketRecord
from models.schemas import BackupPackageQuery, TicketsNotWrittenDetail, TooManyTicketsDetail
from services.approval.approval_records import CHANGE_EVENT
from services.files import pdf_render
from services.platform.errors import Conflict, NotFound, ServiceError
from services.project_system import projects
from services.project_system.zones import UTC, on_clock
from services.tickets import documents
from services.tickets.plain_words import change_order_words, record_words
from services.tickets.ticket_records import OLDEST_FIRST, ticket_key
from services.tickets.ticket_view import TicketView

# The most tickets one package holds: 50 tickets of up to 12 photos each, their photos at
# pdf_render.PACKAGE_IMAGE_EDGE, are rendered within the ticket document's limits
# (DOCUMENT_CPU_SECONDS, IMAGE_MEMORY_BYTES, DOCUMENT_BUDGET_S).
MAX_TICKETS = 50
NO_BUDGET_CODE = "No budget code"
NO_SUB = "No sub named"


class TooManyTickets(ServiceError):
    """More tickets than one package holds."""

    status = 400
    code = "too_many_tickets"


@dataclass
class Package:
    """A backup package made: its PDF and the name it is downloaded under."""

    pdf: bytes
    filename: str


# ------------------------------------------------------------------ choosing the tickets

def _too_many(count: int) -> TooManyTickets:
    """The refusal of a package of `count` tickets."""
    return TooManyTickets(f"a backup package holds at most {MAX_TICKETS} tickets and "
                          f"{count} were chosen; make several packages",
                          details=TooManyTicketsDetail(limit=MAX_TICKETS, chosen=count).model_dump())


def _loading(query):
    """A ticket query that loads what a ticket's pages show (photos, decisions)."""
    return query.options(selectinload(TicketRecord.photos), selectinload(TicketRecord.decisions))


def _matches(company_id: int, project_id: str, names: list[str]
             ) -> dict[str, list[TicketRecord]]:
    """The project's tickets each name (an id or a T-reference) may stand for."""
    keys = {name: ticket_key(name) if name[:2].upper() != "T-" else None for name in names}
    prefixes = {name: name[2:].lower() for name, key in keys.items() if key is None}
    conditions = [TicketRecord.id.in_([key for key in keys.values() if key])]
    conditions += [TicketRecord.id.like(prefix + "%") for prefix in prefixes.values()]
    found = list(db.session.scalars(_loading(select(TicketRecord).where(
        TicketRecord.company_id == company_id, TicketRecord.project_id == str(project_id),
        or_(*conditions)))))
    return {name: [t for t in found if t.id == keys[name]] if keys[name]
            else [t for t in found if t.id.startswith(prefixes[name])] for name in names}


def _named(company_id: int, project_id: str, names: list[str]) -> list[TicketRecord]:
    """The written tickets the names stand for; 404 for a name that is no ticket of this
    company's project, 400 for a reference two of its tickets share, 409 for an unwritten one."""
    if len(names) > MAX_TICKETS:
        raise _too_many(len(names))
    chosen: dict[str, TicketRecord] = {}
    for name, matches in _matches(company_id, project_id, names).items():
        if not matches:
            raise NotFound(f"no such ticket on this project: {name}", code="ticket_not_found")
        if len(matches) > 1:
            raise ServiceError(f"{name} is the reference of several tickets of this project; "
                               "name each by its id", code="ticket_reference_ambiguous")
        chosen[matches[0].id] = matches[0]
    unwritten = [t.reference for t in chosen.values() if t.status != "written"]
    if unwritten:
        raise Conflict(f"{', '.join(unwritten)} {'is' if len(unwritten) == 1 else 'are'} not "
                       "written to Procore yet; a backup package holds written tickets only",
                       code="ticket_not_written",
                       details=TicketsNotWrittenDetail(tickets=unwritten).model_dump())
    return sorted(chosen.values(), key=lambda t: (t.captured_at, t.id))


def _on_change_event(company_id: int, project_id: str, change_event_id: int) -> list[TicketRecord]:
    """The project's written tickets on one change event; 404 when it has none."""
    where = (TicketRecord.company_id == company_id, TicketRecord.project_id == str(project_id),
             TicketRecord.status == "written",
             # Procore's ids pass 32 bits, where PostgreSQL's INTEGER stops
             TicketRecord.external["change_event_id"].as_numeric(20, 0)
             == literal(change_event_id, Numeric(20, 0)))
    count = db.session.scalar(select(func.count()).select_from(TicketRecord).where(*where))
    if not count:
        raise NotFound("no written ticket of this project is on that change event",
                       code="change_event_not_found")
    if count > MAX_TICKETS:
        raise _too_many(count)
    return list(db.session.scalars(_loading(select(TicketRecord).where(*where)
                                            .order_by(*OLDEST_FIRST))))


def chosen_tickets(company_id: int, project_id: str, query: BackupPackageQuery
                   ) -> list[TicketRecord]:
    """The written tickets a package holds, oldest first, as the query names them."""
    if not (project_id.isascii() and project_id.isdigit() and len(project_id) <= 40):
        raise NotFound("no such project on this company", code="project_not_found")
    if query.change_event_id is not None:
        return _on_change_event(company_id, project_id, query.change_event_id)
    return _named(company_id, project_id, query.ticket_names)


def package_address(company_id: int, ticket_ids: list[str]) -> tuple[str, list[str]]:
    """The project and ids (oldest first) of the tickets a reviewer chose in the queue, for the
    package's page; refused in a reviewer's words unless they are written tickets of one project."""
    keys = list(dict.fromkeys(key for key in map(ticket_key, ticket_ids) if key))
    if not keys:
        raise ServiceError("Choose the written tickets to put in a backup package.",
                           code="no_tickets_chosen")
    if len(keys) > MAX_TICKETS:
        raise _too_many(len(keys))
    rows = db.session.execute(select(TicketRecord.id, TicketRecord.project_id, TicketRecord.status)
                              .where(TicketRecord.company_id == company_id,
                                     TicketRecord.id.in_(keys)).order_by(*OLDEST_FIRST)).all()
    if len({row.project_id for row in rows}) > 1:
        raise ServiceError("A backup package holds the tickets of one project: choose the tickets "
                           "of one project (the Project filter shows one at a time).",
                           code="several_projects")
    if not rows or any(row.status != "written" for row in rows):
        raise ServiceError("A backup package holds tickets written to Procore only: choose "
                           "written tickets.", code="ticket_not_written")
    return rows[0].project_id, [row.id for row in rows]


# ------------------------------------------------------------------ the cover

def _money(amount: Decimal) -> str:
    """Dollars with cents and thousands separators."""
    return f"${amount:,.2f}"


def _record_of(ticket: TicketRecord) -> tuple[Any, str]:
    """The key and name of a written ticket's record: 'Change event #012' or a daily log entry."""
    external = ticket.external or {}
    number = f" #{external['number']}" if external.get("number") else ""
    if external.get("destination") == CHANGE_EVENT:
        return ("change_event", external.get("change_event_id")), f"Change event{number}"
    return ("daily_log", external.get("manpower_log_id")), f"Daily log entry{number}"


def _capital(words: str) -> str:
    """Words as a table cell starts them."""
    return words[:1].upper() + words[1:]


def _record_status(ticket: TicketRecord, zone: ZoneInfo) -> str:
    """Where a ticket's record stands in Procore, as last read back, and when it was read."""
    if ticket.record_read_at is None:
        return _capital(record_words(ticket))
    words = f"{ticket.record_gone} in Procore" if ticket.record_gone else \
        ticket.record_status or "status unknown"
    return f"{_capital(words)} (read {on_clock(ticket.record_read_at, zone)})"


def _change_orders(ticket: TicketRecord) -> list[str]:
    """The change orders a ticket's lines are on, as last read back."""
    return [_capital(change_order_words(order)) for order in ticket.record_change_orders or []]


def _records(tickets: list[TicketRecord], zone: ZoneInfo) -> list[dict[str, Any]]:
    """Each record the tickets were written as, once, with its status, change orders, tickets
    and their total."""
    records: dict[Any, dict[str, Any]] = {}
    for ticket in tickets:
        key, name = _record_of(ticket)
        record = records.setdefault(key, {"name": name, "status": _record_status(ticket, zone),
                                          "change_orders": [], "tickets": [],
                                          "total": Decimal("0")})
        record["change_orders"] += [o for o in _change_orders(ticket)
                                    if o not in record["change_orders"]]
        record["tickets"].append(ticket.reference)
        record["total"] += ticket.total
    return [{**record, "total": _money(record["total"])} for record in records.values()]


def totals(views: list[TicketView], tickets: list[TicketRecord]
           ) -> tuple[list[tuple[str, Decimal]], list[tuple[str, Decimal]], Decimal]:
    """The totals by budget code (of each line, markups included) and by sub, each sorted by
    name, and the total of every ticket."""
    by_code: dict[str, Decimal] = defaultdict(Decimal)
    for view in views:
        for route in view.ticket.routing:
            by_code[route.budget_code or NO_BUDGET_CODE] += Decimal(str(route.amount or 0))
    by_sub: dict[str, Decimal] = defaultdict(Decimal)
    for ticket in tickets:
        by_sub[(ticket.sub or "").strip() or NO_SUB] += ticket.total
    return (sorted(by_code.items()), sorted(by_sub.items(), key=lambda item: item[0].lower()),
            sum((ticket.total for ticket in tickets), Decimal("0")))


def on_date(moment: dt.datetime, zone: ZoneInfo) -> dt.date:
    """The date of a stored time (naive UTC or aware) on a clock."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(zone).date()


def _cover(company_id: int, project_id: str, tickets: list[TicketRecord],
           views: list[TicketView], now: dt.datetime) -> dict[str, Any]:
    """What the package's cover shows."""
    zone = projects.cached_time_zone(company_id, project_id) or UTC
    by_code, by_sub, total = totals(views, tickets)
    company = db.session.get(Company, company_id)
    return {
        "company": company.name if company else "",
        "project": projects.known_project_name(company_id, project_id) or f"Project {project_id}",
        "date": on_date(now, zone).isoformat(), "made_at": on_clock(now, zone),
        "count": len(tickets), "total": _money(total), "records": _records(tickets, zone),
        "by_code": [(code, _money(amount)) for code, amount in by_code],
        "by_sub": [(sub, _money(amount)) for sub, amount in by_sub],
        "tickets": [{"reference": t.reference, "worked_on": view.text(t.worked_on or on_date(
                         t.captured_at, zone)),
                     "sub": t.sub or "", "description": t.description,
                     "record": _record_of(t)[1], "total": _money(t.total)}
                    for t, view in zip(tickets, views, strict=True)],
    }


# ------------------------------------------------------------------ the package

def package_html(company_id: int, project_id: str, tickets: list[TicketRecord],
                 now: dt.datetime | None = None) -> str:
    """The package as HTML: its cover, then each ticket's pages."""
    pages = [documents.ticket_pages(ticket) for ticket in tickets]
    cover = _cover(company_id, project_id, tickets, [view for view, _ in pages], now or utcnow())
    return render_template("documents/backup_package.html", cover=cover,
                           tickets=[context for _, context in pages])


def filename(project_id: str, query: BackupPackageQuery, date: str) -> str:
    """The package's file name: the project, the change event when one was chosen, the date."""
    event = f"-change-event-{query.change_event_id}" if query.change_event_id is not None else ""
    return f"backup-package-{project_id}{event}-{date}.pdf"


def backup_package(company_id: int, project_id: str, query: BackupPackageQuery) -> Package:
    """The backup package of the tickets the query chooses, made in the image pool."""
    tickets = chosen_tickets(company_id, project_id, query)
    now = utcnow()
    html = package_html(company_id, project_id, tickets, now)
    zone = projects.cached_time_zone(company_id, project_id) or UTC
    pdf = documents.render_pdf(html, wait_s=float(current_app.config["DOCUMENT_WAIT_S"]),
                               image_edge=pdf_render.PACKAGE_IMAGE_EDGE)
    return Package(pdf, filename(project_id, query, on_date(now, zone).isoformat()))
