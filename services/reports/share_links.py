"""Share links: a sub's live log of its tickets, opened with no account.

A PM makes a link for a sub (and optionally one project, and an expiry). Its page lists that
sub's tickets only, newest first, with where each stands on its way to being paid
(services/tickets/stages.py) and in the project system, and each ticket's document. The token
is a credential shown once: only its SHA-256 digest is kept.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import math
import secrets
from dataclasses import dataclass
from decimal import Decimal

from flask_babel import gettext, lazy_gettext
from sqlalchemy import func, select
from sqlalchemy.orm import selectinload

from models import ShareLink as ShareLinkRecord
from models import Ticket as TicketRecord
from models import db, short_reference, utcnow
from models.schemas import ShareLink, ShareLinkCreated, ShareLinkInput, ShareLinkList
from services.platform.database import write_transaction
from services.platform.errors import Conflict, NotFound, ServiceError, ValidationFailed, field_problem
from services.platform.web import public_base_url, token_digest
from services.project_system import projects
from services.project_system.zones import UTC, local_date
from services.tickets import stages
from services.tickets.export import BOM, safe_cell
from services.tickets.ticket_queries import ListFilter, list_conditions
from services.tickets.ticket_records import NEWEST_FIRST

# Tickets a page of the log shows; tickets its CSV reads at a time.
PAGE_SIZE = 25
CSV_BATCH = 500


class ShareLinkGone(ServiceError):
    """The link was ended or has expired: the sub's office needs a new one."""

    status = 410
    code = "share_link_gone"


def stored_digest(token: str) -> str:
    """The stored digest of a share link's token."""
    return token_digest(token, 64)


def limit_key(token: str) -> str:
    """The rate-limit bucket of a share token: a digest, never the token."""
    return "share:" + token_digest(token)


def share_url(token: str) -> str:
    """The address of a share link's page."""
    return f"{public_base_url()}/l/{token}"


def _shape(link: ShareLinkRecord) -> ShareLink:
    """A share link as the API shows it (without its address)."""
    return ShareLink(id=link.id, sub=link.sub, project_id=link.project_id,
                     expires_at=link.expires_at, created_at=link.created_at,
                     created_by=link.created_by, ended_at=link.ended_at)


def _expiry(text: str | None, now: dt.datetime) -> dt.datetime | None:
    """The expiry asked for, as an aware time; 400 when it is not in the future."""
    if not text:
        return None
    moment = dt.datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    if moment <= now:
        raise ValidationFailed("the expiry must be in the future", details=[
            field_problem("expires_at", "must be in the future")])
    return moment.astimezone(dt.timezone.utc)


def create(company_id: int, body: ShareLinkInput, actor: str | None,
           now: dt.datetime | None = None) -> ShareLinkCreated:
    """Make a share link for a sub (of one project of the company, when given); 409
    project_not_found for a project the company does not have."""
    now = now or utcnow()
    expires_at = _expiry(body.expires_at, now)
    if body.project_id is not None:
        try:
            projects.require_project(company_id, body.project_id)
        except NotFound as error:
            raise Conflict("no such project on this company", code="project_not_found",
                           details=[field_problem("project_id", "is not one of the company's "
                                                                "projects")]) from error
    token = secrets.token_urlsafe(24)
    link = ShareLinkRecord(company_id=company_id, sub=body.sub, project_id=body.project_id,
                           token_digest=stored_digest(token), expires_at=expires_at,
                           created_by=(actor or "")[:300] or None, created_at=now)
    with write_transaction() as session:
        session.add(link)
    return ShareLinkCreated(**_shape(link).model_dump(), url=share_url(token))


def list_links(company_id: int, limit: int = 50, offset: int = 0) -> ShareLinkList:
    """A page of the company's share links, newest first."""
    mine = ShareLinkRecord.company_id == company_id
    total = db.session.scalar(select(func.count()).select_from(ShareLinkRecord).where(mine))
    found = db.session.scalars(select(ShareLinkRecord).where(mine)
                               .order_by(ShareLinkRecord.created_at.desc(),
                                         ShareLinkRecord.id.desc()).limit(limit).offset(offset))
    return ShareLinkList(data=[_shape(link) for link in found], total=total or 0, limit=limit,
                         offset=offset)


