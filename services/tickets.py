"""Tickets: create, read, list and attach photos.

Money is computed with Decimal and rounded to cents (half up) per line; the
total is the sum of the rounded line amounts, so a ticket always adds up.
"""
from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, NamedTuple

from flask import current_app
from pydantic import TypeAdapter
from sqlalchemy import bindparam, event, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from models import Decision as DecisionRecord
from models import Ticket as TicketRecord
from models import TicketCount, TicketPhoto, db, utcnow
from models.schemas import (
    Decision,
    JsonDocument,
    PhotoIn,
    RoutingLine,
    Ticket,
    TicketInput,
    TicketSummary,
)
from services import photos as images
from services import projects
from services.database import driver_reads, driver_writes, write_transaction
from services.errors import (
    Conflict,
    NotFound,
    ServiceError,
    ValidationFailed,
    field_problem,
)
from services.ids import new_id
from services.keptrows import TICKETS, kept_or_read
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
    stored = store_ticket(company_id, data, captured_via=captured_via,
                          link_token=link_token, project_checked=project_checked)
    return get_ticket(company_id, stored.id), stored.created


def create_ticket_document(company_id: int, data: TicketInput) -> JsonDocument:
    """Store a ticket from the API (or find its client_ref's) and answer the Ticket document."""
    stored = store_ticket(company_id, data)
    return _document(company_id, stored.id, stored.row)


class StoredTicket(NamedTuple):
    """What storing a ticket gives back: its id, whether this call made it, and for a new
    ticket the document row it was stored with (None when a client_ref found an older one)."""

    id: str
    created: bool
    row: tuple | None


def store_ticket(company_id: int, data: TicketInput, *, captured_via: str = "api",
                 link_token: str | None = None, project_checked: bool = False) -> StoredTicket:
    """Store a new ticket, or find the one a client_ref already made."""
    client_ref = data.client_ref
    if client_ref:
        existing = _id_for_client_ref(company_id, client_ref)
        if existing is not None:
            return StoredTicket(existing, False, None)
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
    signature = _store_signature(data, checked_signature)
    values: dict[str, Any] = {
        "id": new_id(), "company_id": company_id, "project_id": project_id,
        "client_ref": client_ref, "status": "submitted", "description": data.description,
        "reason": data.reason, "directed_by": data.directed_by,
        "captured_by": data.captured_by or None, "captured_via": captured_via,
        "link_token": link_token, "total": total, "lines": lines, "warnings": warnings,
        "signature": signature, "photo_count": len(photo_rows), "captured_at": utcnow(),
    }
    # Everything but the statements is done before the write lock is taken: writers queue
    # on that lock, so each microsecond spent holding it is paid by every writer waiting.
    values["summary_json"] = _new_ticket_summary(values, photo_rows)
    photo_values = [dict(row, ticket_id=values["id"]) for row in photo_rows]
    writes = driver_writes()
    try:
        writes.write([
            (_INSERT_TICKET, [values]), (_INSERT_PHOTOS, photo_values),
            (_count_statement(writes.dialect_name), [{
                "company_id": company_id, "project_id": project_id, "status": "submitted",
                "tickets": 1}])])
    except IntegrityError:
        existing = _id_for_client_ref(company_id, client_ref) if client_ref else None
        if existing is None:
            raise
        return StoredTicket(existing, False, None)
    return StoredTicket(values["id"], True,
                        (values["summary_json"], values["status"], project_id, lines, None))


# A new ticket is written on the driver's connection rather than through the ORM's unit
# of work, which cost about a millisecond per ticket, all of it inside the write lock
# (services.database.DriverWrites).
_INSERT_TICKET = TicketRecord.__table__.insert()
_INSERT_PHOTOS = TicketPhoto.__table__.insert()


def _new_ticket_summary(values: dict[str, Any], photo_rows: list[dict[str, Any]]) -> str:
    """The summary document of a ticket about to be inserted, rendered from its values."""
    return TicketSummary(**summary_fields(values, photo_rows, ())).model_dump_json()


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


def _no_such_ticket() -> NotFound:
    """The 404 for a ticket that is missing or belongs to another company (the same answer)."""
    return NotFound("no such ticket on this company", code="ticket_not_found")


def find_ticket(company_id: int, ticket_id: str) -> TicketRecord:
    """Load a ticket of this company, or 404 exactly as for a missing one."""
    key = _ticket_key(ticket_id)
    ticket = None
    if key is not None:
        ticket = db.session.scalar(select(TicketRecord).where(
            TicketRecord.id == key, TicketRecord.company_id == company_id))
    if ticket is None:
        raise _no_such_ticket()
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


