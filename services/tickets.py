"""Tickets: create, read, list and attach photos.

Money is computed with Decimal and rounded to cents (half up) per line; the
total is the sum of the rounded line amounts, so a ticket always adds up.
"""
from __future__ import annotations

import uuid
from decimal import ROUND_HALF_UP, Decimal
from types import SimpleNamespace
from typing import Any

from flask import current_app
from sqlalchemy import func, inspect, select
from sqlalchemy.exc import IntegrityError

from models import Decision as DecisionRecord
from models import Ticket as TicketRecord
from models import StagedPhoto, TicketCount, TicketPhoto, db, utcnow
from models.schemas import (
    PhotoIn,
    RoutingLine,
    SignatureIn,
    Ticket,
    TicketInput,
    TicketList,
    TicketSummary,
)
from services import photos as images
from services import projects
from services.database import write_transaction
from services.errors import (
    Conflict,
    NotFound,
    ServiceError,
    ValidationFailed,
    field_problem,
)
from services.routing import Route, unrouted

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


def _check_photos(items: list[PhotoIn], field: str, first_position: int
                  ) -> tuple[list[tuple[dict[str, Any], images.ProcessedImage]], list[dict[str, str]]]:
    """Decode, verify and re-encode photos in memory; collect a problem per bad photo."""
    max_bytes = current_app.config["MAX_PHOTO_BYTES"]
    checked, problems = [], []
    for i, item in enumerate(items):
        try:
            processed = images.process_photo(images.decode_image_input(item.data_url, max_bytes=max_bytes))
        except images.ImageRejected as error:
            label = f" ({item.name})" if item.name else ""
            problems.append(field_problem(f"{field}[{i}].data_url", f"photo {i + 1}{label}: {error.message}"))
            continue
        checked.append(({
            "position": first_position + i,
            "name": item.name or f"photo-{first_position + i + 1}.jpg",
            "taken_at": item.taken_at,
            "coords": item.coords.model_dump() if item.coords else None,
            "width": processed.width,
            "height": processed.height,
        }, processed))
    return checked, problems


def _store_photos(checked: list[tuple[dict[str, Any], images.ProcessedImage]]) -> list[dict[str, Any]]:
    """Write checked photos to the store; only called once every image of the request passed."""
    if not checked:
        return []
    store = photo_store()
    rows = []
    for row, processed in checked:
        rows.append(dict(row, image_key=store.put(processed.data, processed.extension),
                         thumb_key=store.put(processed.thumb, "jpg")))
    return rows


def _check_signature(data: TicketInput, warnings: list[str]
                     ) -> tuple[images.ProcessedImage | None, list[dict[str, str]]]:
    """Verify the signature image; without an image the signature does not count."""
    signature = data.signature
    if signature is None:
        return None, []
    if not signature.image:
        warnings.append("the signature has no image, so it was not kept")
        return None, []
    try:
        raw = images.decode_image_input(signature.image, max_bytes=current_app.config["MAX_PHOTO_BYTES"])
        return images.process_signature(raw), []
    except images.ImageRejected as error:
        return None, [field_problem("signature.image", f"signature: {error.message}")]


def _store_signature(data: TicketInput, processed: images.ProcessedImage | None) -> dict[str, Any] | None:
    """Write the checked signature image and describe it for the ticket."""
    if processed is None or data.signature is None:
        return None
    key = photo_store().put(processed.data, processed.extension)
    return {"name": data.signature.name or None, "role": data.signature.role or None,
            "signed_at": data.signature.signed_at, "image_key": key}


def create_ticket(company_id: int, data: TicketInput, *, captured_via: str = "api",
                  link_token: str | None = None, project_checked: bool = False
                  ) -> tuple[Ticket, bool]:
    """Store a new ticket, or find the one made earlier under the same client_ref.

    Returns (ticket, created). A capture link has already fixed its project
    (`project_checked`), so a crew can submit while the project system is away.
    """
    client_ref = data.client_ref
    if client_ref:
        existing = _id_for_client_ref(company_id, client_ref)
        if existing is not None:
            return get_ticket(company_id, existing), False
    if project_checked:
        project_id = data.project_id
    else:
        project_id = str(projects.require_project(company_id, data.project_id).id)
    lines, total, warnings = price_lines(data)
    checked_photos, problems = _check_photos(data.photos, "photos", 0)
    checked_signature, signature_problems = _check_signature(data, warnings)
    problems += signature_problems
    if problems:
        raise ValidationFailed("some images could not be used; see details", details=problems)
    photo_rows = _store_photos(checked_photos)
    record = TicketRecord(
        **_stored_as_sent(data), id=str(uuid.uuid4()), company_id=company_id,
        project_id=project_id, status="submitted", captured_via=captured_via,
        link_token=link_token, total=total, lines=lines, warnings=warnings,
        signature=_store_signature(data, checked_signature), photo_count=len(photo_rows),
        captured_at=utcnow(), photos=[TicketPhoto(**row) for row in photo_rows])
    try:
        with write_transaction() as session:
            session.add(record)
    except IntegrityError:
        existing = _id_for_client_ref(company_id, client_ref) if client_ref else None
        if existing is None:
            raise
        return get_ticket(company_id, existing), False
    return get_ticket(company_id, record.id), True


