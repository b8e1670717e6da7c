"""Tickets: create, read, list and attach photos.

Money is computed with Decimal and rounded to cents (half up) per line; the
total is the sum of the rounded line amounts, so a ticket always adds up.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import errno
import functools
import re
import time
import uuid
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from types import SimpleNamespace
from typing import Any

from flask import current_app, g
from pydantic import ValidationError
from sqlalchemy import Numeric, String, case, cast, delete, func, inspect, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer, joinedload, selectinload

from models import CaptureLink
from models import Decision as DecisionRecord
from models import Ticket as TicketRecord
from models import RateSheet, StagedPhoto, TicketCount, TicketPhoto, db, utcnow
from models.schemas import (
    PhotoIn,
    PhotosInput,
    RoutingLine,
    SignatureIn,
    Ticket,
    TicketInput,
    TicketList,
    TicketSummary,
)
from services import image_pool
from services import photos as images
from services import authorizations, markups, pricing, projects, quotas, rates, signatures
from services.database import write_transaction
from services.errors import (
    Conflict,
    NotFound,
    ServiceError,
    ValidationFailed,
    field_problem,
)
from services.links import public_base_url
from services.project_system.zones import UTC, local_date
from services.routing import Route, unrouted
from services.validation import validation_details

CENT = Decimal("0.01")
MAX_PHOTOS = 12


def _cents(value: Decimal) -> Decimal:
    """Round to cents, half up, the way an invoice does."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def _text(value: Decimal | None) -> str | None:
    """Store a decimal as its exact text."""
    return None if value is None else format(value.normalize(), "f")


def price_lines(data: TicketInput, sheet: RateSheet | None = None,
                project_markups: list[dict[str, Any]] = ()
                ) -> tuple[list[dict[str, Any]], Decimal, list[str]]:
    """Turn validated input into stored lines with amounts, the total, and warnings.

    A line without a rate is priced from `sheet` (the rate sheet in force on the work day);
    each line records which rate was used and from which sheet under `pricing`. The project's
    markups follow the cost lines as lines of their own, in their order.
    """
    lines: list[dict[str, Any]] = []
    warnings: list[str] = []
    for i, labor in enumerate(data.labor):
        priced = pricing.labor(sheet, labor, f"labor[{i}] ({labor.trade})")
        rate = priced.rate
        amount = _cents(labor.workers * labor.hours * rate) if rate is not None else Decimal(0)
        if rate is None and sheet is None:
            warnings.append(f"labor[{i}] ({labor.trade}) has no rate, so its amount is 0")
        elif priced.warning:
            warnings.append(priced.warning)
        lines.append({"kind": "labor", "trade": labor.trade, "hours": _text(labor.hours),
                      "workers": _text(labor.workers), "rate": _text(rate),
                      "costCode": labor.costCode or None, "amount": _text(_cents(amount)),
                      "classification": labor.classification or None,
                      "hour_type": labor.hour_type, "pricing": priced.pricing})
    for i, item in enumerate(data.equipment):
        priced = pricing.equipment(sheet, item, f"equipment[{i}] ({item.description})")
        rate = priced.rate
        amount = _cents(item.hours * rate) if rate is not None else Decimal(0)
        if priced.pricing.get("per") == "day":
            amount = _cents(Decimal(priced.pricing["days"]) * Decimal(priced.pricing["day_rate"]))
        if rate is None and sheet is None:
            warnings.append(f"equipment[{i}] ({item.description}) has no rate, so its amount is 0")
        elif priced.warning:
            warnings.append(priced.warning)
        lines.append({"kind": "equipment", "description": item.description,
                      "hours": _text(item.hours), "rate": _text(rate),
                      "costCode": item.costCode or None, "amount": _text(_cents(amount)),
                      "pricing": priced.pricing})
    for i, item in enumerate(data.materials):
        priced, price = pricing.materials(sheet, item, f"materials[{i}] ({item.description})")
        cost = priced.rate
        unit = price if price is not None else cost
        amount = _cents(item.quantity * unit) if unit is not None else Decimal(0)
        if cost is None and sheet is None:
            warnings.append(f"materials[{i}] ({item.description}) has no unit cost, so its amount is 0")
        elif priced.warning:
            warnings.append(priced.warning)
        lines.append({"kind": "materials", "description": item.description,
                      "quantity": _text(item.quantity), "unitCost": _text(cost),
                      "costCode": item.costCode or None, "amount": _text(_cents(amount)),
                      "unit_price": _text(price), "pricing": priced.pricing})
    if not lines:
        warnings.append("the ticket has no labor, equipment or material lines")
    lines += markups.apply(list(project_markups), lines)
    total = _cents(sum((Decimal(line["amount"]) for line in lines), Decimal(0)))
    return lines, total, warnings


def photo_store() -> images.ImageStore:
    """The content-addressed store for photos and signatures under instance/."""
    return images.ImageStore(current_app.config["PHOTO_DIR"])


