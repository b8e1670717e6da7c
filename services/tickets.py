"""Tickets: create, read, list and attach photos.

Money is computed with Decimal and rounded to cents (half up) per line; the
total is the sum of the rounded line amounts, so a ticket always adds up.
"""
from __future__ import annotations

import uuid
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from flask import current_app
from sqlalchemy import func, select

from models import Decision as DecisionRecord
from models import Ticket as TicketRecord
from models import TicketPhoto, db
from models.schemas import (
    Decision,
    EquipmentLine,
    External,
    LaborLine,
    MaterialLine,
    Photo,
    PhotoIn,
    RoutingLine,
    Signature,
    Ticket,
    TicketInput,
    TicketList,
    TicketSummary,
)
from services import photos as images
from services import projects
from services.database import write_transaction
from services.errors import Conflict, NotFound, ProjectSystemRefused, ValidationFailed, field_problem
from services.routing import Route, Router, unrouted

CENT = Decimal("0.01")
MAX_PHOTOS = 12


def _cents(value: Decimal) -> Decimal:
    """Round to cents, half up, the way an invoice does."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def _text(value: Decimal | None) -> str | None:
    """Store a decimal as its exact text."""
    return None if value is None else format(value.normalize(), "f")


def price_lines(data: TicketInput) -> tuple[list[dict[str, Any]], Decimal, list[str]]:
    """Turn validated input into stored lines with amounts, the total, and warnings."""
    lines: list[dict[str, Any]] = []
    warnings: list[str] = []
    for i, labor in enumerate(data.labor):
        amount = _cents(labor.workers * labor.hours * labor.rate) if labor.rate is not None else Decimal(0)
        if labor.rate is None:
            warnings.append(f"labor[{i}] ({labor.trade}) has no rate, so its amount is 0")
        lines.append({"kind": "labor", "trade": labor.trade, "hours": _text(labor.hours),
                      "workers": _text(labor.workers), "rate": _text(labor.rate),
                      "costCode": labor.costCode or None, "amount": _text(_cents(amount))})
    for i, item in enumerate(data.equipment):
        amount = _cents(item.hours * item.rate) if item.rate is not None else Decimal(0)
        if item.rate is None:
            warnings.append(f"equipment[{i}] ({item.description}) has no rate, so its amount is 0")
        lines.append({"kind": "equipment", "description": item.description,
                      "hours": _text(item.hours), "rate": _text(item.rate),
                      "costCode": item.costCode or None, "amount": _text(_cents(amount))})
    for i, item in enumerate(data.materials):
        amount = _cents(item.quantity * item.unitCost) if item.unitCost is not None else Decimal(0)
        if item.unitCost is None:
            warnings.append(f"materials[{i}] ({item.description}) has no unit cost, so its amount is 0")
        lines.append({"kind": "materials", "description": item.description,
                      "quantity": _text(item.quantity), "unitCost": _text(item.unitCost),
                      "costCode": item.costCode or None, "amount": _text(_cents(amount))})
    if not lines:
        warnings.append("the ticket has no labor, equipment or material lines")
    total = _cents(sum((Decimal(line["amount"]) for line in lines), Decimal(0)))
    return lines, total, warnings


def photo_store() -> images.ImageStore:
    """The content-addressed store for photos and signatures under instance/."""
    return images.ImageStore(current_app.config["PHOTO_DIR"])


def _process_photos(items: list[PhotoIn], field: str, first_position: int
                    ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Decode, verify, re-encode and store photos; collect a problem per bad photo."""
    store = photo_store()
    max_bytes = current_app.config["MAX_PHOTO_BYTES"]
    stored, problems = [], []
    for i, item in enumerate(items):
        try:
            processed = images.process_photo(images.decode_image_input(item.data_url, max_bytes=max_bytes))
        except images.ImageRejected as error:
            label = f" ({item.name})" if item.name else ""
            problems.append(field_problem(f"{field}[{i}].data_url", f"photo {i + 1}{label}: {error.message}"))
            continue
        stored.append({
            "position": first_position + i,
            "name": item.name or f"photo-{first_position + i + 1}.jpg",
            "taken_at": item.taken_at,
            "coords": item.coords.model_dump() if item.coords else None,
            "image_key": store.put(processed.data, processed.extension),
            "thumb_key": store.put(processed.thumb, "jpg"),
            "width": processed.width,
            "height": processed.height,
        })
    return stored, problems


