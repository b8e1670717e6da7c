"""Not-to-exceed: GC directives and change-order requests with an authorised amount.

Tickets that name one count against it while submitted (open) or written. The running total
warns from 80 % and an approval that would take the written total past 100 % is refused
unless the PM confirms it.
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from models import Authorization as AuthorizationRecord
from models import Ticket as TicketRecord
from models import db
from models.schemas import AuthorizationInput, NteStatus
from services.platform.database import write_transaction
from services.platform.errors import Conflict, NotFound, field_problem
from services.project_system import projects

WARN_AT = Decimal(80)
HUNDRED = Decimal(100)
KIND_WORDS = {"directive": "directive", "change_order_request": "change-order request"}


def create(company_id: int, project_id: str, data: AuthorizationInput) -> NteStatus:
    """Record a directive or change-order request of a project; its reference is unique there."""
    project = str(projects.require_project(company_id, project_id).id)
    exists = Conflict(f"project {project} already has an authorization {data.reference!r}",
                      code="authorization_exists")
    if find_by_reference(company_id, project, data.reference) is not None:
        raise exists
    record = AuthorizationRecord(company_id=company_id, project_id=project,
                                 reference=data.reference, kind=data.kind,
                                 title=data.title or None, amount=data.amount)
    try:
        with write_transaction() as session:
            session.add(record)
    except IntegrityError:  # the same reference created at once by another request
        raise exists from None
    return status(record)


def list_for_project(company_id: int, project_id: str) -> list[NteStatus]:
    """A project's authorizations with their running totals, by reference."""
    project = str(projects.require_project(company_id, project_id).id)
    rows = db.session.scalars(select(AuthorizationRecord).where(
        AuthorizationRecord.company_id == company_id, AuthorizationRecord.project_id == project)
        .order_by(AuthorizationRecord.reference))
    return [status(row) for row in rows]


def find(company_id: int, authorization_id: int | str) -> AuthorizationRecord:
    """One of the company's authorizations, or 404 as for a missing one."""
    record = None
    if str(authorization_id).isdecimal() and int(authorization_id) < 2**31:
        record = db.session.scalar(select(AuthorizationRecord).where(
            AuthorizationRecord.id == int(authorization_id),
            AuthorizationRecord.company_id == company_id))
    if record is None:
        raise NotFound("no such authorization on this company", code="authorization_not_found")
    return record


def find_by_reference(company_id: int, project_id: str, reference: str
                      ) -> AuthorizationRecord | None:
    """The project's authorization with this reference (compared without case, by the database's
    lower() on both sides, as its unique index compares them), if any."""
    return db.session.scalar(select(AuthorizationRecord).where(
        AuthorizationRecord.company_id == company_id, AuthorizationRecord.project_id == project_id,
        func.lower(AuthorizationRecord.reference) == func.lower(reference.strip())))


def _totals(record: AuthorizationRecord) -> dict[str, Decimal]:
    """Totals of the tickets against an authorization by status (money summed exactly here)."""
    totals = {"submitted": Decimal(0), "written": Decimal(0)}
    rows = db.session.execute(select(TicketRecord.status, TicketRecord.total).where(
        TicketRecord.company_id == record.company_id, TicketRecord.authorization_id == record.id,
        TicketRecord.status.in_(tuple(totals))))
    for status_name, total in rows:
        totals[status_name] += total
    return totals


def status(record: AuthorizationRecord) -> NteStatus:
    """An authorization with its running total of written and open tickets."""
    totals = _totals(record)
    used = totals["written"] + totals["submitted"]
    amount = record.amount
    percent = (used * HUNDRED / amount).quantize(Decimal("0.1"), ROUND_HALF_UP) if amount \
        else (Decimal(0) if not used else Decimal(1000))
    level = "over" if used > amount else "warning" if percent >= WARN_AT else "ok"
    words = KIND_WORDS[record.kind]
    message = (f"${used:,.2f} of the ${amount:,.2f} authorised by {words} {record.reference} "
               f"is claimed ({percent} %)")
    if level == "warning":
        message += f"; ${amount - used:,.2f} is left"
    elif level == "over":
        message += f"; ${used - amount:,.2f} past the not-to-exceed amount"
    return NteStatus(id=record.id, project_id=record.project_id, reference=record.reference,
                     kind=record.kind, title=record.title, authorized=amount,
                     written=totals["written"], open=totals["submitted"], used=used,
                     remaining=amount - used, percent=percent, level=level, message=message)


def status_of(company_id: int, authorization_id: int | None) -> NteStatus | None:
    """The running total of a ticket's authorization, if it has one."""
    if authorization_id is None:
        return None
    record = db.session.scalar(select(AuthorizationRecord).where(
        AuthorizationRecord.id == authorization_id, AuthorizationRecord.company_id == company_id))
    return status(record) if record is not None else None


def match_reference(company_id: int, project_id: str, reference: str | None
                    ) -> tuple[int | None, str | None]:
    """The authorization a new ticket names, and a warning when the project does not list it."""
    if not reference:
        return None, None
    record = find_by_reference(company_id, project_id, reference)
    if record is None:
        return None, (f"authorization {reference!r} is not listed for this project, so the ticket "
                      "counts against no not-to-exceed amount until the office links it")
    return record.id, None


def check_approval(ticket: TicketRecord, confirmed: bool) -> None:
    """409 nte_exceeded when writing this ticket takes its authorization's written total past
    the authorised amount, unless the PM confirmed it."""
    if ticket.authorization_id is None or confirmed or ticket.status == "written":
        return
    record = db.session.scalar(select(AuthorizationRecord).where(
        AuthorizationRecord.id == ticket.authorization_id,
        AuthorizationRecord.company_id == ticket.company_id))
    if record is None:
        return
    written = _totals(record)["written"]
    after = written + ticket.total
    if after <= record.amount:
        return
    raise Conflict(
        f"approving this ticket takes {KIND_WORDS[record.kind]} {record.reference} to "
        f"${after:,.2f}, past its not-to-exceed amount of ${record.amount:,.2f}; approve with "
        "confirm_over_nte: true if the GC agreed. Nothing was written",
        code="nte_exceeded", details={"authorization_id": record.id, "reference": record.reference,
                                      "authorized": str(record.amount), "written": str(written),
                                      "ticket": str(ticket.total), "after": str(after)})


def link_ticket(company_id: int, ticket: TicketRecord, authorization_id: int | None) -> None:
    """Count a ticket not yet written against one of its project's authorizations, or none."""
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system",
                       code="ticket_written")
    record = None
    if authorization_id is not None:
        record = db.session.scalar(select(AuthorizationRecord).where(
            AuthorizationRecord.id == authorization_id,
            AuthorizationRecord.company_id == company_id,
            AuthorizationRecord.project_id == ticket.project_id))
        if record is None:
            raise Conflict("no such authorization on the ticket's project; see details",
                           code="authorization_not_found", details=[
                field_problem("authorization_id", f"authorization {authorization_id} is not on "
                                                  f"project {ticket.project_id}")])
    with write_transaction() as session:
        current = session.get(TicketRecord, ticket.id)
        if current.status == "written":
            raise Conflict("the ticket is already written to the project system",
                           code="ticket_written")
        current.authorization_id = record.id if record is not None else None
        current.authorization_ref = record.reference if record is not None else None
    db.session.expire_all()
