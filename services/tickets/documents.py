"""The signed ticket document: one PDF with the claim, its photos, its signature and its history.

It is rendered from the service's own template (templates/documents/ticket.html, its pages in
_ticket_pages.html, which the backup package shows too) over the
ticket as people read it (services/tickets/ticket_view.py: its facts, times on the jobsite's clock,
quantities with their units, subtotals), so the document shows what a reviewer sees. The
PDF itself is made in the image pool (services/files/image_pool.py): at most IMAGE_WORKERS at once,
under a CPU limit, and at most DOCUMENT_SLOTS requests of a process wait for one, each for a
bounded time, so no caller holds a thread for long.
"""
from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

from flask import current_app, render_template

from models import Company, db, short_reference, utcnow
from models import Ticket as TicketRecord
from models.schemas import RoutingLine
from services.files import image_pool, pdf_render, storage
from services.files.photos import ImageRejected
from services.platform.errors import ServiceError
from services.platform.web import public_base_url, work_owner
from services.project_system import projects
from services.project_system.zones import UTC
from services.tickets import signatures
from services.tickets.plain_words import QUALIFIER_LABELS
from services.tickets.ticket_records import find_ticket
from services.tickets.ticket_shapes import Routing, Wait, shape_ticket
from services.tickets.ticket_view import KIND_LABELS, TicketView

MEDIA_TYPE = "application/pdf"
SIGNED_VIA_LABELS = {"crew_phone": "on the crew's phone", "signing_link": "from a signing link",
                     "api": "sent by a connected program"}
HOUR_TYPES = {"ot": "overtime", "dt": "double time"}
STATUS_LABELS = {"submitted": "Needs review", "written": "Written to Procore",
                 "rejected": "Rejected"}


class DocumentBusy(ServiceError):
    """The document could not be made in time; nothing was changed."""

    status = 503
    code = "document_busy"


def document_filename(ticket_id: str) -> str:
    """The document's file name, the same on every attempt: 'ticket-T-1A2B3C4D.pdf'."""
    return f"ticket-{short_reference(ticket_id)}.pdf"


def document_url(ticket_id: str) -> str:
    """The address of a ticket's document on the review pages (a reviewer signs in to open it)."""
    return f"{public_base_url()}/tickets/{ticket_id}/document.pdf"


# ------------------------------------------------------------------ entry points

def ticket_document(company_id: int, ticket_id: str) -> bytes:
    """The document of one of a company's tickets, routed as GET /v1/tickets/{id} routes it;
    another company's ticket is not found."""
    record = find_ticket(company_id, ticket_id)
    return render_pdf(document_html(record, wait=Wait.YES), wait_s=_config("DOCUMENT_WAIT_S"))


def render_ticket_document(ticket: TicketRecord, *, amounts: bool = True) -> bytes:
    """The document (PDF bytes) of a ticket record, without calling the project system.

    For callers without an account, such as the signer: lines carry the routing the ticket
    was written with, or the budget codes this process last read (pending when none), and
    the wait for a rendering slot is short (DOCUMENT_WAIT_S), else 503 document_busy.
    Without `amounts`, rates, amounts and totals are left out (as a signer who verifies time
    and materials only sees the ticket).
    """
    return render_pdf(document_html(ticket, amounts=amounts), wait_s=_config("DOCUMENT_WAIT_S"))


def approval_html(ticket: TicketRecord, routing: list[RoutingLine], actor: str,
                  destination: str) -> str:
    """The document's HTML as approved: the routing being written and the approval itself."""
    return document_html(ticket, routing=Routing(routing, [], pending=False), approval={
        "by": actor, "at": utcnow(), "destination": destination})


# ------------------------------------------------------------------ context

def document_html(ticket: TicketRecord, *, wait: Wait = Wait.NO, routing: Routing | None = None,
                  approval: dict[str, Any] | None = None, amounts: bool = True) -> str:
    """The document of a ticket as HTML, with the routing it shows (waiting on the project
    system as `wait` allows) or the `routing` being written."""
    _view, context = ticket_pages(ticket, wait=wait, routing=routing, approval=approval,
                                  amounts=amounts)
    return render_template("documents/ticket.html", t=context)


def ticket_pages(ticket: TicketRecord, *, wait: Wait = Wait.NO, routing: Routing | None = None,
                 approval: dict[str, Any] | None = None, amounts: bool = True
                 ) -> tuple[TicketView, dict[str, Any]]:
    """The ticket as people read it and what its pages show (templates/documents/_ticket_pages.html)."""
    view = TicketView(
        ticket=shape_ticket(ticket, wait, routing=routing),
        project_name=projects.known_project_name(ticket.company_id, ticket.project_id)
        or f"Project {ticket.project_id}",
        zone=projects.cached_time_zone(ticket.company_id, ticket.project_id) or UTC)
    company = db.session.get(Company, ticket.company_id)
    return view, document_context(
        view, company_name=company.name if company else "",
        image_keys={photo.id: photo.image_key for photo in ticket.photos},
        stored_signature=ticket.signature or {}, approval=approval,
        content_digest=signatures.content_digest(
            ticket, (ticket.signature or {}).get("content_sha256")), amounts=amounts)


