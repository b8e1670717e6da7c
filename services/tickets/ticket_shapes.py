"""A ticket in its API shapes, with the routing it shows.

`routing_of` is the one place that decides which routing a ticket shows: the routing a
written ticket was written with, else its lines routed on the project's budget codes now,
read as the caller may wait for them (`Wait`). Reading a ticket never writes it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from typing import Any

from sqlalchemy import inspect

from models import Ticket as TicketRecord
from models import TicketPhoto
from models.schemas import RoutingLine, Ticket, TicketCommitment, TicketSummary
from services.platform.errors import ServiceError
from services.platform.web import public_base_url
from services.pricing import authorizations
from services.project_system import commitments, projects
from services.routing import learning
from services.routing.routing import Route, router_for, unrouted
from services.tickets import signatures
from services.tickets.ticket_records import find_ticket

LINE_KINDS = ("labor", "equipment", "materials")
PENDING_REASON = "routing is pending: the project's budget codes have not been read yet"
PENDING_WARNING = ("routing is pending: the ticket was kept without reading the project's budget "
                   "codes; it is routed when it is read while the project system answers")
UNREADABLE_REASON = "the project's budget codes could not be read"


class Wait(Enum):
    """How long reading a ticket may wait on the project system for the project's codes."""

    NO = "no"  # only the codes this process holds: a crew's answer, the signer's document
    BRIEFLY = "briefly"  # pages: at most projects.PAGE_WAIT_S, then the last codes known
    YES = "yes"  # the API and the CSV: as long as the project system takes


@dataclass(frozen=True)
class Routing:
    """Where a ticket's lines land, what to warn about it, and whether it is still pending
    (not worked out on the project's budget codes)."""

    lines: list[RoutingLine]
    warnings: list[str]
    pending: bool

    @property
    def to_check(self) -> int | None:
        """How many lines need a person's check; None while the routing is pending."""
        return None if self.pending else sum(1 for line in self.lines if line.needs_review)


def routing_of(ticket: TicketRecord, wait: Wait = Wait.YES) -> Routing:
    """The routing a ticket shows: as written, else on the project's codes as `wait` allows."""
    if ticket.status == "written" and ticket.written_routing:
        return Routing([RoutingLine.model_validate(line) for line in ticket.written_routing],
                       [], pending=False)
    suggest = learning.suggester(ticket, read=wait is not Wait.NO)
    if wait is Wait.NO:
        codes = projects.cached_catalog(ticket.company_id, ticket.project_id)
    else:
        try:
            codes = projects.catalog(ticket.company_id, ticket.project_id,
                                     briefly=wait is Wait.BRIEFLY)
        except ServiceError as error:  # not connected, unreachable, project gone: flag every line
            unavailable = f"routing is unavailable: {error.message}"
            if projects.cached_catalog(ticket.company_id, ticket.project_id) is None:
                return Routing(routing_lines(unrouted(ticket.lines, PENDING_REASON)),
                               [PENDING_WARNING, unavailable], pending=True)
            return Routing(routing_lines(unrouted(ticket.lines, UNREADABLE_REASON)),
                           [unavailable], pending=True)
    if codes is None:  # routed by the first read once the project's codes are known
        return Routing(routing_lines(unrouted(ticket.lines, PENDING_REASON)), [PENDING_WARNING],
                       pending=True)
    return Routing(routing_lines(router_for(codes).route_all(ticket.lines, suggest)), [], pending=False)


def commitment_of(ticket: TicketRecord, wait: Wait = Wait.YES) -> TicketCommitment | None:
    """The sub's commitment a ticket shows: as written, else as matched or confirmed now."""
    # None without waiting (Wait.NO), or while the project system cannot say.
    if ticket.status == "written":
        kept = (ticket.external or {}).get("commitment")
        return TicketCommitment.model_validate(kept) if kept else None
    if wait is Wait.NO:
        return None
    return commitments.shown(ticket.company_id, ticket.project_id, ticket.sub,
                             briefly=wait is Wait.BRIEFLY)