# Input fields the service works out itself rather than storing as sent.
_WORKED_OUT = {"project_id", "signature"}


def _stored_as_sent(data: TicketInput) -> dict[str, Any]:
    """The input's fields named like a column of the model, stored as sent (blank text as null)."""
    columns = set(inspect(TicketRecord).column_attrs.keys()) - _WORKED_OUT
    return {name: getattr(data, name) if getattr(data, name) != "" else None
            for name in type(data).model_fields if name in columns}


def _id_for_client_ref(company_id: int, client_ref: str) -> str | None:
    """The id of the ticket a caller already sent under this client reference, if any."""
    return db.session.scalar(select(TicketRecord.id).where(
        TicketRecord.company_id == company_id, TicketRecord.client_ref == client_ref))


def _ticket_key(ticket_id: str) -> str | None:
    """The stored form of a ticket id (a canonical UUID), or None if it cannot be one."""
    try:
        return str(uuid.UUID(str(ticket_id)))
    except ValueError:
        return None


def find_ticket(company_id: int, ticket_id: str) -> TicketRecord:
    """Load a ticket of this company with its photos and decisions, or 404 as for a missing one."""
    key = _ticket_key(ticket_id)
    ticket = None
    if key is not None:
        ticket = db.session.scalar(select(TicketRecord).where(
            TicketRecord.id == key, TicketRecord.company_id == company_id))
    if ticket is None:
        raise NotFound("no such ticket on this company", code="ticket_not_found")
    return ticket


def route_ticket(company_id: int, ticket: TicketRecord) -> tuple[list[Route], list[str]]:
    """Route a ticket's lines with the project's current codes, or flag them all if unreadable."""
    return route_lines(company_id, ticket.project_id, ticket.lines)


def route_lines(company_id: int, project_id: str, lines: list[dict[str, Any]]
                ) -> tuple[list[Route], list[str]]:
    """Route stored lines with the project's current codes, or flag them all if unreadable."""
    try:
        codes = projects.catalog(company_id, project_id)
    except ServiceError as error:  # not connected, unreachable, project gone: flag every line
        return unrouted(lines, "the project's budget codes could not be read"), \
            [f"routing is unavailable: {error.message}"]
    return codes.router.route_all(lines), []


def routing_lines(routes: list[Route]) -> list[RoutingLine]:
    """Shape routes for the API."""
    return [RoutingLine(
        line=r.line, kind=r.kind, description=r.description, cost_type=r.cost_type,
        quantity=r.quantity, unit_cost=r.unit_cost, amount=r.amount,
        budget_code=r.budget_code.flat_code if r.budget_code else None,
        budget_code_id=r.budget_code.id if r.budget_code else None, routed=r.routed,
        exact=r.exact, needs_review=r.needs_review, reason=r.reason) for r in routes]


def get_ticket(company_id: int, ticket_id: str) -> Ticket:
    """A ticket with every field and its routing; a written ticket shows the routing it was written with."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.status == "written" and ticket.written_routing:
        return shape_ticket(ticket, [RoutingLine.model_validate(line)
                                     for line in ticket.written_routing])
    routes, routing_warnings = route_ticket(company_id, ticket)
    return shape_ticket(ticket, routing_lines(routes), routing_warnings)


LINE_KINDS = ("labor", "equipment", "materials")


def shape(ticket: TicketRecord, schema: type[TicketSummary] | None = None,
          **extra: Any) -> TicketSummary:
    """A ticket in an output shape (TicketSummary by default): each of the shape's fields that is
    a column of the model is copied by name, lines are grouped by kind, photos and decisions
    come from their rows."""
    schema = schema or TicketSummary
    columns = inspect(TicketRecord).column_attrs.keys()
    fields: dict[str, Any] = {name: getattr(ticket, name) for name in schema.model_fields
                              if name in columns}
    for kind in LINE_KINDS:
        fields[kind] = [line for line in ticket.lines if line["kind"] == kind]
    fields.update(photos=ticket.photos, decisions=ticket.decisions,
                  signature=ticket.signature or None, external=ticket.external or None,
                  warnings=list(ticket.warnings or []))
    fields.update(extra)
    return schema.model_validate(fields, from_attributes=True)


def shape_ticket(ticket: TicketRecord, routing: list[RoutingLine],
                 extra_warnings: list[str] = ()) -> Ticket:
    """The full Ticket shape: the summary's fields, the routing, and any routing warnings."""
    return shape(ticket, Ticket, routing=routing,
                 warnings=[*(ticket.warnings or []), *extra_warnings])