def _process_signature(data: TicketInput, warnings: list[str]
                       ) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """Verify and store the signature image; without an image the signature does not count."""
    signature = data.signature
    if signature is None:
        return None, []
    if not signature.image:
        warnings.append("the signature has no image, so it was not kept")
        return None, []
    try:
        raw = images.decode_image_input(signature.image, max_bytes=current_app.config["MAX_PHOTO_BYTES"])
        processed = images.process_signature(raw)
    except images.ImageRejected as error:
        return None, [field_problem("signature.image", f"signature: {error.message}")]
    key = photo_store().put(processed.data, processed.extension)
    return {"name": signature.name or None, "role": signature.role or None,
            "signed_at": signature.signed_at, "image_key": key}, []


def create_ticket(company_id: int, data: TicketInput, *, captured_via: str = "api",
                  link_token: str | None = None) -> Ticket:
    """Validate against the project, process photos and signature, and store a new ticket."""
    project = projects.require_project(company_id, data.project_id)
    lines, total, warnings = price_lines(data)
    photo_rows, problems = _process_photos(data.photos, "photos", 0)
    signature, signature_problems = _process_signature(data, warnings)
    problems += signature_problems
    if problems:
        raise ValidationFailed("some images could not be used; see details", details=problems)
    ticket = TicketRecord(
        id=str(uuid.uuid4()), company_id=company_id, project_id=str(project.id),
        status="submitted", description=data.description, reason=data.reason,
        directed_by=data.directed_by, captured_by=data.captured_by or None,
        captured_via=captured_via, link_token=link_token, total=total, lines=lines,
        warnings=warnings, signature=signature, photo_count=len(photo_rows),
    )
    with write_transaction() as session:
        session.add(ticket)
        for row in photo_rows:
            session.add(TicketPhoto(ticket_id=ticket.id, **row))
    return get_ticket(company_id, ticket.id)


def find_ticket(company_id: int, ticket_id: str) -> TicketRecord:
    """Load a ticket of this company, or 404 exactly as for a missing one."""
    try:
        key = str(uuid.UUID(str(ticket_id)))
    except ValueError:
        key = None
    ticket = None
    if key is not None:
        ticket = db.session.scalar(select(TicketRecord).where(
            TicketRecord.id == key, TicketRecord.company_id == company_id))
    if ticket is None:
        raise NotFound("no such ticket on this company", code="ticket_not_found")
    return ticket


def route_ticket(company_id: int, ticket: TicketRecord) -> tuple[list[Route], list[str]]:
    """Route a ticket's lines with the project's current codes, or flag them all if unreadable."""
    try:
        codes = projects.catalog(company_id, ticket.project_id)
    except (ProjectSystemRefused, NotFound) as error:
        return unrouted(ticket.lines, "the project's budget codes could not be read"), \
            [f"routing is unavailable: {error.message}"]
    return Router(codes.cost_codes, codes.budget_codes).route_all(ticket.lines), []


def routing_lines(routes: list[Route]) -> list[RoutingLine]:
    """Shape routes for the API."""
    return [RoutingLine(
        line=r.line, kind=r.kind, description=r.description, cost_type=r.cost_type,
        quantity=r.quantity, unit_cost=r.unit_cost, amount=r.amount,
        budget_code=r.budget_code.flat_code if r.budget_code else None,
        budget_code_id=r.budget_code.id if r.budget_code else None, routed=r.routed,
        exact=r.exact, needs_review=r.needs_review, reason=r.reason) for r in routes]


def get_ticket(company_id: int, ticket_id: str) -> Ticket:
    """A ticket with every field and its routing."""
    ticket = find_ticket(company_id, ticket_id)
    routes, routing_warnings = route_ticket(company_id, ticket)
    return to_ticket(ticket, routes, routing_warnings)