def end(company_id: int, link_id: int, now: dt.datetime | None = None) -> None:
    """Stop a share link from working; ending it again changes nothing. Another company's
    link is not found."""
    with write_transaction() as session:
        link = session.scalar(select(ShareLinkRecord).where(
            ShareLinkRecord.id == link_id, ShareLinkRecord.company_id == company_id)) \
            if 0 < link_id < 2**31 else None
        if link is None:
            raise NotFound("no such share link on this company", code="share_link_not_found")
        if link.ended_at is None:
            link.ended_at = now or utcnow()


def state(link: ShareLinkRecord, now: dt.datetime | None = None) -> str:
    """Whether a link works: "open", "ended" or "expired"."""
    if link.ended_at is not None:
        return "ended"
    if link.expires_at is not None and link.expires_at <= (now or utcnow()):
        return "expired"
    return "open"


def last_day(company_id: int, project_id: str | None, expires_at: dt.datetime | None
             ) -> dt.date | None:
    """The last day a link works on its project's clock (UTC for every project): the day its
    expiry falls in, or the day before when it expires at midnight; None without expiry."""
    if expires_at is None:
        return None
    zone = (projects.cached_time_zone(company_id, project_id) if project_id else None) or UTC
    return (expires_at - dt.timedelta(microseconds=1)).astimezone(zone).date()


def find(token: str) -> ShareLinkRecord | None:
    """The link behind a token, whatever its state; None when there is none."""
    return db.session.scalar(select(ShareLinkRecord).where(
        ShareLinkRecord.token_digest == stored_digest(token)))


def resolve(token: str, now: dt.datetime | None = None) -> ShareLinkRecord:
    """The working link behind a token: 404 when unknown, 410 when ended or expired."""
    link = find(token)
    if link is None:
        raise NotFound("this link does not exist", code="share_link_not_found")
    if state(link, now) != "open":
        raise ShareLinkGone("this link no longer works")
    return link


# ------------------------------------------------------------------ the log

@dataclass(frozen=True)
class ChangeOrderLine:
    """A commitment change order a ticket's lines are on, as last read from the project system."""

    number: str | None
    title: str | None
    status: str | None


@dataclass(frozen=True)
class LogRow:
    """One ticket as the sub's log shows it."""

    id: str
    reference: str
    date: dt.date
    project_name: str
    description: str
    amount: Decimal
    stage: str
    sent_back_reason: str | None
    signed: bool
    # The change event or daily log entry, when written: its number and status as last read.
    record_kind: str | None
    record_number: str | None
    record_status: str | None
    change_orders: tuple[ChangeOrderLine, ...]

    @property
    def stage_label(self) -> str:
        """The stage in the reader's words."""
        return str(stages.LABELS[self.stage])


@dataclass(frozen=True)
class LogPage:
    """A page of a sub's log: its rows, how many tickets in all, the page and the last page."""

    rows: list[LogRow]
    total: int
    page: int
    pages: int


def _conditions(link: ShareLinkRecord) -> list:
    """The link's tickets: its company's, naming its sub (any case), of its project if any."""
    return list_conditions(link.company_id, ListFilter(sub=link.sub, project_id=link.project_id))


def _row(ticket: TicketRecord, stage: str, names: dict[str, str]) -> LogRow:
    """A ticket as a log row."""
    zone = projects.cached_time_zone(ticket.company_id, ticket.project_id) or UTC
    external = ticket.external or {}
    sent_back = [d.reason for d in ticket.decisions if d.action == "rejected"]
    written = ticket.status == "written" and bool(external)
    return LogRow(
        id=ticket.id, reference=short_reference(ticket.id),
        date=ticket.worked_on or local_date(ticket.captured_at, zone),
        project_name=names.get(ticket.project_id) or gettext("Project %(id)s", id=ticket.project_id),
        description=ticket.description, amount=ticket.total, stage=stage,
        sent_back_reason=(sent_back[-1] or None) if stage == "sent_back" and sent_back else None,
        signed=ticket.signature is not None,
        record_kind=(external.get("destination") if written else None),
        record_number=external.get("number") if written else None,
        record_status=ticket.record_status if written else None,
        change_orders=tuple(ChangeOrderLine(order.get("number"), order.get("title"),
                                            order.get("status"))
                            for order in (ticket.record_change_orders or [])
                            if order.get("kind") == "commitment"))


def _names(link: ShareLinkRecord, project_ids: set[str]) -> dict[str, str]:
    """The names of the projects shown, as last read (never waiting on the project system)."""
    return {project_id: name for project_id in project_ids
            if (name := projects.known_project_name(link.company_id, project_id))}