def _list_conditions(company_id: int, status: str | None, project_id: str | None,
                     q: str | None) -> list:
    """WHERE conditions for a filtered ticket list, always scoped to the company."""
    conditions = [TicketRecord.company_id == company_id]
    if status:
        conditions.append(TicketRecord.status == status)
    if project_id:
        conditions.append(TicketRecord.project_id == project_id)
    if q and q.strip():
        needle = q.strip().lower()
        for special in ("\\", "%", "_"):
            needle = needle.replace(special, "\\" + special)
        conditions.append(func.lower(TicketRecord.description).like(f"%{needle}%", escape="\\"))
    return conditions


# Newest first, the id breaking ties: the order of every ticket list.
NEWEST_FIRST = (TicketRecord.captured_at.desc(), TicketRecord.id.desc())


def list_ticket_records(company_id: int, *, status: str | None = None, project_id: str | None = None,
                        q: str | None = None, limit: int = 50, offset: int = 0
                        ) -> tuple[list[TicketRecord], int]:
    """A page of ticket records with their photos and decisions, newest first, and the match count.

    The one query builder behind /v1/tickets and the review queue.
    """
    conditions = _list_conditions(company_id, status, project_id, q)
    if q and q.strip():
        total = db.session.scalar(select(func.count()).select_from(TicketRecord).where(*conditions))
    else:  # the kept counts answer without counting rows
        total = counted_tickets(company_id, status=status, project_id=project_id)
    rows = db.session.scalars(
        select(TicketRecord).where(*conditions).order_by(*NEWEST_FIRST).limit(limit).offset(offset))
    return list(rows), int(total)


def list_tickets(company_id: int, *, status: str | None, project_id: str | None,
                 limit: int, offset: int, q: str | None = None) -> TicketList:
    """A page of the company's tickets, newest first, id breaking ties."""
    records, total = list_ticket_records(company_id, status=status, project_id=project_id, q=q,
                                         limit=limit, offset=offset)
    return TicketList(data=[shape(record) for record in records], total=total, limit=limit,
                      offset=offset)


def status_counts(company_id: int, project_id: str | None = None) -> dict[str, int]:
    """How many of the company's tickets are in each status."""
    query = select(TicketCount.status, func.sum(TicketCount.tickets)).where(
        TicketCount.company_id == company_id)
    if project_id:
        query = query.where(TicketCount.project_id == project_id)
    counts = {status: 0 for status in ("submitted", "written", "rejected")}
    counts.update({status: int(count) for status, count in
                   db.session.execute(query.group_by(TicketCount.status))})
    return counts


def counted_tickets(company_id: int, *, status: str | None = None,
                    project_id: str | None = None) -> int:
    """How many of the company's tickets match a status and project, from the counts the
    database keeps with every write (migration 0009's triggers)."""
    query = select(func.coalesce(func.sum(TicketCount.tickets), 0)).where(
        TicketCount.company_id == company_id)
    if status:
        query = query.where(TicketCount.status == status)
    if project_id:
        query = query.where(TicketCount.project_id == project_id)
    return int(db.session.scalar(query))


def add_photos(company_id: int, ticket_id: str, items: list[PhotoIn]) -> Ticket:
    """Attach photos to a ticket not yet written, keeping at most 12 in all."""
    ticket = find_ticket(company_id, ticket_id)
    _check_photo_room(ticket, len(items))
    checked, problems = _check_photos(items, "photos", ticket.photo_count)
    if problems:
        raise ValidationFailed("some photos could not be used; see details", details=problems)
    rows = _store_photos(checked)
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket.id)
                                 .with_for_update().execution_options(populate_existing=True))
        _check_photo_room(current, len(rows))
        for offset, row in enumerate(rows):
            row["position"] = current.photo_count + offset
            current.photos.append(TicketPhoto(**row))
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
    ticket.decisions.append(DecisionRecord(action=action, by=by, at=utcnow()))


def photo_file(company_id: int, ticket_id: str, position: int, *, thumbnail: bool = False) -> bytes:
    """The stored JPEG of one of a ticket's photos (or its thumbnail)."""
    ticket = find_ticket(company_id, ticket_id)
    photo = next((p for p in ticket.photos if p.position == position), None)
    if photo is None:
        raise NotFound("no such photo on this ticket", code="photo_not_found")
    return photo_store().open(photo.thumb_key if thumbnail else photo.image_key)


def signature_file(company_id: int, ticket_id: str) -> bytes:
    """The stored PNG of a ticket's signature."""
    ticket = find_ticket(company_id, ticket_id)
    if not ticket.signature:
        raise NotFound("this ticket has no signature", code="signature_not_found")
    return photo_store().open(ticket.signature["image_key"])