_ROUTING_JSON = TypeAdapter(list[RoutingLine])
_DOCUMENT_STATEMENT = (
    select(TicketRecord.summary_json, TicketRecord.status, TicketRecord.project_id,
           TicketRecord.lines, TicketRecord.written_routing)
    .where(TicketRecord.id == bindparam("id"), TicketRecord.company_id == bindparam("company_id")))


def ticket_document(company_id: int, ticket_id: str) -> JsonDocument:
    """One ticket with its routing, as the Ticket JSON document, built on its kept summary."""
    return _document(company_id, ticket_id)


def _document(company_id: int, ticket_id: str, row: tuple | None = None) -> JsonDocument:
    """The Ticket document from its document row, read here unless the caller has it.

    A Ticket is its summary's fields followed by `routing`, so the document is the kept
    summary with the routing appended. When routing adds a warning (the summary's
    `warnings` would change) or no summary is kept yet, it is shaped in full instead.
    """
    if row is None:
        key = _ticket_key(ticket_id)
        row = _document_row(company_id, key) if key is not None else None
    if row is None:
        raise _no_such_ticket()
    summary, status, project_id, lines, written_routing = row
    if summary is not None and status == "written" and written_routing:
        return _with_routing(summary, [RoutingLine.model_validate(line) for line in written_routing])
    if summary is not None:
        routes, routing_warnings = route_lines(company_id, project_id, lines)
        if not routing_warnings:
            return _with_routing(summary, routing_lines(routes))
    return JsonDocument(get_ticket(company_id, ticket_id).model_dump_json())


def _document_row(company_id: int, ticket_id: str) -> tuple | None:
    """A ticket's kept summary and what routing it needs, kept between requests where the
    database allows (services.keptrows), else read on the driver's connection."""
    params = {"id": ticket_id, "company_id": company_id}
    return kept_or_read(TICKETS, (company_id, ticket_id),
                        lambda: driver_reads().first(_DOCUMENT_STATEMENT, params))


def _with_routing(summary: str, routing: list[RoutingLine]) -> JsonDocument:
    """A kept summary document with `routing` appended as its last field."""
    return JsonDocument(summary[:-1] + ',"routing":' + _ROUTING_JSON.dump_json(routing).decode() + "}")


def get_ticket(company_id: int, ticket_id: str) -> Ticket:
    """A ticket with every field and its routing; a written ticket shows the routing it was written with."""
    ticket = find_ticket(company_id, ticket_id)
    if ticket.status == "written" and ticket.written_routing:
        return Ticket(**summarize(ticket),
                      routing=[RoutingLine.model_validate(line) for line in ticket.written_routing])
    routes, routing_warnings = route_ticket(company_id, ticket)
    return to_ticket(ticket, routes, routing_warnings)


def summarize(ticket: TicketRecord) -> dict[str, Any]:
    """Every field of a ticket except routing, as plain values."""
    return summary_fields(
        {name: getattr(ticket, name) for name in _SUMMARY_COLUMNS},
        [{"name": p.name, "taken_at": p.taken_at, "coords": p.coords} for p in ticket.photos],
        [Decision(action=d.action, by=d.by, at=d.at) for d in ticket.decisions])


# The columns a summary shows. A new ticket's values (store_ticket) are rendered without an
# ORM object, so a column missing from them is one nothing has set yet: None.
_SUMMARY_COLUMNS = ("id", "status", "project_id", "description", "reason", "directed_by",
                    "captured_at", "captured_via", "captured_by", "total", "lines", "signature",
                    "photo_count", "link_token", "approved_by", "approved_at", "external",
                    "warnings")
# Of those, the ones a summary shapes rather than copies.
_SHAPED_COLUMNS = {"lines", "signature", "external", "warnings"}


def summary_fields(columns: Mapping[str, Any], photos: Iterable[Mapping[str, Any]],
                   decisions: Iterable[Decision]) -> dict[str, Any]:
    """A summary's fields from a ticket's column values, its photos' rows and its decisions.

    Lines, signature, photos and the external record stay the stored mappings: the summary
    model validates them all in one pass and ignores their keys it does not show (a line's
    kind, a signature's image key), rather than each being made a model of its own first.
    """
    kinds: dict[str, list] = {"labor": [], "equipment": [], "materials": []}
    for line in columns["lines"]:
        kinds[line["kind"]].append(line)
    return dict(
        {name: columns.get(name) for name in _SUMMARY_COLUMNS if name not in _SHAPED_COLUMNS},
        **kinds,
        signature=columns["signature"] or None,
        photos=list(photos),
        decisions=list(decisions),
        external=columns.get("external") or None,
        warnings=list(columns["warnings"] or []),
    )