def _get(item: Any, name: str, default: Any = None) -> Any:
    """A field of a shape or a mapping, or `default` when it has none."""
    if item is None:
        return default
    if isinstance(item, dict):
        return item.get(name, default)
    return getattr(item, name, default)


def _money(amount: Decimal | None) -> str:
    """Dollars with cents and thousands separators."""
    return "" if amount is None else f"${amount:,.2f}"


def _number(value: Any) -> str:
    """A stored quantity without trailing zeros."""
    if value in (None, ""):
        return ""
    return f"{Decimal(str(value)).normalize():f}"


def _line_rows(page: TicketView) -> tuple[list[dict], list[dict]]:
    """The cost lines and the markup lines of the document, each with every figure it shows."""
    t = page.ticket
    stored = [*t.labor, *t.equipment, *t.materials, *t.markups]
    costs, markups = [], []
    for route in t.routing:
        line = stored[route.line] if route.line < len(stored) else None
        quantity, rate = page.units(route)
        hours, detail = "", []
        if route.kind == "labor" and line is not None:
            hours = f"{_number(line.workers)} × {_number(line.hours)} h"
            detail += [c for c in (line.classification,) if c]
            if HOUR_TYPES.get(line.hour_type):
                detail.append(HOUR_TYPES[line.hour_type])
        elif route.kind == "equipment" and line is not None:
            hours = f"{_number(line.hours)} h"
        pricing = route.pricing or {}
        row = {"number": route.line + 1, "kind": KIND_LABELS.get(route.kind, route.kind),
               "description": route.description, "detail": ", ".join(detail),
               "quantity": quantity, "hours": hours, "rate": rate,
               "amount": _money(route.amount) if route.amount else "Priced by the office",
               "budget_code": route.budget_code,
               "check": route.needs_review, "priced": _get(pricing, "note")}
        (markups if route.kind == "markup" else costs).append(row)
    return costs, markups


def _qualifier(signature: Any, stored: dict[str, Any]) -> tuple[str | None, str | None]:
    """What the signature vouches for in plain words, and the signer's reason if given."""
    code = _get(signature, "qualifier") or stored.get("qualifier")
    reason = _get(signature, "qualifier_reason") or stored.get("qualifier_reason")
    if not code:
        return None, reason
    return QUALIFIER_LABELS.get(code, code), reason


def _signature_context(page: TicketView, stored: dict[str, Any],
                       digest: str | None) -> dict[str, Any] | None:
    """The signature as the document shows it, with its image's store key."""
    signature = page.ticket.signature
    voided = [_voided_entry(page, entry) for entry in page.ticket.voided_signatures]
    if signature is None and not stored.get("image_key"):
        return {"present": False, "voided": voided} if voided else None
    qualifier, reason = _qualifier(signature, stored)
    signed_via = _get(signature, "signed_via") or stored.get("signed_via")
    signed_hash = _get(signature, "content_sha256") or stored.get("content_sha256")
    return {
        "present": True,
        "src": pdf_render.IMAGE_SCHEME + stored["image_key"] if stored.get("image_key") else None,
        "name": _get(signature, "name") or stored.get("name") or "an unnamed signer",
        "role": _get(signature, "role") or stored.get("role"),
        "signed_at": page.clock(_get(signature, "signed_at") or stored.get("signed_at")),
        "qualifier": qualifier, "qualifier_reason": reason,
        "signed_via": SIGNED_VIA_LABELS.get(signed_via, signed_via) if signed_via else None,
        "content_sha256": signed_hash,
        "content_now": digest,
        "matches": None if not (signed_hash and digest) else signed_hash == digest,
        "voided": voided,
    }


def _voided_entry(page: TicketView, entry: Any) -> dict[str, Any]:
    """One earlier signature that a later change voided."""
    qualifier, reason = _qualifier(entry, {})
    return {"name": _get(entry, "name") or "an unnamed signer", "role": _get(entry, "role"),
            "signed_at": page.clock(_get(entry, "signed_at")),
            "voided_at": page.clock(_get(entry, "voided_at")),
            "why": _get(entry, "void_reason"),
            "qualifier": qualifier, "qualifier_reason": reason,
            "content_sha256": _get(entry, "content_sha256")}