def routing_lines(routes: list[Route]) -> list[RoutingLine]:
    """Shape routes for the API."""
    return [RoutingLine(
        line=r.line, kind=r.kind, description=r.description, cost_type=r.cost_type,
        quantity=r.quantity, unit_cost=r.unit_cost, amount=r.amount,
        budget_code=r.budget_code.flat_code if r.budget_code else None,
        budget_code_id=r.budget_code.id if r.budget_code else None, routed=r.routed,
        exact=r.exact, needs_review=r.needs_review, reason=r.reason, pricing=r.pricing,
        learned=r.learned, learned_from_sub=r.learned_from_sub)
        for r in routes]


def get_ticket(company_id: int, ticket_id: str, wait: Wait = Wait.YES) -> Ticket:
    """One of a company's tickets whole, with the routing it shows (404 for another's)."""
    return shape_ticket(find_ticket(company_id, ticket_id), wait)


def shape(ticket: TicketRecord, schema: type[TicketSummary] | None = None,
          **extra: Any) -> TicketSummary:
    """A ticket in an output shape (TicketSummary by default): each of the shape's fields that is
    a column of the model is copied by name; `extra` gives the fields worked out elsewhere."""
    schema = schema or TicketSummary
    fields: dict[str, Any] = {name: getattr(ticket, name) for name in _copied_columns(schema)}
    fields.update(signed=bool(ticket.signature), external=external_of(ticket),
                  routing_pending=ticket.status != "written" and projects.cached_catalog(
                      ticket.company_id, ticket.project_id) is None)
    fields.update(extra)
    return schema.model_validate(fields, from_attributes=True)


def external_of(ticket: TicketRecord) -> dict[str, Any] | None:
    """The written record as the External shape reads it, with where it stands as last read."""
    if not ticket.external:
        return None
    return {**ticket.external, "status": ticket.record_status,
            "status_read_at": ticket.record_read_at, "deleted": bool(ticket.record_deleted),
            "change_orders": ticket.record_change_orders or []}


@functools.cache
def _copied_columns(schema: type[TicketSummary]) -> tuple[str, ...]:
    """The fields of an output shape that are columns of the ticket model."""
    columns = set(inspect(TicketRecord).column_attrs.keys())
    return tuple(name for name in schema.model_fields if name in columns)


def _photo_fields(evidence: str, photo: TicketPhoto) -> dict[str, Any]:
    """A photo row as the Photo shape reads it, with the addresses of its images."""
    return {"id": photo.id, "name": photo.name, "taken_at": photo.taken_at, "coords": photo.coords,
            "url": f"{evidence}/photos/{photo.id}",
            "thumbnail_url": f"{evidence}/photos/{photo.id}/thumbnail"}


def _signature_fields(evidence: str, ticket: TicketRecord,
                      signature: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored signature as the Signature shape reads it, with the addresses of its image."""
    if not signature:
        return None
    return {**signatures.readable(signature, ticket), "url": f"{evidence}/signature",
            "thumbnail_url": f"{evidence}/signature/thumbnail"}


def shape_ticket(ticket: TicketRecord, wait: Wait = Wait.YES, *, routing: Routing | None = None,
                 just_created: bool = False) -> Ticket:
    """The whole Ticket shape: the summary's fields, lines grouped by kind, photos, signature
    (and voided ones), decisions, not-to-exceed status, and the routing it shows (`routing`
    when the caller worked it out already) with its warnings. A ticket `just_created` has no
    signature requests yet, so none are looked up."""
    routing = routing or routing_of(ticket, wait)
    evidence = f"{public_base_url()}/v1/tickets/{ticket.id}"
    lines = {kind: [line for line in ticket.lines if line["kind"] == kind]
             for kind in (*LINE_KINDS, "markup")}
    awaiting = None if ticket.signature or just_created else \
        signatures.awaiting_since(ticket.company_id, [ticket.id]).get(ticket.id)
    return shape(ticket, Ticket, routing=routing.lines, routing_pending=routing.pending,
                 labor=lines["labor"], equipment=lines["equipment"],
                 materials=lines["materials"], markups=lines["markup"],
                 photos=[_photo_fields(evidence, photo) for photo in ticket.photos],
                 decisions=ticket.decisions,
                 signature=_signature_fields(evidence, ticket, ticket.signature),
                 voided_signatures=[signatures.readable(s, ticket)
                                    for s in ticket.voided_signatures or []],
                 awaiting_signature_since=awaiting,
                 nte=authorizations.status_of(ticket.company_id, ticket.authorization_id),
                 commitment=commitment_of(ticket, wait),
                 warnings=[*(ticket.warnings or []), *routing.warnings])
