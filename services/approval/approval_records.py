"""What an approval writes into the project system: the change event with a line item per
routed line, or the daily log manpower entry, and the names of the files attached."""
from __future__ import annotations

import datetime as dt
import math
import re
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

from models import Ticket as TicketRecord
from models.schemas import Shows, TicketCommitment, ticket_fields
from services.project_system import ChangeEventDraft, ChangeEventLine, ManpowerDraft
from services.project_system.project_settings import Stored
from services.project_system.zones import jobsite_time, local_date
from services.routing.routing import Route
from services.tickets import documents

CHANGE_EVENT = "change_event"
DAILY_LOG = "daily_log"
TITLE_DESCRIPTION_CHARS = 80
MAX_NOTES_CHARS = 8000
HOURLY_KINDS = ("labor", "equipment")
CENT = Decimal("0.01")
DAILY_LOG_NOTE = ("This daily log entry is a dated record of the work, not a financial record: "
                  "it bills nothing, and the ticket's photos and signature are not on it; its "
                  "notes link to the signed ticket document, which has them.")


def origin_id(ticket_id: str) -> str:
    """The origin id set on every record written for a ticket."""
    return f"ewt-ticket-{ticket_id}"


def _one_line(text: str, limit: int) -> str:
    """Text on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


def photo_filename(position: int, name: str, image_key: str) -> str:
    """A stable attachment name such as 'photo-01-trench.jpg', so retries can skip it."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", name.rsplit(".", 1)[0]).strip("-_")[:40]
    if re.fullmatch(r"photo-\d+", stem):
        stem = ""  # the name given when the phone sent none says nothing new
    extension = image_key.rsplit(".", 1)[1]
    return f"photo-{position + 1:02d}-{stem}.{extension}" if stem else \
        f"photo-{position + 1:02d}.{extension}"


def content_type(image_key: str) -> str:
    """The content type of a stored image from its key."""
    return "image/png" if image_key.endswith(".png") else "image/jpeg"


def log_date(ticket: TicketRecord, zone: ZoneInfo) -> dt.date:
    """The daily log date of a ticket: the day the crew says the work was done, else the
    jobsite's date (in the project's zone) when it was captured."""
    return ticket.worked_on or local_date(ticket.captured_at, zone)


def _context_lines(ticket: TicketRecord, zone: ZoneInfo) -> list[str]:
    """Why, who and when, as lines of text for the record, with the optional text fields
    declared to show in the project system."""
    lines = [f"Reason (out of scope): {ticket.reason}", f"Directed by: {ticket.directed_by}",
             *(f"{field.label}: {field.value(ticket)}" for field in ticket_fields(Shows.PROCORE)
               if field.value(ticket)),
             f"Captured on {jobsite_time(ticket.captured_at, zone)} (via {ticket.captured_via})"]
    if ticket.signature:
        signer = ", ".join(part for part in (ticket.signature.get("name"),
                                             ticket.signature.get("role")) if part)
        lines.append(f"Signed by: {signer or 'unnamed'}")
    return lines


def change_event_draft(ticket: TicketRecord, routes: list[Route], zone: ZoneInfo,
                       commitment: TicketCommitment | None = None,
                       settings: Stored | None = None) -> ChangeEventDraft:
    """The change event for a ticket: a line item per routed line, on the sub's commitment."""
    # Markup lines too; the event takes the project's type and change reason.
    settings = settings or Stored()
    contract_id = commitment.contract_id if commitment is not None else None
    vendor_id = commitment.vendor_id if contract_id is not None else None
    title = (f"Extra work: {_one_line(ticket.description, TITLE_DESCRIPTION_CHARS)} "
             f"(#{ticket.id[:8]})")
    description = "\n".join([ticket.description, "", *_context_lines(ticket, zone),
                             f"Claimed total: {ticket.total}", f"Extra-work ticket {ticket.id}"])
    lines = tuple(ChangeEventLine(
        description=route.description,
        budget_code_id=route.budget_code.id if route.budget_code else None,
        cost_type=route.cost_type, quantity=route.quantity, unit_cost=route.unit_cost,
        amount=route.amount, unit_of_measure=_unit_of_measure(route),
        vendor_id=vendor_id, contract_id=contract_id)
        for route in routes)
    return ChangeEventDraft(origin_id=origin_id(ticket.id), title=title,
                            description=description, lines=lines,
                            event_type=settings.event_type,
                            change_reason_id=settings.change_reason_id)


def _unit_of_measure(route: Route) -> str | None:
    """Hours for labor and equipment, days for equipment priced at the sheet's daily rate."""
    if route.kind not in HOURLY_KINDS:
        return None
    return "day" if (route.pricing or {}).get("per") == "day" else "hr"


def manpower_draft(ticket: TicketRecord, zone: ZoneInfo) -> ManpowerDraft:
    """The daily log manpower entry for a ticket: its labor as workers and hours per worker."""
    labor = [line for line in ticket.lines if line["kind"] == "labor"]
    workers = sum((Decimal(line["workers"]) for line in labor), Decimal(0))
    worker_hours = sum((Decimal(line["workers"]) * Decimal(line["hours"]) for line in labor),
                       Decimal(0))
    num_workers = max(1, math.ceil(workers))
    num_hours = (worker_hours / num_workers).quantize(CENT, ROUND_HALF_UP) if labor \
        else Decimal("0.00")
    work = [f"- {line['kind']}: " + (f"{line['trade']}, {line['workers']} × {line['hours']} h"
                                     if line["kind"] == "labor" else line["description"])
            for line in ticket.lines]
    notes = "\n".join([f"Extra work (ticket {ticket.id}): {ticket.description}",
                       f"Signed ticket document (PDF, with the photos and signature): "
                       f"{documents.document_url(ticket.id)}",
                       *_context_lines(ticket, zone), *work,
                       f"Claimed total {ticket.total}; this entry bills nothing."])
    return ManpowerDraft(origin_id=origin_id(ticket.id), date=log_date(ticket, zone),
                         num_workers=num_workers, num_hours=num_hours,
                         notes=_cut(notes, MAX_NOTES_CHARS))


def _cut(text: str, limit: int) -> str:
    """Text cut to ``limit`` characters with an ellipsis, line breaks kept."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