def _process_images(function, raws: list[bytes]) -> list[images.ProcessedImage | images.ImageRejected]:
    """Run `function` over each image in the decoding pool, within the request's time budget."""
    config = current_app.config
    if not raws:
        return []
    if int(config["IMAGE_WORKERS"]) <= 0:  # decoding in this process: only for tests of the steps
        results: list[images.ProcessedImage | images.ImageRejected] = []
        for raw in raws:
            try:
                results.append(function(raw))
            except images.ImageRejected as error:
                results.append(error)
        return results
    now = time.monotonic()
    deadline = g.setdefault("image_deadline", now + float(config["IMAGE_REQUEST_BUDGET_S"]))
    settings = image_pool.PoolSettings(config["IMAGE_WORKERS"], config["IMAGE_CPU_SECONDS"],
                                       config["IMAGE_MEMORY_BYTES"])
    return image_pool.run_all([(function, (raw,), {}) for raw in raws], settings,
                              max(0.0, deadline - now))


def _check_photos(items: list[PhotoIn], field: str, first_position: int
                  ) -> tuple[list[tuple[dict[str, Any], images.ProcessedImage]], list[dict[str, str]]]:
    """Decode, verify and re-encode photos in the decoding pool; collect a problem per bad photo."""
    max_bytes = current_app.config["MAX_PHOTO_BYTES"]
    checked, problems = [], []

    def refuse(i: int, item: PhotoIn, message: str) -> None:
        label = f" ({item.name})" if item.name else ""
        problems.append(field_problem(f"{field}[{i}]", f"photo {i + 1}{label}: {message}"))

    raws: list[tuple[int, PhotoIn, bytes]] = []
    for i, item in enumerate(items):
        if item.data_url is None:  # a refused body's photo without image data: its shape says so
            continue
        try:
            raws.append((i, item, images.decode_image_input(item.data_url, max_bytes=max_bytes)))
        except images.ImageRejected as error:
            refuse(i, item, error.message)
    results = _process_images(images.process_photo, [raw for _, _, raw in raws])
    for (i, item, _), processed in zip(raws, results):
        if isinstance(processed, images.ImageRejected):
            refuse(i, item, processed.message)
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


def _image_bytes(photos: list[tuple[dict[str, Any], images.ProcessedImage]],
                 signature: images.ProcessedImage | None) -> int:
    """How many bytes storing these images takes (thumbnails included)."""
    processed = [p for _, p in photos] + ([signature] if signature is not None else [])
    return sum(len(p.data) + len(p.thumb) for p in processed)


def _make_room(company_id: int, link_token: str | None, incoming: int, *, tickets: int = 0) -> None:
    """Check the disk reserve and count the bytes against the daily quotas, before storing any."""
    if incoming:
        quotas.check_disk(incoming)
    quotas.reserve(company_id, link_token, incoming, tickets=tickets)


@contextlib.contextmanager
def _disk_full_is_507():
    """A write that meets a full disk is refused as storage_full, not an internal error."""
    try:
        yield
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise quotas.StorageFull(quotas.FULL_MESSAGE) from None
        raise


def _store_photos(checked: list[tuple[dict[str, Any], images.ProcessedImage]]) -> list[dict[str, Any]]:
    """Write checked photos to the store; only called once every image of the request passed."""
    if not checked:
        return []
    store = photo_store()
    rows = []
    with _disk_full_is_507():
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
    return _check_signature_image(signature.image)


def _check_signature_image(image: str) -> tuple[images.ProcessedImage | None, list[dict[str, str]]]:
    """Decode and verify a signature image; a problem naming `signature.image` if it is bad."""
    try:
        raw = images.decode_image_input(image, max_bytes=current_app.config["MAX_PHOTO_BYTES"])
        processed = _process_images(images.process_signature, [raw])[0]
        if isinstance(processed, images.ImageRejected):
            raise processed
        return processed, []
    except images.ImageRejected as error:
        return None, [field_problem("signature.image", f"signature: {error.message}")]


def _raw_photo_items(payload: Any) -> list[PhotoIn]:
    """The photos of a refused body as far as they can be read, so their images are checked
    too: item i is the body's photos[i], without data when it carries no image text."""
    photos = payload.get("photos") if isinstance(payload, dict) else None
    if not isinstance(photos, list):
        return []
    items = []
    for item in photos[:MAX_PHOTOS]:
        item = item if isinstance(item, dict) else {}
        data_url, name = item.get("data_url"), item.get("name")
        items.append(PhotoIn.model_construct(
            data_url=data_url if isinstance(data_url, str) and data_url.strip() else None,
            name=name.strip()[:200] if isinstance(name, str) else None))
    return items


def _image_problems(payload: Any) -> list[dict[str, str]]:
    """Every bad photo and a bad signature image of a body whose shape was refused."""
    problems = _check_photos(_raw_photo_items(payload), "photos", 0)[1]
    signature = payload.get("signature") if isinstance(payload, dict) else None
    image = signature.get("image") if isinstance(signature, dict) else None
    if isinstance(image, str) and image.strip():
        problems += _check_signature_image(image.strip())[1]
    return problems


def validate_ticket(payload: Any) -> TicketInput:
    """The one validator of a new ticket, from the API and the capture form alike.

    A body whose shape is wrong gets every problem at once: the shape's, and those of each
    bad photo and of a bad signature image (each naming its field, `photos[2]`,
    `signature.image`). A body of the right shape has its images checked when the ticket is
    made, with the same messages.
    """
    try:
        return TicketInput.model_validate(payload)
    except ValidationError as error:
        problems = validation_details(error)
    raise ValidationFailed("the ticket has problems; see details",
                           details=_with_image_problems(problems, payload))