def _rows(link: ShareLinkRecord, limit: int, offset: int = 0) -> list[LogRow]:
    """A batch of the link's tickets as log rows, newest first."""
    found = db.session.execute(
        select(TicketRecord, stages.stage_column()).where(*_conditions(link))
        .order_by(*NEWEST_FIRST).options(selectinload(TicketRecord.decisions))
        .limit(limit).offset(offset)).all()
    names = _names(link, {ticket.project_id for ticket, _stage in found})
    return [_row(ticket, stage, names) for ticket, stage in found]


def log_page(link: ShareLinkRecord, page: int = 1) -> LogPage:
    """One page of the link's log, newest first (a page past the last shows the last)."""
    total = db.session.scalar(select(func.count()).select_from(TicketRecord)
                              .where(*_conditions(link))) or 0
    pages = max(1, math.ceil(total / PAGE_SIZE))
    page = min(max(1, page), pages)
    return LogPage(rows=_rows(link, PAGE_SIZE, (page - 1) * PAGE_SIZE), total=total, page=page,
                   pages=pages)


# Procore's usual statuses of a change event and of a change order, in the reader's words (the
# two are said apart: Spanish agrees them with 'evento' and 'orden'); any other as Procore says it.
CHANGE_EVENT_STATUSES = {
    "open": lazy_gettext("Change event %(number)s (open)"),
    "pending": lazy_gettext("Change event %(number)s (pending)"),
    "closed": lazy_gettext("Change event %(number)s (closed)"),
    "void": lazy_gettext("Change event %(number)s (void)"),
}
CHANGE_ORDER_STATUSES = {
    "draft": lazy_gettext("Change order %(number)s (draft)"),
    "pending": lazy_gettext("Change order %(number)s (pending)"),
    "approved": lazy_gettext("Change order %(number)s (approved)"),
    "rejected": lazy_gettext("Change order %(number)s (rejected)"),
    "void": lazy_gettext("Change order %(number)s (void)"),
}


def _with_status(words: dict, plain: str, number: str | None, status: str | None) -> str:
    """A record's number and status in the reader's words ('Change event 12 (open)')."""
    known = words.get((status or "").strip().lower())
    if known is not None:
        return str(known) % {"number": number or ""}
    text = gettext(plain, number=number or "")
    return f"{text} ({status})" if status else text


def record_text(row: LogRow) -> str:
    """Where a ticket stands in the project system, in the reader's words ('' when not written)."""
    if row.record_kind is None:
        return ""
    if row.record_kind == "change_event":
        return _with_status(CHANGE_EVENT_STATUSES, "Change event %(number)s", row.record_number,
                            row.record_status)
    text = gettext("Daily log entry")
    return f"{text} ({row.record_status})" if row.record_status else text


def change_order_text(row: LogRow) -> str:
    """The commitment change orders of a ticket, in the reader's words ('' when none)."""
    return "; ".join(_with_status(CHANGE_ORDER_STATUSES, "Change order %(number)s", order.number,
                                  order.status)
                     for order in row.change_orders)


def log_csv(link: ShareLinkRecord) -> str:
    """Every ticket of the link's log as CSV, the page's columns in the reader's language."""
    buffer = io.StringIO()
    buffer.write(BOM)
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([gettext("Reference"), gettext("Date"), gettext("Project"),
                     gettext("Description"), gettext("Amount"), gettext("Stage"),
                     gettext("Reason sent back"), gettext("Procore"), gettext("Change order")])
    offset = 0
    while True:  # a batch at a time, as the ticket log's CSV reads its pages
        rows = _rows(link, CSV_BATCH, offset)
        for row in rows:
            writer.writerow([safe_cell(value) for value in (
                row.reference, row.date, row.project_name, row.description, row.amount,
                row.stage_label, row.sent_back_reason, record_text(row), change_order_text(row))])
        if len(rows) < CSV_BATCH:
            return buffer.getvalue()
        offset += CSV_BATCH


def ticket_of(link: ShareLinkRecord, ticket_id: str) -> TicketRecord:
    """One ticket of the link's log; any other ticket is not found."""
    ticket = db.session.scalar(select(TicketRecord).where(
        TicketRecord.id == str(ticket_id)[:36], *_conditions(link)))
    if ticket is None:
        raise NotFound("no such ticket in this log", code="ticket_not_found")
    return ticket
