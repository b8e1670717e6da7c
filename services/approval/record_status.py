"""Where written records stand in the project system: each ticket's change event or daily log
entry read back (status, deleted, the change orders its lines are on) and kept on the ticket.

One read, `sync`, serves `POST /v1/tickets/{id}/sync`, the ticket page (when the last read is
older than STALE_AFTER, waiting only briefly) and the scheduled sync of the tickets written in
the last SYNC_DAYS (`sync_due`), longest since tried first; every call goes through the company's
pacing and slots like any other read.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from concurrent.futures import TimeoutError as FutureTimeout

from flask import current_app
from sqlalchemy import select, update

from models import Ticket as TicketRecord
from models import db, utcnow
from models.schemas import Ticket, WebhookEventType
from services.approval.approval_records import CHANGE_EVENT
from services.platform.database import write_transaction
from services.platform.errors import Conflict, ProjectSystemRefused, ServiceError
from services.project_system import projects
from services.project_system.base import RecordState
from services.project_system.connections import (
    ProjectSystemBusy,
    client_for,
    project_system_errors,
)
from services.tickets import stages
from services.tickets.ticket_records import find_ticket, locked
from services.tickets.ticket_shapes import get_ticket
from services.webhooks import webhooks

# A page reads a written ticket's record again once what it knows is older than this.
STALE_AFTER = dt.timedelta(minutes=15)
# The scheduled sync reads the tickets written within this many days.
SYNC_DAYS = 90
# Tickets the scheduled sync reads per run, the longest since last tried first.
SYNC_PAGE = 100


def _record(ticket: TicketRecord) -> tuple[str, int]:
    """The kind and id of a written ticket's record; 409 ticket_not_written for any other."""
    external = ticket.external or {}
    if ticket.status != "written" or not external:
        raise Conflict("the ticket is not written to the project system yet, so it has no "
                       "record there to read", code="ticket_not_written")
    if external.get("destination") == CHANGE_EVENT:
        return "change_event", int(external["change_event_id"])
    return "manpower_log", int(external["manpower_log_id"])


def read_state(company_id: int, ticket: TicketRecord) -> RecordState:
    """Read where a written ticket's record stands in the project system (errors as answers)."""
    kind, record_id = _record(ticket)
    with project_system_errors(company_id):
        return client_for(company_id).read_record_state(int(ticket.project_id), kind, record_id)


def keep(ticket_id: str, state: RecordState, now: dt.datetime | None = None) -> None:
    """Keep a record's state on its ticket, as read at `now`."""
    # A deleted record keeps the last status it was read with. Programs are told when what was
    # known changes; a record never read is known as written: open, deleted nowhere, on none.
    with write_transaction() as session:
        ticket = locked(session, ticket_id)
        known = (ticket.record_status if ticket.record_read_at else state.status,
                 bool(ticket.record_deleted), ticket.record_change_orders or [])
        if state.status is not None or not state.deleted:
            ticket.record_status = state.status
        ticket.record_deleted = state.deleted
        ticket.record_change_orders = [dataclasses.asdict(order)
                                       for order in state.change_orders]
        ticket.on_change_order = bool(state.change_orders) \
            if (ticket.external or {}).get("destination") == CHANGE_EVENT else None
        ticket.change_orders_approved = stages.orders_approved(ticket.record_change_orders)
        ticket.record_read_at = ticket.record_tried_at = now or utcnow()
        if known != (ticket.record_status, ticket.record_deleted, ticket.record_change_orders):
            webhooks.emit(session, ticket, WebhookEventType.RECORD_CHANGED)


def sync(company_id: int, ticket_id: str) -> Ticket:
    """Read a written ticket's record from the project system now, keep it, answer the ticket."""
    ticket = find_ticket(company_id, ticket_id)
    keep(ticket.id, read_state(company_id, ticket))
    db.session.expire_all()
    return get_ticket(company_id, ticket.id)


def is_stale(ticket: TicketRecord, now: dt.datetime | None = None) -> bool:
    """Whether a written ticket's record was last read (or written) over STALE_AFTER ago."""
    # A record just written is known to be open and on no change order.
    if ticket.status != "written" or not ticket.external:
        return False
    known = ticket.record_read_at or ticket.approved_at
    return known is None or (now or utcnow()) - known > STALE_AFTER


def refresh_if_stale(company_id: int, ticket: TicketRecord, wait_s: float) -> bool:
    """For a page: read a stale record again, waiting up to `wait_s`; whether it was read by then."""
    # Past the wait the page shows what was known; the read, still under way in the background,
    # keeps its answer for the next opening. Nothing is read while pages find Procore away.
    if not is_stale(ticket) or projects.away_since(company_id) is not None:
        return False
    ticket_id = ticket.id

    def load() -> None:
        keep(ticket_id, read_state(company_id, find_ticket(company_id, ticket_id)))
    future = projects.background_read(load)
    try:
        future.result(timeout=wait_s)
    except FutureTimeout:
        return False
    except ServiceError as error:
        current_app.logger.warning("reading ticket %s's record failed: %s", ticket_id, error)
        return False
    return True


@dataclasses.dataclass
class SyncReport:
    """What a run of the scheduled sync did: records read, refused, companies left for later."""

    read: int = 0
    failed: int = 0
    skipped_companies: dict[int, str] = dataclasses.field(default_factory=dict)


def due(now: dt.datetime | None = None, limit: int = SYNC_PAGE) -> list[tuple[int, str]]:
    """The (company, ticket) pairs the next run reads, the longest since tried first."""
    # Tickets written in the last SYNC_DAYS; never tried first, then the longest ago tried.
    since = (now or utcnow()) - dt.timedelta(days=SYNC_DAYS)
    rows = db.session.execute(
        select(TicketRecord.company_id, TicketRecord.id)
        .where(TicketRecord.status == "written", TicketRecord.approved_at >= since)
        .order_by(TicketRecord.record_tried_at.is_not(None), TicketRecord.record_tried_at,
                  TicketRecord.approved_at, TicketRecord.id)
        .limit(limit))
    return [(int(company_id), ticket_id) for company_id, ticket_id in rows]


def sync_due(now: dt.datetime | None = None, limit: int = SYNC_PAGE) -> SyncReport:
    """Read a page of due tickets' records, each company's calls paced by its rate limit."""
    # A company busy past the wait, away or not connected is left for the next run. Every ticket
    # of the page counts as tried, so a record that cannot be read or a company away never
    # holds the others back.
    report = SyncReport()
    page = due(now, limit)
    for company_id, ticket_id in page:
        if company_id in report.skipped_companies:
            continue
        try:
            keep(ticket_id, read_state(company_id, find_ticket(company_id, ticket_id)))
        except (ProjectSystemBusy, Conflict) as error:  # its rate limit, or not connected
            report.skipped_companies[company_id] = error.code
        except ProjectSystemRefused as error:
            if error.code == "project_system_error":  # this record's answer, not the system
                report.failed += 1
                current_app.logger.warning("reading ticket %s's record failed: %s", ticket_id,
                                           error)
            else:
                report.skipped_companies[company_id] = error.code
        else:
            report.read += 1
        db.session.expire_all()
    with write_transaction() as session:
        session.execute(update(TicketRecord)
                        .where(TicketRecord.id.in_([ticket_id for _company, ticket_id in page]))
                        .values(record_tried_at=utcnow()))
    return report