def validate_photos(payload: Any) -> PhotosInput:
    """The one validator of photos to attach: shape problems and bad images, all at once."""
    try:
        return PhotosInput.model_validate(payload)
    except ValidationError as error:
        problems = validation_details(error)
    photos_only = {"photos": payload.get("photos")} if isinstance(payload, dict) else None
    raise ValidationFailed("the photos have problems; see details",
                           details=_with_image_problems(problems, photos_only))


def _with_image_problems(problems: list[dict[str, str]], payload: Any) -> list[dict[str, str]]:
    """Shape problems followed by the image problems they do not already name."""
    named = {problem["field"] for problem in problems}
    return problems + [problem for problem in _image_problems(payload)
                       if problem["field"] not in named and f"{problem['field']}.data_url" not in named]


def _store_signature(data: TicketInput, processed: images.ProcessedImage | None,
                     signed_via: str = "crew_phone") -> dict[str, Any] | None:
    """Write the checked signature image and describe it for the ticket (its content digest is
    added once the ticket's content is set: signatures.seal)."""
    if processed is None or data.signature is None:
        return None
    return signatures.record(data.signature, *_put_signature_files(processed),
                             signed_via=signed_via)


def _put_signature_files(processed: images.ProcessedImage) -> tuple[str, str]:
    """Store a checked signature image and its thumbnail; their keys."""
    store = photo_store()
    with _disk_full_is_507():
        return (store.put(processed.data, processed.extension),
                store.put(processed.thumb, processed.extension))


def stored_signature_image(company_id: int, signature: SignatureIn) -> dict[str, str]:
    """Check a signature's image, count it against the company's storage and store it; its keys.

    A bad or missing image is a 400 naming `signature.image`, and nothing is stored.
    """
    if not signature.image:
        raise ValidationFailed("the signature has no drawing", details=[
            field_problem("signature.image", "signature: draw the signature")])
    processed, problems = _check_signature_image(signature.image)
    if problems:
        raise ValidationFailed("the signature could not be used; see details", details=problems)
    _make_room(company_id, None, _image_bytes([], processed))
    image_key, thumb_key = _put_signature_files(processed)
    return {"image_key": image_key, "thumb_key": thumb_key}


def create_ticket(company_id: int, data: TicketInput, *, captured_via: str = "api",
                  link_token: str | None = None, project_checked: bool = False
                  ) -> tuple[Ticket, bool]:
    """Store a new ticket, or find the one made earlier under the same client_ref.

    Returns (ticket, created). A capture link has already fixed its project
    (`project_checked`), so a crew can submit while the project system is away.
    """
    client_ref = data.client_ref
    if client_ref:
        existing = _id_for_client_ref(company_id, client_ref, link_token)
        if existing is not None:
            return _answer_without_waiting(company_id, existing), False
    if project_checked:
        project_id = data.project_id
    else:
        project_id = projects.project_for_new_ticket(company_id, data.project_id)
    codes = projects.cached_catalog(company_id, project_id)
    values, photo_rows = _prepared_content(company_id, project_id, data, link_token)
    if values["signature"] and captured_via == "api":
        values["signature"]["signed_via"] = "api"
    record = TicketRecord(
        **values, id=str(uuid.uuid4()), company_id=company_id, project_id=project_id,
        status="submitted", captured_via=captured_via, link_token=link_token,
        photos=[TicketPhoto(**row) for row in photo_rows], decisions=[],
        routing_pending=codes is None)
    signatures.seal(record)
    routing, routing_warnings = _known_routing(codes, values["lines"])
    try:
        with write_transaction() as session:
            session.add(record)
            session.flush()
            # Shaped from what was just written, before the commit expires it.
            created = shape_ticket(record, routing, routing_warnings, just_created=True)
    except IntegrityError:
        existing = _id_for_client_ref(company_id, client_ref, link_token) if client_ref else None
        if existing is None:
            raise
        return _answer_without_waiting(company_id, existing), False
    return created, True