def summarize(ticket: TicketRecord) -> dict[str, Any]:
    """Every field of a ticket except routing, as plain values."""
    kinds: dict[str, list] = {"labor": [], "equipment": [], "materials": []}
    for line in ticket.lines:
        fields = {k: v for k, v in line.items() if k != "kind"}
        model = {"labor": LaborLine, "equipment": EquipmentLine, "materials": MaterialLine}[line["kind"]]
        kinds[line["kind"]].append(model.model_validate(fields))
    signature = ticket.signature
    return dict(
        id=ticket.id, status=ticket.status, project_id=ticket.project_id,
        description=ticket.description, reason=ticket.reason, directed_by=ticket.directed_by,
        captured_at=ticket.captured_at, captured_via=ticket.captured_via,
        captured_by=ticket.captured_by, total=ticket.total, **kinds,
        signature=Signature(name=signature["name"], role=signature["role"],
                            signed_at=signature["signed_at"]) if signature else None,
        photos=[Photo(name=p.name, taken_at=p.taken_at, coords=p.coords) for p in ticket.photos],
        photo_count=ticket.photo_count, link_token=ticket.link_token,
        approved_by=ticket.approved_by, approved_at=ticket.approved_at,
        decisions=[Decision(action=d.action, by=d.by, at=d.at) for d in ticket.decisions],
        external=External.model_validate(ticket.external) if ticket.external else None,
        warnings=list(ticket.warnings or []),
    )


def to_ticket(ticket: TicketRecord, routes: list[Route], extra_warnings: list[str] = ()) -> Ticket:
    """The full Ticket shape with routing."""
    fields = summarize(ticket)
    fields["warnings"] = fields["warnings"] + list(extra_warnings)
    return Ticket(**fields, routing=routing_lines(routes))


def list_tickets(company_id: int, *, status: str | None, project_id: str | None,
                 limit: int, offset: int) -> TicketList:
    """A page of the company's tickets, newest first, id breaking ties."""
    conditions = [TicketRecord.company_id == company_id]
    if status:
        conditions.append(TicketRecord.status == status)
    if project_id:
        conditions.append(TicketRecord.project_id == project_id)
    total = db.session.scalar(select(func.count()).select_from(TicketRecord).where(*conditions))
    rows = db.session.scalars(
        select(TicketRecord).where(*conditions)
        .order_by(TicketRecord.captured_at.desc(), TicketRecord.id.desc())
        .limit(limit).offset(offset))
    return TicketList(data=[TicketSummary(**summarize(t)) for t in rows], total=total,
                      limit=limit, offset=offset)


def add_photos(company_id: int, ticket_id: str, items: list[PhotoIn]) -> Ticket:
    """Attach photos to a ticket not yet written, keeping at most 12 in all."""
    ticket = find_ticket(company_id, ticket_id)
    _check_photo_room(ticket, len(items))
    rows, problems = _process_photos(items, "photos", ticket.photo_count)
    if problems:
        raise ValidationFailed("some photos could not be used; see details", details=problems)
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket.id)
                                 .with_for_update())
        _check_photo_room(current, len(rows))
        for offset, row in enumerate(rows):
            row["position"] = current.photo_count + offset
            session.add(TicketPhoto(ticket_id=current.id, **row))
        current.photo_count += len(rows)
    db.session.expire_all()
    return get_ticket(company_id, ticket_id)


def _check_photo_room(ticket: TicketRecord, adding: int) -> None:
    """Refuse photos on a written ticket, or beyond 12 in all."""
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system; photos can no "
                       "longer be added", code="ticket_written")
    if ticket.photo_count + adding > MAX_PHOTOS:
        room = MAX_PHOTOS - ticket.photo_count
        raise ValidationFailed(
            f"a ticket holds at most {MAX_PHOTOS} photos; this one has {ticket.photo_count}",
            details=[field_problem("photos", f"at most {room} more photo(s) fit on this ticket")])


def append_decision(session, ticket: TicketRecord, action: str, by: str | None) -> None:
    """Append one entry to a ticket's decision history."""
    session.add(DecisionRecord(ticket_id=ticket.id, action=action, by=by))
