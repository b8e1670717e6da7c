"""Ticket rows: found for a company, re-read locked inside a write, looked up by reference."""
from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload, selectinload

from models import Decision, db, utcnow
from models import Ticket as TicketRecord
from services.platform.errors import Conflict, NotFound

# Newest first, the id breaking ties: the order of every ticket list unless told otherwise.
NEWEST_FIRST = (TicketRecord.captured_at.desc(), TicketRecord.id.desc())
OLDEST_FIRST = (TicketRecord.captured_at.asc(), TicketRecord.id.asc())


def ticket_key(ticket_id: str) -> str | None:
    """The stored form of a ticket id (a canonical UUID), or None if it cannot be one."""
    try:
        return str(uuid.UUID(str(ticket_id)[:40]))
    except ValueError:
        return None


def find_ticket(company_id: int, ticket_id: str) -> TicketRecord:
    """Load a ticket of this company with its photos and decisions, or 404 as for a missing one."""
    key = ticket_key(ticket_id)
    ticket = None
    if key is not None:
        # one query: a ticket has at most 12 photos and a few decisions
        ticket = db.session.scalars(select(TicketRecord).where(
            TicketRecord.id == key, TicketRecord.company_id == company_id).options(
            joinedload(TicketRecord.photos), joinedload(TicketRecord.decisions))).unique().first()
    if ticket is None:
        raise NotFound("no such ticket on this company", code="ticket_not_found")
    return ticket


def locked(session: Session, ticket_id: str) -> TicketRecord:
    """Re-read a ticket inside a write transaction, fresh from the database and row-locked."""
    return session.scalars(select(TicketRecord).where(TicketRecord.id == ticket_id)
                           .with_for_update().execution_options(populate_existing=True)).one()


def append_decision(ticket: TicketRecord, action: str, by: str | None,
                    reason: str | None = None) -> None:
    """Append one entry to a ticket's decision history, with its reason if one was given."""
    ticket.decisions.append(Decision(action=action, by=by, at=utcnow(), reason=reason))


def check_unwritten(ticket: TicketRecord) -> None:
    """409 ticket_written: what is in the project system takes no more photos or signatures."""
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system; photos and "
                       "signatures can no longer be added", code="ticket_written")


def id_for_client_ref(company_id: int, client_ref: str, link_token: str | None = None
                      ) -> str | None:
    """The id of the ticket a caller already sent under this client reference, if any.

    Through a capture link (`link_token`), only that link's tickets are found; a reference
    the company already holds from elsewhere is refused (409 client_ref_in_use), so a link's
    holder never reaches another ticket by guessing or knowing its reference.
    """
    found = db.session.execute(select(TicketRecord.id, TicketRecord.link_token).where(
        TicketRecord.company_id == company_id, TicketRecord.client_ref == client_ref)).first()
    if found is None:
        return None
    if link_token is not None and found.link_token != link_token:
        raise Conflict("this client_ref is already used by another ticket; send a new one",
                       code="client_ref_in_use")
    return found.id


def link_ticket_id(company_id: int, link_token: str, client_ref: str) -> str | None:
    """The id of the ticket sent through this link under this client reference, if it has arrived."""
    return db.session.scalar(select(TicketRecord.id).where(
        TicketRecord.company_id == company_id, TicketRecord.link_token == link_token,
        TicketRecord.client_ref == client_ref))


def phone_tickets(company_id: int, link_token: str, client_refs: list[str]) -> list[TicketRecord]:
    """The tickets sent through one link under the given client references (a phone's own)."""
    refs = [str(ref)[:64] for ref in client_refs if isinstance(ref, str)][:100]
    if not refs:
        return []
    return list(db.session.scalars(select(TicketRecord).where(
        TicketRecord.company_id == company_id, TicketRecord.link_token == link_token,
        TicketRecord.client_ref.in_(refs)).order_by(*NEWEST_FIRST)
        .options(selectinload(TicketRecord.decisions), selectinload(TicketRecord.photos))))
