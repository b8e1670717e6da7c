"""Tickets: validate, create, correct after being sent back, price again, and remove a scratch one.

A ticket is refused whole (400, or 507 past a quota) before anything is stored; its images
are stored before its row, and the row is written in one short transaction.
"""
from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, inspect, select
from sqlalchemy.exc import IntegrityError

from models import Decision, RoutingDecision, SignatureRequest, TicketPhoto, db, utcnow
from models import Ticket as TicketRecord
from models.schemas import Ticket, TicketInput
from services.capture import evidence, links
from services.platform.database import write_transaction
from services.platform.errors import Conflict, NotFound, ValidationFailed
from services.platform.validation import validation_details
from services.pricing import authorizations, markups, pricing, rates
from services.project_system import projects
from services.tickets import signatures
from services.tickets.ticket_records import append_decision, find_ticket, id_for_client_ref, locked
from services.tickets.ticket_shapes import Wait, get_ticket, routing_of, shape_ticket
from services.webhooks import webhooks


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
                           details=evidence.with_image_problems(problems, payload))


def create_ticket(company_id: int, data: TicketInput, *, captured_via: str = "api",
                  link_token: str | None = None, project_checked: bool = False,
                  project_markups: list[dict[str, Any]] | None = None,
                  language: str | None = None) -> tuple[Ticket, bool]:
    """Store a new ticket, or find the one made earlier under the same client_ref.

    Returns (ticket, created). A capture link has already fixed its project
    (`project_checked`), so a crew can submit while the project system is away. The project's
    own markups apply unless `project_markups` gives others (the connection test's). `language`
    is the crew's page's, for a ticket sent through a capture link.
    """
    client_ref = data.client_ref
    if client_ref:
        existing = id_for_client_ref(company_id, client_ref, link_token)
        if existing is not None:
            return _answer_without_waiting(company_id, existing), False
    project_id, project_name = (data.project_id, None) if project_checked else \
        projects.project_for_new_ticket(company_id, data.project_id)
    values, photo_rows = _prepared_content(company_id, project_id, data, link_token,
                                           project_markups)
    if values["signature"] and captured_via == "api":
        values["signature"]["signed_via"] = "api"
    record = TicketRecord(
        **values, id=str(uuid.uuid4()), company_id=company_id, project_id=project_id,
        status="submitted", captured_via=captured_via, link_token=link_token, language=language,
        photos=[TicketPhoto(**row) for row in photo_rows], decisions=[])
    signatures.seal(record)
    # Routed on the codes this process holds, so a crew's answer never waits on the project
    # system, and before the write lock is taken, so no other create waits on the routing.
    routing = routing_of(record, Wait.NO)
    try:
        with write_transaction() as session:
            if project_name is not None:
                projects.remember_project(session, company_id, project_id, project_name)
            session.add(record)
            session.flush()
            # Shaped from what was just written, before the commit expires it.
            created = shape_ticket(record, Wait.NO, routing=routing, just_created=True)
            webhooks.emit(session, record, webhooks.WebhookEventType.SUBMITTED, shaped=created)
    except IntegrityError:
        existing = id_for_client_ref(company_id, client_ref, link_token) if client_ref else None
        if existing is None:
            raise
        return _answer_without_waiting(company_id, existing), False
    return created, True