def to_ticket(ticket: TicketRecord, routes: list[Route], extra_warnings: list[str] = ()) -> Ticket:
    """The full Ticket shape with routing."""
    fields = summarize(ticket)
    fields["warnings"] = fields["warnings"] + list(extra_warnings)
    return Ticket(**fields, routing=routing_lines(routes))


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


def _search_total(conditions: list) -> int:
    """How many tickets match a search, counted from the rows (the kept counts know no text)."""
    return int(db.session.scalar(select(func.count()).select_from(TicketRecord).where(*conditions)))


def list_ticket_records(company_id: int, *, status: str | None = None, project_id: str | None = None,
                        q: str | None = None, limit: int = 50, offset: int = 0
                        ) -> tuple[list[TicketRecord], int]:
    """A page of ticket records, newest first with the id breaking ties, and the match count."""
    conditions = _list_conditions(company_id, status, project_id, q)
    if q and q.strip():
        total = _search_total(conditions)
    else:
        total = counted_tickets(company_id, status=status, project_id=project_id)
    rows = db.session.scalars(
        select(TicketRecord).where(*conditions).order_by(*NEWEST_FIRST).limit(limit).offset(offset))
    return list(rows), total


def list_tickets(company_id: int, *, status: str | None, project_id: str | None,
                 limit: int, offset: int, q: str | None = None) -> JsonDocument:
    """A page of the company's tickets, newest first, id breaking ties (a TicketList document).

    Each ticket's summary is kept rendered in its row, so the page is one indexed read and a
    join of those documents; a row stored before that (NULL) is shaped from its fields.
    """
    if q and q.strip():
        conditions = _list_conditions(company_id, status, project_id, q)
        total = _search_total(conditions)
        rows = db.session.connection().execute(
            select(TicketRecord.id, TicketRecord.summary_json).where(*conditions)
            .order_by(*NEWEST_FIRST).limit(limit).offset(offset)).all()
        return _ticket_list(_page_documents(rows), total, limit, offset)
    # The common page (no search) runs statements built once per filter combination.
    values = {"company_id": company_id, "status": status, "project_id": project_id,
              "limit": limit, "offset": offset}
    by_status, by_project = bool(status), bool(project_id)
    reads = driver_reads()
    if reads.dialect_name == "sqlite":
        total, joined, listed, summarised = reads.first(_joined_page_statement(by_status, by_project),
                                                         values)
        if listed == summarised:
            return _ticket_list(joined or "", total, limit, offset)
    with reads.snapshot() as reader:
        total = reader.first(_total_statement(by_status, by_project), values)[0]
        rows = reader.rows(_page_statement(by_status, by_project), values)
    return _ticket_list(_page_documents(rows), total, limit, offset)


def _page_documents(rows: list) -> str:
    """The kept summaries of a page's (id, summary) rows, joined by commas."""
    documents = [summary for _id, summary in rows]
    if None in documents:
        documents = _with_missing_summaries(rows)
    return ",".join(documents)


def _ticket_list(documents: str, total: int, limit: int, offset: int) -> JsonDocument:
    """A TicketList document around a page's summaries, already joined by commas."""
    # The same bytes TicketList(...).model_dump_json() would write (tests compare the two).
    return JsonDocument('{"data":[' + documents +
                        f'],"total":{int(total)},"limit":{int(limit)},"offset":{int(offset)}}}')


def _filters(by_status: bool, by_project: bool) -> list:
    """Company, and optionally status and project, conditions with bound parameters."""
    conditions = [TicketRecord.company_id == bindparam("company_id")]
    if by_status:
        conditions.append(TicketRecord.status == bindparam("status"))
    if by_project:
        conditions.append(TicketRecord.project_id == bindparam("project_id"))
    return conditions


@functools.cache
def _page_statement(by_status: bool, by_project: bool):
    """The kept summaries of one page of tickets, newest first (built once per filter set)."""
    return (select(TicketRecord.id, TicketRecord.summary_json).where(*_filters(by_status, by_project))
            .order_by(*NEWEST_FIRST).limit(bindparam("limit")).offset(bindparam("offset")))


@functools.cache
def _joined_page_statement(by_status: bool, by_project: bool):
    """The total and a page's kept summaries joined by commas, as one row (SQLite only).

    Python's sqlite3 module lets go of the GIL around every column of every row it hands
    over, about four times per ticket for a page, and under load each let-go costs a thread
    switch (bench/fixes.md, round 6); joined inside SQLite, the page is one row. SQLite
    feeds group_concat in the order the subquery yields its rows: a LIMIT keeps the
    subquery from being merged into the aggregate, so that is the page's order (tests hold
    it, ties included). The last two columns count the page's rows and its kept summaries:
    when they differ, some ticket has none kept and the caller shapes the page row by row.
    PostgreSQL's driver takes a whole result at once, so there the rows come back as rows.
    """
    page = (select(TicketRecord.summary_json.label("summary"))
            .where(*_filters(by_status, by_project))
            .order_by(*NEWEST_FIRST).limit(bindparam("limit")).offset(bindparam("offset"))
            .subquery())
    return select(_total_statement(by_status, by_project).scalar_subquery(),
                  func.group_concat(page.c.summary, ","), func.count(), func.count(page.c.summary))