def _prepared_content(company_id: int, project_id: str, data: TicketInput,
                      link_token: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What a ticket stores from its input: priced lines, checked and stored images, work day
    and authorization; refused whole (400, or 507 past a quota) before anything is stored."""
    captured_at = utcnow()
    # Stored only as the crew gave it: else the daily log takes the jobsite's date at approval,
    # when the project's zone is surely known; the rate sheet goes by that same day now.
    worked_on = data.worked_on
    sheet = rates.sheet_in_force(company_id, project_id,
                                 worked_on or jobsite_date(company_id, project_id, captured_at))
    lines, total, warnings = price_lines(data, sheet,
                                         markups.stored_markups(company_id, project_id))
    authorization_id, unlisted = authorizations.match_reference(company_id, project_id,
                                                                data.authorization_ref)
    warnings += [unlisted] if unlisted else []
    checked_photos, problems = _check_photos(data.photos, "photos", 0)
    checked_signature, signature_problems = _check_signature(data, warnings)
    problems += signature_problems
    if problems:
        raise ValidationFailed("some images could not be used; see details", details=problems)
    _make_room(company_id, link_token, _image_bytes(checked_photos, checked_signature),
               tickets=1 if link_token else 0)
    photo_rows = _store_photos(checked_photos)
    values = {**_stored_as_sent(data), "total": total, "lines": lines, "warnings": warnings,
              "signature": _store_signature(data, checked_signature),
              "photo_count": len(photo_rows), "captured_at": captured_at,
              "worked_on": worked_on, "authorization_id": authorization_id}
    return values, photo_rows


def _known_routing(codes: projects.Catalog | None, lines: list[dict[str, Any]]
                   ) -> tuple[list[RoutingLine], list[str]]:
    """Lines routed on codes already read, or all pending (with a warning) when there are none."""
    if codes is None:  # routed by the first read once the project's codes are known
        return routing_lines(unrouted(lines, PENDING_REASON)), [PENDING_WARNING]
    return routing_lines(codes.router.route_all(lines)), []


def _answer_without_waiting(company_id: int, ticket_id: str) -> Ticket:
    """The answer to a resent create, shaped without waiting on the project system."""
    return shape_without_waiting(find_ticket(company_id, ticket_id))


def shape_without_waiting(ticket: TicketRecord) -> Ticket:
    """A ticket routed on the codes this process already holds, or with its lines pending;
    a written ticket shows the routing it was written with."""
    if ticket.status == "written" and ticket.written_routing:
        return shape_ticket(ticket, [RoutingLine.model_validate(line)
                                     for line in ticket.written_routing])
    return shape_ticket(ticket, *_known_routing(
        projects.cached_catalog(ticket.company_id, ticket.project_id), ticket.lines))


def revise_ticket(company_id: int, link_token: str, revises: str, data: TicketInput, *,
                  captured_via: str) -> tuple[Ticket, bool]:
    """A crew's corrected version of a ticket sent back to them, from the link it came through.

    The same ticket takes the new content under the new client reference and goes back to
    'Needs review'; its decision history is kept and gains a 'resubmitted' entry naming the
    version. Sending the same correction again (same client_ref) returns it unchanged.
    """
    if data.client_ref:
        existing = _id_for_client_ref(company_id, data.client_ref, link_token)
        if existing is not None:
            return get_ticket(company_id, existing), False
    sent = db.session.execute(select(TicketRecord.project_id, TicketRecord.status).where(
        TicketRecord.company_id == company_id, TicketRecord.client_ref == revises,
        TicketRecord.link_token == link_token)).first()
    if sent is None:
        raise NotFound("no ticket sent from this link under that reference",
                       code="ticket_not_found")
    _check_sent_back(sent.status)  # before any photo is stored or counted
    values, photo_rows = _prepared_content(company_id, sent.project_id, data, link_token)
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(
            TicketRecord.company_id == company_id, TicketRecord.client_ref == revises,
            TicketRecord.link_token == link_token).with_for_update()
            .execution_options(populate_existing=True))
        if current is None:
            raise NotFound("no ticket sent from this link under that reference",
                           code="ticket_not_found")
        _check_sent_back(current.status)
        version = 2 + sum(1 for d in current.decisions if d.action == "resubmitted")
        session.execute(delete(TicketPhoto).where(TicketPhoto.ticket_id == current.id))
        session.expire(current, ["photos"])
        before, earlier = signatures.content_digest(current), current.signature
        for name, value in values.items():
            setattr(current, name, value)
        signatures.seal(current)
        signatures.void_if_changed(current, before, earlier)
        current.captured_via = captured_via
        for row in photo_rows:
            current.photos.append(TicketPhoto(**row))
        current.status = "submitted"
        append_decision(session, current, "resubmitted", data.captured_by or "the crew",
                        f"version {version}")
        ticket_id = current.id
    db.session.expire_all()
    return get_ticket(company_id, ticket_id), True


def _check_sent_back(status: str) -> None:
    """409 ticket_not_sent_back unless the ticket was sent back to the crew."""
    if status != "rejected":
        raise Conflict("only a ticket that was sent back can be corrected",
                       code="ticket_not_sent_back")


def phone_tickets(company_id: int, link_token: str, client_refs: list[str]) -> list[TicketRecord]:
    """The tickets sent through one link under the given client references (a phone's own)."""
    refs = [str(ref)[:64] for ref in client_refs if isinstance(ref, str)][:100]
    if not refs:
        return []
    return list(db.session.scalars(select(TicketRecord).where(
        TicketRecord.company_id == company_id, TicketRecord.link_token == link_token,
        TicketRecord.client_ref.in_(refs)).order_by(*NEWEST_FIRST)
        .options(selectinload(TicketRecord.decisions))))


# Input fields the service works out itself rather than storing as sent.
_WORKED_OUT = {"project_id", "signature", "worked_on"}


def jobsite_date(company_id: int, project_id: str, moment: dt.datetime) -> dt.date:
    """The date of a moment on the jobsite's clock, from the project's zone as last read.

    The project system is not called, so a crew's ticket never waits on it; UTC when the
    project's zone has not been read in this process.
    """
    return local_date(moment, projects.cached_time_zone(company_id, project_id) or UTC)


def _stored_as_sent(data: TicketInput) -> dict[str, Any]:
    """The input's fields named like a column of the model, stored as sent (blank text as null)."""
    columns = set(inspect(TicketRecord).column_attrs.keys()) - _WORKED_OUT
    return {name: getattr(data, name) if getattr(data, name) != "" else None
            for name in type(data).model_fields if name in columns}


def _id_for_client_ref(company_id: int, client_ref: str, link_token: str | None = None
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
        # one query: a ticket has at most 12 photos and a few decisions
        ticket = db.session.scalars(select(TicketRecord).where(
            TicketRecord.id == key, TicketRecord.company_id == company_id).options(
            joinedload(TicketRecord.photos), joinedload(TicketRecord.decisions))).unique().first()
    if ticket is None:
        raise NotFound("no such ticket on this company", code="ticket_not_found")
    return ticket


PENDING_REASON = "routing is pending: the project's budget codes have not been read yet"
PENDING_WARNING = ("routing is pending: the ticket was kept without reading the project's budget "
                   "codes; it is routed when it is read while the project system answers")


def route_lines(company_id: int, project_id: str, lines: list[dict[str, Any]]
                ) -> tuple[list[Route], list[str]]:
    """Route stored lines with the project's current codes, or flag them all if unreadable."""
    try:
        codes = projects.catalog(company_id, project_id)
    except ServiceError as error:
        return unrouted(lines, "the project's budget codes could not be read"), \
            [f"routing is unavailable: {error.message}"]
    return codes.router.route_all(lines), []


def route_ticket(company_id: int, ticket: TicketRecord) -> tuple[list[Route], list[str]]:
    """Route a ticket's lines with the project's current codes, or flag them all if unreadable.

    A ticket whose routing was pending is routed for real here once the codes can be read,
    and loses its mark; until then its lines say the routing is pending.
    """
    try:
        codes = projects.catalog(company_id, ticket.project_id)
    except ServiceError as error:  # not connected, unreachable, project gone: flag every line
        if ticket.routing_pending:
            return unrouted(ticket.lines, PENDING_REASON), \
                [PENDING_WARNING, f"routing is unavailable: {error.message}"]
        return unrouted(ticket.lines, "the project's budget codes could not be read"), \
            [f"routing is unavailable: {error.message}"]
    if ticket.routing_pending:
        with write_transaction() as session:
            session.execute(update(TicketRecord).where(TicketRecord.id == ticket.id)
                            .values(routing_pending=False))
    return codes.router.route_all(ticket.lines), []


def routing_lines(routes: list[Route]) -> list[RoutingLine]:
    """Shape routes for the API."""
    return [RoutingLine(
        line=r.line, kind=r.kind, description=r.description, cost_type=r.cost_type,
        quantity=r.quantity, unit_cost=r.unit_cost, amount=r.amount,
        budget_code=r.budget_code.flat_code if r.budget_code else None,
        budget_code_id=r.budget_code.id if r.budget_code else None, routed=r.routed,
        exact=r.exact, needs_review=r.needs_review, reason=r.reason, pricing=r.pricing)
        for r in routes]


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
    a column of the model is copied by name; `extra` gives the fields worked out elsewhere."""
    schema = schema or TicketSummary
    fields: dict[str, Any] = {name: getattr(ticket, name) for name in _copied_columns(schema)}
    fields.update(signed=bool(ticket.signature), external=ticket.external or None)
    fields.update(extra)
    return schema.model_validate(fields, from_attributes=True)


@functools.cache
def _copied_columns(schema: type[TicketSummary]) -> tuple[str, ...]:
    """The fields of an output shape that are columns of the ticket model."""
    columns = set(inspect(TicketRecord).column_attrs.keys())
    return tuple(name for name in schema.model_fields if name in columns)


def _photo_fields(evidence: str, photo: TicketPhoto) -> dict[str, Any]:
    """A photo row as the Photo shape reads it, with the addresses of its images."""
    return {"id": photo.id, "name": photo.name, "taken_at": photo.taken_at, "coords": photo.coords,
            "url": f"{evidence}/photos/{photo.id}", "thumbnail_url": f"{evidence}/photos/{photo.id}/thumbnail"}


def _signature_fields(evidence: str, ticket: TicketRecord,
                      signature: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored signature as the Signature shape reads it, with the addresses of its image."""
    if not signature:
        return None
    return {**signatures.readable(signature, ticket), "url": f"{evidence}/signature",
            "thumbnail_url": f"{evidence}/signature/thumbnail"}


def shape_ticket(ticket: TicketRecord, routing: list[RoutingLine],
                 extra_warnings: list[str] = (), *, just_created: bool = False) -> Ticket:
    """The whole Ticket shape: the summary's fields, lines grouped by kind, photos, signature
    (and voided ones), decisions, not-to-exceed status, the routing and any routing warnings.
    A ticket `just_created` has no signature requests yet, so none are looked up."""
    evidence = f"{public_base_url()}/v1/tickets/{ticket.id}"
    lines = {kind: [line for line in ticket.lines if line["kind"] == kind]
             for kind in (*LINE_KINDS, "markup")}
    awaiting = None if ticket.signature or just_created else \
        signatures.awaiting_since(ticket.company_id, [ticket.id]).get(ticket.id)
    return shape(ticket, Ticket, routing=routing, labor=lines["labor"],
                 equipment=lines["equipment"], materials=lines["materials"],
                 markups=lines["markup"],
                 photos=[_photo_fields(evidence, photo) for photo in ticket.photos],
                 decisions=ticket.decisions,
                 signature=_signature_fields(evidence, ticket, ticket.signature),
                 voided_signatures=[signatures.readable(s, ticket)
                                    for s in ticket.voided_signatures or []],
                 awaiting_signature_since=awaiting,
                 nte=authorizations.status_of(ticket.company_id, ticket.authorization_id),
                 warnings=[*(ticket.warnings or []), *extra_warnings])


@dataclass(frozen=True)
class ListFilter:
    """Which of a company's tickets a list shows; every field narrows it.

    `sub` is a capture link's label (the sub or crew that link was made for); `to_check`
    keeps tickets with a line whose budget code needs a check, which only the project's
    codes can tell, so it is applied after the database's own conditions.
    """

    status: str | None = None
    project_id: str | None = None
    q: str | None = None
    sub: str | None = None
    unsigned: bool = False
    awaiting_signature: bool = False
    to_check: bool = False
    captured_from: dt.datetime | None = None
    captured_before: dt.datetime | None = None


def _like(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its wildcards escaped with a backslash."""
    needle = text.strip().lower()
    for special in ("\\", "%", "_"):
        needle = needle.replace(special, "\\" + special)
    return f"%{needle}%"


# A ticket's reference as crews read it out: T- and the first 8 hex digits of its id.
# The "T-" may be left out when at least 4 digits are given.
T_REFERENCE = re.compile(r"^(?:t-?([0-9a-f]{1,8})|([0-9a-f]{4,8}))$", re.IGNORECASE)
SEARCHED = (TicketRecord.description, TicketRecord.reason, TicketRecord.directed_by,
            TicketRecord.captured_by)


def _search(q: str):
    """Text found in the description, reason, directed-by or recorded-by, or a T-reference."""
    pattern = _like(q)
    matches = [func.lower(column).like(pattern, escape="\\") for column in SEARCHED]
    reference = T_REFERENCE.match(q.strip())
    if reference:
        digits = (reference.group(1) or reference.group(2)).lower()
        matches.append(TicketRecord.id.like(digits + "%"))
    return or_(*matches)


def _list_conditions(company_id: int, where: ListFilter) -> list:
    """WHERE conditions for a filtered ticket list, always scoped to the company."""
    conditions = [TicketRecord.company_id == company_id]
    if where.status:
        conditions.append(TicketRecord.status == where.status)
    if where.project_id:
        conditions.append(TicketRecord.project_id == where.project_id)
    if where.q and where.q.strip():
        conditions.append(_search(where.q))
    if where.sub:
        conditions.append(TicketRecord.link_token.in_(select(CaptureLink.token).where(
            CaptureLink.company_id == company_id, CaptureLink.label == where.sub)))
    if where.unsigned:
        # a missing signature is stored as JSON null (or SQL NULL): either way, no signature
        conditions.append(or_(TicketRecord.signature.is_(None),
                              cast(TicketRecord.signature, String) == "null"))
    if where.awaiting_signature:
        conditions.append(TicketRecord.id.in_(signatures.open_request_tickets(company_id)))
    if where.captured_from:
        conditions.append(TicketRecord.captured_at >= where.captured_from)
    if where.captured_before:
        conditions.append(TicketRecord.captured_at < where.captured_before)
    return conditions


# Newest first, the id breaking ties: the order of every ticket list unless told otherwise.
NEWEST_FIRST = (TicketRecord.captured_at.desc(), TicketRecord.id.desc())
OLDEST_FIRST = (TicketRecord.captured_at.asc(), TicketRecord.id.asc())
SORTS = ("newest", "oldest", "amount", "project", "sub")
# The most tickets a filter the database cannot answer (lines to check) looks through.
MAX_CHECKED = 5000


def _order(company_id: int, sort: str, project_names: dict[str, str] | None) -> tuple:
    """ORDER BY for a sort: newest or oldest first, largest amount, project name, sub's label."""
    if sort == "oldest":
        return OLDEST_FIRST
    if sort == "amount":
        return (cast(TicketRecord.total, Numeric(14, 2)).desc(), *OLDEST_FIRST)
    if sort == "project":
        names = {key: name.lower() for key, name in (project_names or {}).items()}
        by_name = case(names, value=TicketRecord.project_id, else_=TicketRecord.project_id) \
            if names else TicketRecord.project_id
        return (by_name, *OLDEST_FIRST)
    if sort == "sub":
        label = select(func.lower(CaptureLink.label)).where(
            CaptureLink.company_id == company_id, CaptureLink.token == TicketRecord.link_token
        ).limit(1).scalar_subquery()
        return (label.is_(None), label, func.lower(func.coalesce(TicketRecord.captured_by, "")),
                *OLDEST_FIRST)
    return NEWEST_FIRST


def _ids_to_check(company_id: int, conditions: list, order: tuple, route=None) -> list[str]:
    """The ids, in list order, of matching tickets with a line whose routing needs a check.

    `route(project_id, lines)` routes lines (route_lines of this company by default; the
    review pages pass one that uses the last known codes while Procore is away).
    """
    route = route or functools.partial(route_lines, company_id)
    rows = db.session.execute(select(TicketRecord.id, TicketRecord.project_id, TicketRecord.lines)
                              .where(*conditions).order_by(*order).limit(MAX_CHECKED))
    return [ticket_id for ticket_id, project_id, lines in rows
            if any(r.needs_review for r in route(project_id, lines)[0])]


def list_ticket_records(company_id: int, *, status: str | None = None, project_id: str | None = None,
                        q: str | None = None, limit: int = 50, offset: int = 0,
                        where: ListFilter | None = None, sort: str = "newest",
                        project_names: dict[str, str] | None = None, route=None,
                        load: tuple = ()) -> tuple[list[TicketRecord], int]:
    """A page of ticket records with their photos and decisions, and the match count.

    The one query builder behind /v1/tickets and the review queue. `where` carries every
    filter (status, project_id and q are its shorthand); `sort` is one of SORTS, newest
    first by default; sorting by project orders by the names in `project_names`; `route`
    routes lines for the lines-to-check filter (see _ids_to_check); `load` holds loader
    options for what the caller reads of each record (such as columns it leaves out).
    """
    where = where or ListFilter(status=status, project_id=project_id, q=q)
    conditions = _list_conditions(company_id, where)
    order = _order(company_id, sort, project_names)
    if where.to_check:
        ids = _ids_to_check(company_id, conditions, order, route)
        page = ids[offset:offset + limit]
        found = {record.id: record for record in db.session.scalars(
            select(TicketRecord).where(TicketRecord.id.in_(page)).options(*load))} if page else {}
        return [found[ticket_id] for ticket_id in page if ticket_id in found], len(ids)
    if where == ListFilter(status=where.status, project_id=where.project_id):
        # the kept counts answer without counting rows
        total = counted_tickets(company_id, status=where.status, project_id=where.project_id)
    else:
        total = db.session.scalar(select(func.count()).select_from(TicketRecord).where(*conditions))
    rows = db.session.scalars(
        select(TicketRecord).where(*conditions).order_by(*order).limit(limit).offset(offset)
        .options(*load))
    return list(rows), int(total)


# Age buckets of the queue: (key, label, upper bound of the age in days; None for no bound).
AGE_BUCKETS = (("today", "Under a day", 1), ("days", "1-3 days", 3), ("week", "3-7 days", 7),
               ("old", "Over a week", None))


def age_bucket(captured_at: dt.datetime, now: dt.datetime) -> str:
    """The key of the age bucket a ticket captured at `captured_at` falls in."""
    age = now - captured_at
    for key, _label, days in AGE_BUCKETS:
        if days is None or age < dt.timedelta(days=days):
            return key
    return AGE_BUCKETS[-1][0]


def age_totals(company_id: int, where: ListFilter, now: dt.datetime | None = None,
               route=None) -> dict[str, tuple[int, Decimal]]:
    """How many tickets of a filtered list fall in each age bucket, and their dollar total."""
    now = now or utcnow()
    conditions = _list_conditions(company_id, where)
    if where.to_check:
        conditions.append(TicketRecord.id.in_(_ids_to_check(company_id, conditions, NEWEST_FIRST,
                                                            route)))
    totals = {key: (0, Decimal("0.00")) for key, _label, _days in AGE_BUCKETS}
    for captured_at, total in db.session.execute(
            select(TicketRecord.captured_at, TicketRecord.total).where(*conditions)):
        key = age_bucket(captured_at, now)
        count, money = totals[key]
        totals[key] = (count + 1, money + total)
    return totals


def list_status_counts(company_id: int, where: ListFilter, route=None) -> dict[str, int]:
    """How many tickets of a filtered list are in each status, whatever status it shows."""
    where = replace(where, status=None)
    if where == ListFilter(project_id=where.project_id):
        return status_counts(company_id, where.project_id)  # the kept counts answer
    conditions = _list_conditions(company_id, where)
    if where.to_check:
        conditions.append(TicketRecord.id.in_(_ids_to_check(company_id, conditions, NEWEST_FIRST,
                                                            route)))
    counts = {status: 0 for status in ("submitted", "written", "rejected")}
    counts.update({status: int(count) for status, count in db.session.execute(
        select(TicketRecord.status, func.count()).where(*conditions)
        .group_by(TicketRecord.status))})
    return counts


# A list shows no lines or warnings: their JSON is left in the database.
SUMMARY_LOAD = (defer(TicketRecord.lines), defer(TicketRecord.warnings))


def list_tickets(company_id: int, *, status: str | None, project_id: str | None,
                 limit: int, offset: int, q: str | None = None) -> TicketList:
    """A page of the company's tickets, newest first, id breaking ties."""
    records, total = list_ticket_records(company_id, status=status, project_id=project_id, q=q,
                                         limit=limit, offset=offset, load=SUMMARY_LOAD)
    awaiting = signatures.awaiting_since(company_id, [r.id for r in records if not r.signature])
    return TicketList(data=[shape(record, awaiting_signature_since=awaiting.get(record.id))
                            for record in records], total=total, limit=limit, offset=offset)


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
    _make_room(company_id, None, _image_bytes(checked, None))
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


def _check_unwritten(ticket: TicketRecord) -> None:
    """409 ticket_written: what is in the project system takes no more photos or signatures."""
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system; photos and "
                       "signatures can no longer be added", code="ticket_written")


def _check_photo_room(ticket: TicketRecord, adding: int) -> None:
    """Refuse photos on a written ticket, or beyond 12 in all."""
    _check_unwritten(ticket)
    if ticket.photo_count + adding > MAX_PHOTOS:
        room = MAX_PHOTOS - ticket.photo_count
        raise ValidationFailed(
            f"a ticket holds at most {MAX_PHOTOS} photos; this one has {ticket.photo_count}",
            details=[field_problem("photos", f"at most {room} more photo(s) fit on this ticket")])


def append_decision(session, ticket: TicketRecord, action: str, by: str | None,
                    reason: str | None = None) -> None:
    """Append one entry to a ticket's decision history, with its reason if one was given."""
    ticket.decisions.append(DecisionRecord(action=action, by=by, at=utcnow(), reason=reason))


def photo_file(company_id: int, ticket_id: str, position: int, *, thumbnail: bool = False) -> bytes:
    """The stored JPEG of one of a ticket's photos (or its thumbnail)."""
    ticket = find_ticket(company_id, ticket_id)
    photo = next((p for p in ticket.photos if p.position == position), None)
    if photo is None:
        raise NotFound("no such photo on this ticket", code="photo_not_found")
    return photo_store().open(photo.thumb_key if thumbnail else photo.image_key)


def photo_image(company_id: int, ticket_id: str, photo_id: int, *, thumbnail: bool = False) -> bytes:
    """The stored JPEG of a ticket's photo by its id (or its thumbnail); another company's
    ticket or another ticket's photo is not found."""
    ticket = find_ticket(company_id, ticket_id)
    photo = next((p for p in ticket.photos if p.id == photo_id), None)
    if photo is None:
        raise NotFound("no such photo on this ticket", code="photo_not_found")
    return photo_store().open(photo.thumb_key if thumbnail else photo.image_key)


def signature_file(company_id: int, ticket_id: str, *, thumbnail: bool = False) -> bytes:
    """The stored PNG of a ticket's signature, or its thumbnail (a signature stored before
    thumbnails were kept answers its full image)."""
    ticket = find_ticket(company_id, ticket_id)
    if not ticket.signature:
        raise NotFound("this ticket has no signature", code="signature_not_found")
    key = ticket.signature.get("thumb_key") if thumbnail else None
    return photo_store().open(key or ticket.signature["image_key"])


# Warnings price_lines writes; a new pricing replaces them and keeps the others.
_PRICING_WARNINGS = ("labor[", "equipment[", "materials[", "the ticket has no labor")


def _input_lines(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A ticket's stored cost lines as input again: quantities as recorded, and only the rates
    the crew or caller sent (a line priced before pricing was recorded counts as sent)."""
    def sent(line: dict[str, Any], field: str) -> Any:
        source = (line.get("pricing") or {}).get("source", "explicit")
        return line.get(field) if source == "explicit" else None

    kinds: dict[str, list[dict[str, Any]]] = {"labor": [], "equipment": [], "materials": []}
    for line in lines:
        if line["kind"] == "labor":
            kinds["labor"].append({"trade": line["trade"], "hours": line["hours"],
                                   "workers": line["workers"], "rate": sent(line, "rate"),
                                   "costCode": line.get("costCode"),
                                   "classification": line.get("classification"),
                                   "hour_type": line.get("hour_type") or "st"})
        elif line["kind"] == "equipment":
            kinds["equipment"].append({"description": line["description"], "hours": line["hours"],
                                       "rate": sent(line, "rate"), "costCode": line.get("costCode")})
        elif line["kind"] == "materials":
            kinds["materials"].append({"description": line["description"],
                                       "quantity": line["quantity"],
                                       "unitCost": sent(line, "unitCost"),
                                       "costCode": line.get("costCode")})
    return kinds


def reprice_ticket(company_id: int, ticket_id: str) -> Ticket:
    """Price a ticket not yet written again from the rate sheet in force on its work day and
    the project's current markups; rates the crew or caller sent are kept."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system; its prices stay "
                       "as written", code="ticket_written")
    data = TicketInput.model_validate({
        "project_id": ticket.project_id, "description": ticket.description,
        "reason": ticket.reason, "directed_by": ticket.directed_by, **_input_lines(ticket.lines)})
    sheet = rates.sheet_in_force(company_id, ticket.project_id, ticket.worked_on or
                                 jobsite_date(company_id, ticket.project_id, ticket.captured_at))
    lines, total, warnings = price_lines(data, sheet,
                                         markups.stored_markups(company_id, ticket.project_id))
    kept = [w for w in ticket.warnings or [] if not w.startswith(_PRICING_WARNINGS)]
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket.id)
                                 .with_for_update().execution_options(populate_existing=True))
        if current.status == "written" or current.approval_claim_id is not None:
            raise Conflict("the ticket is being written or was written to the project system; "
                           "its prices stay", code="ticket_written")
        before = signatures.content_digest(current)
        current.lines, current.total, current.warnings = lines, total, [*warnings, *kept]
        signatures.void_if_changed(current, before, current.signature)
    db.session.expire_all()
    return get_ticket(company_id, ticket.id)


def link_ticket_id(company_id: int, link_token: str, client_ref: str) -> str | None:
    """The id of the ticket sent through this link under this client reference, if it has arrived."""
    return db.session.scalar(select(TicketRecord.id).where(
        TicketRecord.company_id == company_id, TicketRecord.link_token == link_token,
        TicketRecord.client_ref == client_ref))


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
    _make_room(company_id, ticket.link_token, _image_bytes(checked, None))
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
    """Attach the signature sent after its ticket; a ticket that has one keeps it, and a
    written one takes none."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.signature:
        return get_ticket(company_id, ticket.id), False
    _check_unwritten(ticket)
    holder = SimpleNamespace(signature=signature)
    processed, problems = _check_signature(holder, [])
    if problems:
        raise ValidationFailed("the signature could not be used; see details", details=problems)
    _make_room(company_id, ticket.link_token, _image_bytes([], processed))
    stored = _store_signature(holder, processed)
    with write_transaction() as session:
        current = session.scalar(select(TicketRecord).where(TicketRecord.id == ticket.id)
                                 .with_for_update().execution_options(populate_existing=True))
        if current.signature:
            return get_ticket(company_id, ticket.id), False
        _check_unwritten(current)
        current.signature = stored
        signatures.seal(current)
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
    _make_room(company_id, link_token, _image_bytes(checked, None))
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