def id_for_client_ref(company_id: int, client_ref: str) -> str | None:
    """The id of the company's ticket sent under this client reference, if it has arrived."""
    return _id_for_client_ref(company_id, client_ref)


def put_photo(company_id: int, ticket_id: str, key: str, photo: PhotoIn) -> tuple[Ticket, bool]:
    """Attach one photo under the sender's own key; the same key again changes nothing.

    Returns the ticket and whether this call added the photo. Photos arrive one by one from
    a phone on a weak signal, so each is checked and stored on its own.
    """
    ticket = find_ticket(company_id, ticket_id)
    if any(p.client_key == key for p in ticket.photos):
        return get_ticket(company_id, ticket.id), False
    _check_photo_room(ticket, 1)
    checked, problems = _check_photos([photo], "photo", ticket.photo_count)
    if problems:
        raise ValidationFailed("the photo could not be used; see details", details=problems)
    (row,) = _store_photos(checked)
    try:
        with write_transaction() as session:
            current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket.id)
                                     .with_for_update().execution_options(populate_existing=True))
            if any(p.client_key == key for p in current.photos):
                return get_ticket(company_id, ticket.id), False
            _check_photo_room(current, 1)
            row.update(position=current.photo_count, client_key=key)
            current.photos.append(TicketPhoto(**row))
            current.photo_count += 1
    except IntegrityError:  # the same key arrived twice at once: the first one counts
        pass
    db.session.expire_all()
    return get_ticket(company_id, ticket.id), True


def put_signature(company_id: int, ticket_id: str, signature: SignatureIn) -> tuple[Ticket, bool]:
    """Attach the signature sent after its ticket; a ticket that has one keeps it."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.signature:
        return get_ticket(company_id, ticket.id), False
    holder = SimpleNamespace(signature=signature)
    processed, problems = _check_signature(holder, [])
    if problems:
        raise ValidationFailed("the signature could not be used; see details", details=problems)
    stored = _store_signature(holder, processed)
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket.id)
                                 .with_for_update().execution_options(populate_existing=True))
        if current.signature:
            return get_ticket(company_id, ticket.id), False
        current.signature = stored
    db.session.expire_all()
    return get_ticket(company_id, ticket.id), True


def stage_photo(company_id: int, link_token: str, client_ref: str, key: str,
                photo: PhotoIn) -> bool:
    """Keep a photo taken for a ticket still being written; the same key again changes nothing.

    Returns whether this call kept it.
    """
    where = (StagedPhoto.link_token == link_token, StagedPhoto.client_ref == client_ref)
    if db.session.scalar(select(StagedPhoto.id).where(*where, StagedPhoto.client_key == key)):
        return False
    held = db.session.scalar(select(func.count()).select_from(StagedPhoto).where(*where))
    if held >= MAX_PHOTOS:
        raise ValidationFailed(f"a ticket holds at most {MAX_PHOTOS} photos",
                               details=[field_problem("photos", "no more photos fit on this ticket")])
    checked, problems = _check_photos([photo], "photo", 0)
    if problems:
        raise ValidationFailed("the photo could not be used; see details", details=problems)
    (row,) = _store_photos(checked)
    row.pop("position", None)
    try:
        with write_transaction() as session:
            session.add(StagedPhoto(company_id=company_id, link_token=link_token,
                                    client_ref=client_ref, client_key=key, **row))
    except IntegrityError:  # the same photo twice at once: the first one counts
        return False
    return True


def attach_staged(company_id: int, ticket_id: str, link_token: str, client_ref: str,
                  keys: list[str]) -> None:
    """Move the photos staged for a ticket onto it, those the phone still lists, in its order."""
    where = (StagedPhoto.company_id == company_id, StagedPhoto.link_token == link_token,
             StagedPhoto.client_ref == client_ref)
    if not db.session.scalar(select(StagedPhoto.id).where(*where).limit(1)):
        return
    order = {key: index for index, key in enumerate(keys)}
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket_id)
                                 .with_for_update().execution_options(populate_existing=True))
        held = {p.client_key for p in current.photos}
        staged = sorted(session.scalars(select(StagedPhoto).where(*where)),
                        key=lambda s: order.get(s.client_key, len(order)))
        for row in staged:
            if row.client_key in order and row.client_key not in held \
                    and current.photo_count < MAX_PHOTOS:
                current.photos.append(TicketPhoto(
                    position=current.photo_count, client_key=row.client_key, name=row.name,
                    taken_at=row.taken_at, coords=row.coords, image_key=row.image_key,
                    thumb_key=row.thumb_key, width=row.width, height=row.height))
                current.photo_count += 1
            session.delete(row)
    db.session.expire_all()