def _prepared_content(company_id: int, project_id: str, data: TicketInput,
                      link_token: str | None, project_markups: list[dict[str, Any]] | None = None
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What a ticket stores from its input: priced lines, checked and stored images, work day
    and authorization; refused whole (400, or 507 past a quota) before anything is stored."""
    captured_at = utcnow()
    # Stored only as the crew gave it: else the daily log takes the jobsite's date at approval,
    # when the project's zone is surely known; the rate sheet goes by that same day now.
    worked_on = data.worked_on
    sheet = rates.sheet_in_force(company_id, project_id, worked_on or projects.jobsite_date(
        company_id, project_id, captured_at))
    if project_markups is None:
        project_markups = markups.stored_markups(company_id, project_id)
    lines, total, warnings = pricing.price_lines(data, sheet, project_markups)
    authorization_id, unlisted = authorizations.match_reference(company_id, project_id,
                                                                data.authorization_ref)
    warnings += [unlisted] if unlisted else []
    checked_photos, problems = evidence.check_photos(data.photos, "photos", 0)
    checked_signature, signature_problems = evidence.check_signature(data, warnings)
    problems += signature_problems
    if problems:
        raise ValidationFailed("some images could not be used; see details", details=problems)
    evidence.make_room(company_id, link_token,
                       evidence.image_bytes(checked_photos, checked_signature),
                       tickets=1 if link_token else 0)
    photo_rows, signature_keys = evidence.store_images(
        checked_photos, checked_signature if data.signature is not None else None)
    values = {**_stored_as_sent(data), "total": total, "lines": lines, "warnings": warnings,
              # A capture link names the sub or crew it was made for.
              "sub": links.label_of(link_token) if link_token else data.sub,
              "signature": evidence.signature_record(data, signature_keys),
              "photo_count": len(photo_rows), "captured_at": captured_at,
              "worked_on": worked_on, "authorization_id": authorization_id}
    return values, photo_rows


def _answer_without_waiting(company_id: int, ticket_id: str) -> Ticket:
    """The answer to a resent create, shaped without waiting on the project system."""
    return shape_ticket(find_ticket(company_id, ticket_id), Wait.NO)


def revise_ticket(company_id: int, link_token: str, revises: str, data: TicketInput, *,
                  captured_via: str, language: str | None = None,
                  keep_keys: list[str] | None = None) -> tuple[Ticket, bool]:
    """A crew's corrected version of a ticket sent back to them, from the link it came through.

    The same ticket takes the new content under the new client reference and goes back to
    'Needs review'; its decision history is kept and gains a 'resubmitted' entry naming the
    version. Sending the same correction again (same client_ref) returns it unchanged. The
    answer is routed without waiting on the project system, as a new ticket's is. Photos the
    ticket holds under a key the correction still lists (`keep_keys`, the phone's digests)
    stay on it, so the phone sends only the photos that are new.
    """
    if data.client_ref:
        existing = id_for_client_ref(company_id, data.client_ref, link_token)
        if existing is not None:
            return get_ticket(company_id, existing, Wait.NO), False
    sent = db.session.execute(select(TicketRecord.id, TicketRecord.project_id,
                                     TicketRecord.status).where(
        TicketRecord.company_id == company_id, TicketRecord.client_ref == revises,
        TicketRecord.link_token == link_token)).first()
    if sent is None:
        raise NotFound("no ticket sent from this link under that reference",
                       code="ticket_not_found")
    _check_sent_back(sent.status)  # before any photo is stored or counted
    values, photo_rows = _prepared_content(company_id, sent.project_id, data, link_token)
    with write_transaction() as session:
        current = locked(session, sent.id)
        _check_sent_back(current.status)
        version = 2 + sum(1 for d in current.decisions if d.action == "resubmitted")
        kept, photo_rows = _kept_and_new_photos(current, keep_keys, photo_rows)
        session.execute(delete(TicketPhoto).where(
            TicketPhoto.ticket_id == current.id,
            TicketPhoto.id.not_in([p.id for p in kept])))
        session.expire(current, ["photos"])
        before, earlier = signatures.content_digest(current), current.signature
        for name, value in values.items():
            setattr(current, name, value)
        signatures.seal(current)
        signatures.void_if_changed(current, before, earlier)
        current.captured_via = captured_via
        current.language = language or current.language
        _place_photos(current, kept, photo_rows)
        current.status = "submitted"
        append_decision(current, "resubmitted", data.captured_by or "the crew",
                        f"version {version}")
        webhooks.emit(session, current, webhooks.WebhookEventType.SUBMITTED)
        ticket_id = current.id
    db.session.expire_all()
    return get_ticket(company_id, ticket_id, Wait.NO), True


def _kept_and_new_photos(current: TicketRecord, keep_keys: list[str] | None,
                         photo_rows: list[dict]) -> tuple[list[TicketPhoto], list[dict]]:
    """The ticket's photos a correction keeps (in the order of `keep_keys`) and its photos not
    already held; 409 photos_full, before anything changes, when together they are too many."""
    order = {key: index for index, key in enumerate(keep_keys or [])}
    kept = sorted((p for p in current.photos if p.client_key in order),
                  key=lambda p: order[p.client_key])
    kept_keys = {p.client_key for p in kept}
    photo_rows = [row for row in photo_rows if row.get("client_key") not in kept_keys]
    if len(kept) + len(photo_rows) > evidence.MAX_PHOTOS:  # nothing is changed
        raise Conflict(f"a ticket holds at most {evidence.MAX_PHOTOS} photos; the correction "
                       f"keeps {len(kept)} and adds {len(photo_rows)}", code="photos_full")
    return kept, photo_rows


def _place_photos(current: TicketRecord, kept: list[TicketPhoto], photo_rows: list[dict]) -> None:
    """Number the kept photos first and add the new ones after them."""
    for position, photo in enumerate(kept):
        photo.position = position
    for row in photo_rows:
        current.photos.append(TicketPhoto(**dict(row, position=len(kept) + row["position"])))
    current.photo_count = len(kept) + len(photo_rows)


def _check_sent_back(status: str) -> None:
    """409 ticket_not_sent_back unless the ticket was sent back to the crew."""
    if status != "rejected":
        raise Conflict("only a ticket that was sent back can be corrected",
                       code="ticket_not_sent_back")


# Input fields the service works out itself rather than storing as sent.
_WORKED_OUT = {"project_id", "signature", "worked_on"}


def _stored_as_sent(data: TicketInput) -> dict[str, Any]:
    """The input's fields named like a column of the model, stored as sent (blank text as null)."""
    columns = set(inspect(TicketRecord).column_attrs.keys()) - _WORKED_OUT
    return {name: getattr(data, name) if getattr(data, name) != "" else None
            for name in type(data).model_fields if name in columns}


def reprice_ticket(company_id: int, ticket_id: str) -> Ticket:
    """Price a ticket not yet written again from the rate sheet in force on its work day and
    the project's current markups; rates the crew or caller sent are kept."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.status == "written":
        raise Conflict("the ticket is already written to the project system; its prices stay "
                       "as written", code="ticket_written")
    data = TicketInput.model_validate({
        "project_id": ticket.project_id, "description": ticket.description,
        "reason": ticket.reason, "directed_by": ticket.directed_by,
        **pricing.input_lines(ticket.lines)})
    day = ticket.worked_on or projects.jobsite_date(company_id, ticket.project_id,
                                                    ticket.captured_at)
    sheet = rates.sheet_in_force(company_id, ticket.project_id, day)
    lines, total, warnings = pricing.price_lines(
        data, sheet, markups.stored_markups(company_id, ticket.project_id))
    kept = [w for w in ticket.warnings or [] if not w.startswith(pricing.PRICING_WARNINGS)]
    with write_transaction() as session:
        current = locked(session, ticket.id)
        if current.status == "written" or current.approval_claim_id is not None:
            raise Conflict("the ticket is being written or was written to the project system; "
                           "its prices stay", code="ticket_written")
        before = signatures.content_digest(current)
        current.lines, current.total, current.warnings = lines, total, [*warnings, *kept]
        signatures.void_if_changed(current, before, current.signature)
    db.session.expire_all()
    return get_ticket(company_id, ticket.id)


def discard_scratch(company_id: int, ticket_ids: list[str]) -> int:
    """Delete tickets the connection test made, with their photos, history, signing links and
    the routing evidence learning kept of them; how many went. Their image files, which no
    ticket then names, go with the next photo sweep."""
    with write_transaction() as session:
        doomed = list(session.scalars(select(TicketRecord).where(
            TicketRecord.company_id == company_id, TicketRecord.id.in_(ticket_ids))))
        ids = [ticket.id for ticket in doomed]
        for table, column in ((TicketPhoto, TicketPhoto.ticket_id), (Decision, Decision.ticket_id),
                              (SignatureRequest, SignatureRequest.ticket_id)):
            session.execute(delete(table).where(column.in_(ids)))
        session.execute(delete(RoutingDecision).where(RoutingDecision.company_id == company_id,
                                                      RoutingDecision.ticket_id.in_(ids)))
        for ticket in doomed:
            session.delete(ticket)
    db.session.expire_all()
    return len(doomed)