@functools.cache
def _total_statement(by_status: bool, by_project: bool):
    """How many tickets match, from the kept counts (built once per filter set)."""
    conditions = [TicketCount.company_id == bindparam("company_id")]
    if by_status:
        conditions.append(TicketCount.status == bindparam("status"))
    if by_project:
        conditions.append(TicketCount.project_id == bindparam("project_id"))
    return select(func.coalesce(func.sum(TicketCount.tickets), 0)).where(*conditions)


def _with_missing_summaries(rows: list) -> list[str]:
    """The documents of a page, shaping the tickets that have none kept from their fields."""
    missing = [ticket_id for ticket_id, summary in rows if summary is None]
    records = {t.id: t for t in db.session.scalars(
        select(TicketRecord).where(TicketRecord.id.in_(missing)))}
    return [summary if summary is not None else summary_document(records[ticket_id])
            for ticket_id, summary in rows]


def summary_document(ticket: TicketRecord) -> str:
    """A ticket as lists show it: the TicketSummary JSON document."""
    return TicketSummary(**summarize(ticket)).model_dump_json()


@event.listens_for(Session, "before_flush")
def render_summaries(session: Session, _context: Any, _instances: Any) -> None:
    """Render again the kept summary of every ticket this flush writes.

    A ticket is new or dirty whenever one of its fields changes or a photo or decision is
    appended to it (services add them through the relationships for that reason), so no
    write can leave a stale summary behind. The one write outside the ORM, a new ticket's
    INSERT (store_ticket), renders its summary with the same function first. Column
    defaults are applied here rather than at INSERT, so the summary shows exactly what is
    stored.
    """
    for record in (*session.new, *session.dirty):
        if not isinstance(record, TicketRecord):
            continue
        if record.captured_at is None:
            record.captured_at = utcnow()
        if record.status is None:
            record.status = "submitted"
        if record.warnings is None:
            record.warnings = []
        if record.photo_count is None:
            record.photo_count = 0
        record.summary_json = summary_document(record)


def fill_summaries(batch: int = 500) -> int:
    """Store the summary of every ticket that has none (tickets kept before summaries were)."""
    filled = 0
    while True:
        with write_transaction() as session:
            records = session.scalars(select(TicketRecord).where(
                TicketRecord.summary_json.is_(None)).limit(batch)).all()
            for record in records:  # marked changed: render_summaries stores the document
                flag_modified(record, "summary_json")
        filled += len(records)
        if len(records) < batch:
            return filled


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
    """How many of the company's tickets match a status and project, from the kept counts."""
    # On the session, not a driver read: the review queue reads its page there too, and a
    # count from a newer transaction could disagree with the page it is shown with.
    return int(db.session.connection().execute(
        _total_statement(bool(status), bool(project_id)),
        {"company_id": company_id, "status": status, "project_id": project_id}).scalar_one())


def count_ticket(session, company_id: int, project_id: str, status: str, change: int) -> None:
    """Move the count of a company's tickets in one project and status, in the caller's transaction.

    Every write that changes a ticket's status calls this inside the same write transaction,
    and store_ticket runs the same statement beside its INSERT, so the counts never disagree
    with the tickets. One upsert statement, so two transactions counting the first ticket
    of a project cannot both insert the row.
    """
    session.execute(_count_statement(session.get_bind().dialect.name),
                    {"company_id": company_id, "project_id": project_id, "status": status,
                     "tickets": change})


@functools.cache
def _count_statement(dialect: str):
    """The counting upsert for a database dialect, built once (building it costs more than running it)."""
    insert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}[dialect]
    table = TicketCount.__table__
    statement = insert(table)
    return statement.on_conflict_do_update(
        index_elements=[table.c.company_id, table.c.project_id, table.c.status],
        set_={"tickets": table.c.tickets + statement.excluded.tickets})


def change_status(session, ticket: TicketRecord, status: str) -> None:
    """Give a ticket a new status and move the counts with it (inside a write transaction)."""
    if ticket.status == status:
        return
    count_ticket(session, ticket.company_id, ticket.project_id, ticket.status, -1)
    count_ticket(session, ticket.company_id, ticket.project_id, status, 1)
    ticket.status = status


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
    # Through the relationship, with the time set now, so the ticket's summary shows it.
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