def _history(page: TicketView, approval: dict[str, Any] | None) -> list[dict[str, str]]:
    """The ticket's history: recorded, each decision, and the approval being written."""
    t = page.ticket
    recorded = f"by {t.captured_by}" if t.captured_by else "by the crew"
    entries = [{"what": f"Recorded {recorded} via {page.came_in}",
                "when": page.clock(t.captured_at), "reason": None}]
    entries += [{"what": f"{d.action.capitalize()} by {d.by or 'unknown'}", "when": page.clock(d.at),
                 "reason": d.reason} for d in t.decisions]
    if approval:
        where = "a change event" if approval["destination"] == "change_event" else \
            "a daily log entry"
        entries.append({"what": f"Approved by {approval['by']}, written to Procore as {where}",
                        "when": page.clock(approval["at"]), "reason": None})
    return entries


def document_context(page: TicketView, *, company_name: str, image_keys: dict[int, str],
                     stored_signature: dict[str, Any], approval: dict[str, Any] | None = None,
                     content_digest: str | None = None, amounts: bool = True) -> dict[str, Any]:
    """Everything the document template shows, from the ticket as people read it."""
    t = page.ticket
    costs, markups = _line_rows(page)
    unpriced = {route.kind for route in t.routing if not route.amount}  # as signing shows them
    photos = [{"number": index, "name": photo.name, "caption": page.photo_caption(photo),
               "src": pdf_render.IMAGE_SCHEME + image_keys[photo.id]}
              for index, photo in enumerate(t.photos, start=1) if photo.id in image_keys]
    external = t.external
    return {
        "company": company_name, "project": page.project_name,
        "reference": short_reference(t.id), "ticket_id": t.id,
        "status": "Approved, being written to Procore" if approval else
        STATUS_LABELS.get(t.status, t.status),
        "record": (f"{'Change event' if external.destination == 'change_event' else 'Daily log entry'}"
                   f"{' #' + external.number if external.number else ''}") if external else None,
        "description": t.description, "facts": page.facts,
        "recorded_at": page.clock(t.captured_at),
        "authorization": f"{t.nte.reference} — {t.nte.title}" if t.nte and t.nte.title else None,
        "lines": costs, "markups": markups, "amounts": amounts,
        "markups_subtotal": _money(page.markups_subtotal) if page.markups_subtotal is not None
        else None,
        "subtotals": [(label, "Priced by the office" if kind in unpriced else _money(amount))
                      for kind, label, amount in page.subtotals],
        "total": "Priced by the office" if unpriced else _money(t.total), "photos": photos,
        "signature": _signature_context(page, stored_signature, content_digest),
        "history": _history(page, approval),
        "made_at": page.clock(utcnow()),
    }


# ------------------------------------------------------------------ rendering

_slots_lock = threading.Lock()


def _config(name: str) -> float:
    """A document setting as a number."""
    return float(current_app.config[name])


def _slots() -> threading.BoundedSemaphore:
    """This app's rendering slots (DOCUMENT_SLOTS requests at once per process)."""
    with _slots_lock:
        return current_app.extensions.setdefault(
            "document_slots", threading.BoundedSemaphore(int(current_app.config["DOCUMENT_SLOTS"])))


def render_pdf(html: str, *, wait_s: float,
               image_edge: int = pdf_render.DOCUMENT_IMAGE_EDGE) -> bytes:
    """The PDF of a document's HTML, made in the image pool within DOCUMENT_BUDGET_S.

    Waits at most `wait_s` for one of the process's DOCUMENT_SLOTS; 503 document_busy when
    none frees up, or when the rendering does not finish in time. Photos are shrunk to at most
    `image_edge` pixels.
    """
    config = current_app.config
    slots = _slots()
    if not slots.acquire(timeout=max(0.0, wait_s)):
        raise DocumentBusy("documents are being made for other requests; try again in a moment",
                           headers={"Retry-After": "5"})
    try:
        if int(config["IMAGE_WORKERS"]) <= 0:  # in this process: only for tests of the steps
            return pdf_render.render_pdf(html, storage.store_spec(), image_edge)
        settings = image_pool.PoolSettings(config["IMAGE_WORKERS"], config["IMAGE_CPU_SECONDS"],
                                           config["IMAGE_MEMORY_BYTES"])
        try:
            [result] = image_pool.run_all([(pdf_render.render_pdf,
                                            (html, storage.store_spec(), image_edge), {})],
                                          settings, _config("DOCUMENT_BUDGET_S"),
                                          cpu_seconds=int(config["DOCUMENT_CPU_SECONDS"]),
                                          owner=work_owner())
        except image_pool.ImagesBusy:
            result = ImageRejected("not made in time")
    finally:
        slots.release()
    if isinstance(result, ImageRejected):
        raise DocumentBusy("the document took too long to make; try again in a moment",
                           headers={"Retry-After": "5"})
    return result

